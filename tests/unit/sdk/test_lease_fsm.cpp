// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE lease_fsm
#include <boost/test/unit_test.hpp>

#include "baton/detail/lease_fsm.hpp"

#include <set>

using namespace baton;
using namespace baton::detail;
using namespace std::chrono_literals;
using action = lease_fsm::action;

namespace {
const clock::time_point t0 = clock::time_point{} + 1000s;

lease_fsm::timing timing(milliseconds ttl = 9000ms, milliseconds every = 3000ms, milliseconds margin = 900ms,
                         double jitter = 0.2) {
  retry_policy r;
  r.initial_backoff = 100ms;
  r.max_backoff = 1000ms;
  r.jitter = 0.5;
  return {ttl, every, margin, jitter, r};
}
}  // namespace

BOOST_AUTO_TEST_CASE(deadline_counts_from_the_send_time_minus_the_safety_margin) {
  lease_fsm f(timing(), t0, 1);
  BOOST_TEST((f.state() == lease_state::active));
  BOOST_TEST((f.deadline() == t0 + 9000ms - 900ms));
}

BOOST_AUTO_TEST_CASE(renew_times_stay_within_the_jitter_bounds) {
  // Many leases with different seeds: every first and later renew lands within period * [0.8, 1.2].
  std::set<clock::duration::rep> distinct;
  for (std::uint64_t seed = 0; seed < 500; ++seed) {
    lease_fsm f(timing(), t0, seed);
    auto first = f.next_renew() - t0;
    BOOST_TEST((first >= 2400ms && first <= 3600ms));
    distinct.insert(first.count());
    auto sent = t0 + 2500ms;
    BOOST_TEST((f.on_renew_ok(sent, sent + 5ms) == lease_fsm::renew_outcome::renewed));
    auto next = f.next_renew() - sent;
    BOOST_TEST((next >= 2400ms && next <= 3600ms));
  }
  // Jitter really spreads renewals (a fleet does not renew in lock-step).
  BOOST_TEST(distinct.size() > 400u);
}

BOOST_AUTO_TEST_CASE(zero_jitter_renews_exactly_on_the_period) {
  lease_fsm f(timing(9000ms, 3000ms, 900ms, 0.0), t0, 7);
  BOOST_TEST((f.next_renew() == t0 + 3000ms));
}

BOOST_AUTO_TEST_CASE(poll_waits_then_asks_for_a_renew) {
  lease_fsm f(timing(9000ms, 3000ms, 900ms, 0.0), t0, 7);
  BOOST_TEST((f.poll(t0 + 2999ms) == action::wait));
  BOOST_TEST((f.poll(t0 + 3000ms) == action::renew));
  BOOST_TEST((f.wake_at() == t0 + 3000ms));
}

BOOST_AUTO_TEST_CASE(confirmed_renew_moves_the_deadline_from_its_send_time) {
  lease_fsm f(timing(9000ms, 3000ms, 900ms, 0.0), t0, 7);
  auto sent = t0 + 3000ms;
  f.on_renew_ok(sent, sent + 2000ms);  // a slow answer: the deadline still counts from the send time
  BOOST_TEST((f.deadline() == sent + 8100ms));
  BOOST_TEST((f.next_renew() == sent + 3000ms));
  BOOST_TEST(f.consecutive_failures() == 0);
}

BOOST_AUTO_TEST_CASE(transport_error_is_retried_with_backoff_before_the_deadline) {
  lease_fsm f(timing(), t0, 3);
  auto now = t0 + 3000ms;
  f.on_renew_failed(now);
  BOOST_TEST((f.state() == lease_state::active));
  BOOST_TEST(f.consecutive_failures() == 1);
  auto wait1 = f.next_renew() - now;
  BOOST_TEST((wait1 >= 50ms && wait1 <= 100ms));  // initial backoff 100 ms, jitter 0.5
  now = f.next_renew();
  f.on_renew_failed(now);
  auto wait2 = f.next_renew() - now;
  BOOST_TEST((wait2 >= 100ms && wait2 <= 200ms));  // doubled
  // Many failures: the backoff is capped, and never reaches past halfway to the deadline.
  for (int i = 0; i < 20 && f.state() == lease_state::active; ++i) {
    now = f.next_renew();
    if (now >= f.deadline()) break;
    f.on_renew_failed(now);
    if (f.state() != lease_state::active) break;
    BOOST_TEST((f.next_renew() - now <= 1000ms));
    BOOST_TEST((f.next_renew() - now <= (f.deadline() - now) / 2));
  }
}

BOOST_AUTO_TEST_CASE(refused_renew_loses_the_lease_at_once) {
  lease_fsm f(timing(), t0, 1);
  f.on_renew_refused("token_mismatch");
  BOOST_TEST((f.state() == lease_state::lost));
  BOOST_TEST(f.loss_reason().find("token_mismatch") != std::string::npos);
  BOOST_TEST((f.poll(t0 + 1ms) == action::wait));  // nothing more to do
}

BOOST_AUTO_TEST_CASE(lost_at_the_deadline_when_nothing_answers) {
  lease_fsm f(timing(), t0, 1);
  BOOST_TEST((f.poll(f.deadline() - 1us) != action::declare_lost));
  BOOST_TEST((f.poll(f.deadline()) == action::declare_lost));
  BOOST_TEST((f.state() == lease_state::lost));
  BOOST_TEST(f.loss_reason().find("deadline") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(failure_after_the_deadline_loses_the_lease) {
  lease_fsm f(timing(), t0, 1);
  f.on_renew_failed(f.deadline() + 1ms);
  BOOST_TEST((f.state() == lease_state::lost));
}

BOOST_AUTO_TEST_CASE(a_late_renew_success_does_not_revive) {
  lease_fsm f(timing(), t0, 1);
  auto d = f.deadline();
  // The renew was sent in time, but its answer came after the deadline.
  BOOST_TEST((f.on_renew_ok(d - 500ms, d + 1ms) == lease_fsm::renew_outcome::too_late));
  BOOST_TEST((f.state() == lease_state::lost));
  BOOST_TEST((f.deadline() == d));
  // Once lost, nothing brings it back.
  BOOST_TEST((f.on_renew_ok(d + 2ms, d + 3ms) == lease_fsm::renew_outcome::too_late));
  BOOST_TEST((f.state() == lease_state::lost));
}

BOOST_AUTO_TEST_CASE(released_is_final) {
  lease_fsm f(timing(), t0, 1);
  f.on_released();
  BOOST_TEST((f.state() == lease_state::released));
  BOOST_TEST((f.on_renew_ok(t0, t0 + 1ms) == lease_fsm::renew_outcome::too_late));
  f.on_renew_refused("x");
  f.on_lost("y");
  BOOST_TEST((f.state() == lease_state::released));
  BOOST_TEST((f.poll(f.deadline() + 1s) == action::wait));
}

BOOST_AUTO_TEST_CASE(options_validation_rejects_unsafe_renew_periods) {
  lease_options o;
  o.ttl = 9000ms;
  BOOST_CHECK_NO_THROW(o.validate());
  BOOST_TEST(o.effective_renew_every().count() == 3000);
  BOOST_TEST(o.effective_safety_margin().count() == 900);
  o.renew_every = 7000ms;  // with +20% jitter it would renew after the deadline
  BOOST_CHECK_THROW(o.validate(), std::exception);
  o.renew_every = 0ms;
  o.safety_margin = 9000ms;
  BOOST_CHECK_THROW(o.validate(), std::exception);
  o.safety_margin = 0ms;
  o.jitter = 1.0;
  BOOST_CHECK_THROW(o.validate(), std::exception);
}

// A batching client's renewals wake on a grid of the batch window: later by less than one step, never for
// the deadline itself, never so late that a whole request no longer fits before the deadline.
BOOST_AUTO_TEST_CASE(wakes_move_up_to_the_batch_grid_but_never_past_what_the_deadline_allows) {
  const auto deadline = t0 + 8100ms;
  // On the grid already: unchanged. Between two steps: the next one.
  BOOST_TEST((wake_on_grid(t0 + 3000ms, deadline, 2ms, 2000ms) == t0 + 3000ms));
  BOOST_TEST((wake_on_grid(t0 + 3000ms + 1ns, deadline, 2ms, 2000ms) == t0 + 3002ms));
  BOOST_TEST((wake_on_grid(t0 + 3001ms + 999us, deadline, 2ms, 2000ms) == t0 + 3002ms));
  // Renewals falling due anywhere within one step wake at one instant.
  std::set<clock::time_point> wakes;
  for (auto at = t0 + 5000ms + 1ns; at <= t0 + 5002ms; at += 37us)
    wakes.insert(wake_on_grid(at, deadline, 2ms, 2000ms));
  BOOST_TEST(wakes.size() == 1u);
  BOOST_TEST((*wakes.begin() == t0 + 5002ms));
  // The deadline's own look is never moved, nor one whose moved wake leaves less than a request's time.
  BOOST_TEST((wake_on_grid(deadline, deadline, 2ms, 2000ms) == deadline));
  BOOST_TEST((wake_on_grid(t0 + 6100ms + 1ns, deadline, 2ms, 2000ms) == t0 + 6100ms + 1ns));
  BOOST_TEST((wake_on_grid(t0 + 6098ms + 1ns, deadline, 2ms, 2000ms) == t0 + 6100ms));
  // No window: no grid.
  BOOST_TEST((wake_on_grid(t0 + 3000ms + 1ns, deadline, 0ms, 2000ms) == t0 + 3000ms + 1ns));
}

// Without a window of the client's, a lease's batch window is a hundredth of its renew period, so every lease
// spends the same share of its lead time waiting for others: at least 2 ms, at most a quarter of a request.
BOOST_AUTO_TEST_CASE(the_default_batch_window_is_a_hundredth_of_the_renew_period_within_its_bounds) {
  BOOST_TEST(default_batch_window(20s, 2000ms).count() == 200);    // a 60 s TTL renewed every 20 s
  BOOST_TEST(default_batch_window(5s, 2000ms).count() == 50);      // a 15 s TTL renewed every 5 s
  BOOST_TEST(default_batch_window(5001ms, 2000ms).count() == 51);  // rounded up to whole milliseconds
  BOOST_TEST(default_batch_window(100ms, 2000ms).count() == 2);    // never below 2 ms
  BOOST_TEST(default_batch_window(0ms, 2000ms).count() == 2);
  BOOST_TEST(default_batch_window(1h, 2000ms).count() == 500);  // never above request_timeout / 4
  BOOST_TEST(default_batch_window(1h, 4ms).count() == 1);       // the bound wins over the 2 ms floor
}
