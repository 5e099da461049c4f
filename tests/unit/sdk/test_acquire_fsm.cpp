// SPDX-License-Identifier: Apache-2.0
// The acquire state machine, step by step without a network: what each answer leads to, when the last try's
// grant must be handed back, and how the wait bound and the retry policy end an acquisition.
#define BOOST_TEST_MODULE acquire_fsm
#include <boost/test/unit_test.hpp>

#include "baton/detail/acquire_fsm.hpp"
#include "baton/error.hpp"

#include <boost/asio/error.hpp>

using namespace baton;
using namespace baton::detail;
using namespace std::chrono_literals;
using kind = acquire_fsm::action::kind;
using mode = acquire_fsm::mode;

namespace {
const clock::time_point t0 = clock::time_point{} + 1000s;

retry_policy policy() {
  retry_policy r;
  r.initial_backoff = 100ms;
  r.max_backoff = 1000ms;
  r.jitter = 0.5;
  r.max_attempts = 3;
  return r;
}

acquire_reply held_by(std::uint64_t token) {
  acquire_reply r;
  r.ec = make_error_code(error::held);
  r.holder.owner = "other";
  r.holder.token = token;
  return r;
}

acquire_reply failed(error e, std::string diagnostic = {}) {
  acquire_reply r;
  r.ec = make_error_code(e);
  r.diagnostic = std::move(diagnostic);
  return r;
}

get_reply poll_failed(error e) {
  get_reply g;
  g.ec = make_error_code(e);
  return g;
}
}  // namespace

BOOST_AUTO_TEST_CASE(every_acquisition_starts_with_one_try) {
  acquire_fsm f(mode::wait, "k", t0, policy(), 1);  // a wait bound already passed: still one try
  BOOST_TEST((f.start().what == kind::send_acquire));
  BOOST_TEST((f.on_acquire(acquire_reply{}, t0).what == kind::granted));
}

BOOST_AUTO_TEST_CASE(a_single_try_reports_the_holder_and_never_waits) {
  acquire_fsm f(mode::try_once, "k", std::nullopt, policy(), 1);
  auto a = f.on_acquire(held_by(7), t0);
  BOOST_TEST((a.what == kind::held));
  BOOST_TEST(a.holder.token == 7u);
  BOOST_TEST(a.holder.owner == "other");
}

BOOST_AUTO_TEST_CASE(a_single_try_retries_transient_failures_up_to_max_attempts_then_hands_back_the_grant) {
  acquire_fsm f(mode::try_once, "k", std::nullopt, policy(), 1);
  auto a = f.on_acquire(failed(error::connection_failed), t0);
  BOOST_TEST((a.what == kind::pause));
  BOOST_TEST(a.retry);
  BOOST_TEST((a.ec == error::connection_failed));
  BOOST_TEST((a.wait >= 50ms && a.wait <= 100ms));  // the first backoff, jittered by half
  BOOST_TEST((f.on_pause_done().what == kind::send_acquire));
  a = f.on_acquire(failed(error::storage_unavailable), t0);
  BOOST_TEST((a.what == kind::pause));
  BOOST_TEST((a.wait >= 100ms && a.wait <= 200ms));  // doubled
  // The third failure is the last attempt: the outcome is unknown, so what it may have got is handed back.
  a = f.on_acquire(failed(error::request_timeout, "no answer"), t0);
  BOOST_TEST((a.what == kind::fail));
  BOOST_TEST(a.abandon);
  BOOST_TEST((a.ec == error::acquire_timeout));  // a request timeout under the acquire's own name
  BOOST_TEST(a.message == "no answer");
}

BOOST_AUTO_TEST_CASE(a_permanent_error_ends_at_once_with_the_servers_message_and_nothing_to_hand_back) {
  for (auto m : {mode::try_once, mode::wait}) {
    acquire_fsm f(m, "k", std::nullopt, policy(), 1);
    auto a = f.on_acquire(failed(error::invalid_config, "ttl_ms out of range"), t0);
    BOOST_TEST((a.what == kind::fail));
    BOOST_TEST(!a.abandon);
    BOOST_TEST((a.ec == error::invalid_config));
    BOOST_TEST(a.message == "ttl_ms out of range");
  }
}

BOOST_AUTO_TEST_CASE(a_waiting_acquire_long_polls_past_the_holder_then_tries_again) {
  acquire_fsm f(mode::wait, "k", std::nullopt, policy(), 1);
  auto a = f.on_acquire(held_by(9), t0);
  BOOST_TEST((a.what == kind::long_poll));
  BOOST_TEST(a.poll_token == 9u);
  BOOST_TEST((a.wait == 30s));  // without a bound: the longest poll
  BOOST_TEST((f.on_poll(get_reply{}, t0 + 2s).what == kind::send_acquire));
}

BOOST_AUTO_TEST_CASE(a_bounded_wait_polls_no_longer_than_the_time_left_and_gives_up_when_it_passed) {
  acquire_fsm f(mode::wait, "k", t0 + 5s, policy(), 1);
  auto a = f.on_acquire(held_by(9), t0 + 2s);
  BOOST_TEST((a.what == kind::long_poll));
  BOOST_TEST((a.wait == 3s));
  a = f.on_acquire(held_by(9), t0 + 5s - 1us);
  BOOST_TEST((a.wait == 1ms));  // never a zero-length poll
  a = f.on_acquire(held_by(9), t0 + 5s);
  BOOST_TEST((a.what == kind::fail));
  BOOST_TEST((a.ec == error::wait_timeout));
  BOOST_TEST(!a.abandon);  // "held" is a definite answer: nothing was granted
  BOOST_TEST(a.message == "lock \"k\" still held");
}

BOOST_AUTO_TEST_CASE(a_waiting_acquire_retries_transient_failures_until_its_bound_then_hands_back_the_grant) {
  acquire_fsm f(mode::wait, "k", t0 + 5s, policy(), 1);
  for (int i = 0; i < 10; ++i) {  // more than max_attempts: a waiting acquire is bounded by time, not tries
    auto a = f.on_acquire(failed(error::connection_failed), t0 + 1s);
    BOOST_TEST((a.what == kind::pause));
    BOOST_TEST((a.wait <= 1000ms));  // max_backoff
  }
  // The pause never runs past the bound.
  auto a = f.on_acquire(failed(error::connection_failed), t0 + 5s - 10ms);
  BOOST_TEST((a.what == kind::pause));
  BOOST_TEST((a.wait <= 10ms));
  a = f.on_acquire(failed(error::request_timeout), t0 + 5s);
  BOOST_TEST((a.what == kind::fail));
  BOOST_TEST((a.ec == error::wait_timeout));
  BOOST_TEST(a.abandon);
  BOOST_TEST(a.message.find("no definite answer") != std::string::npos, a.message);
  BOOST_TEST(a.message.find("acquire") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_failed_long_poll_backs_off_keeps_its_backoff_and_hands_back_nothing) {
  acquire_fsm f(mode::wait, "k", t0 + 5s, policy(), 1);
  BOOST_TEST((f.on_acquire(held_by(3), t0).what == kind::long_poll));
  auto a = f.on_poll(poll_failed(error::server_busy), t0);
  BOOST_TEST((a.what == kind::pause));
  BOOST_TEST(a.retry);
  BOOST_TEST(f.failures() == 1);
  // A "held" answer after it does not reset the backoff (a server out of waiter slots sees this client less
  // and less often); a poll that was answered does.
  BOOST_TEST((f.on_acquire(held_by(3), t0).what == kind::long_poll));
  BOOST_TEST((f.on_poll(poll_failed(error::server_busy), t0).what == kind::pause));
  BOOST_TEST(f.failures() == 2);
  BOOST_TEST((f.on_acquire(held_by(3), t0).what == kind::long_poll));
  BOOST_TEST((f.on_poll(get_reply{}, t0).what == kind::send_acquire));
  BOOST_TEST(f.failures() == 0);
  // At the bound, a failed poll ends the wait as "still held", with nothing to hand back.
  BOOST_TEST((f.on_acquire(held_by(3), t0).what == kind::long_poll));
  a = f.on_poll(poll_failed(error::connection_failed), t0 + 5s);
  BOOST_TEST((a.what == kind::fail));
  BOOST_TEST((a.ec == error::wait_timeout));
  BOOST_TEST(!a.abandon);
  // A permanent poll error ends it too.
  acquire_fsm g(mode::wait, "k", std::nullopt, policy(), 1);
  g.on_acquire(held_by(3), t0);
  a = g.on_poll(poll_failed(error::unauthorized), t0);
  BOOST_TEST((a.what == kind::fail));
  BOOST_TEST((a.ec == error::unauthorized));
}

BOOST_AUTO_TEST_CASE(a_caller_cancelled_while_its_request_is_on_its_way_hands_back_what_it_gets) {
  for (auto m : {mode::try_once, mode::wait}) {
    acquire_fsm f(m, "k", std::nullopt, policy(), 1);
    auto a = f.on_cancelled_in_flight();
    BOOST_TEST((a.what == kind::fail));
    BOOST_TEST((a.ec == boost::asio::error::operation_aborted));
    BOOST_TEST(a.abandon);  // the answer may be a grant nobody would speak for
  }
}

BOOST_AUTO_TEST_CASE(a_grant_that_arrives_as_the_client_shuts_down_is_handed_back) {
  acquire_fsm f(mode::wait, "k", std::nullopt, policy(), 1);
  BOOST_TEST((f.on_grant(false).what == kind::granted));
  auto a = f.on_grant(true);
  BOOST_TEST((a.what == kind::fail));
  BOOST_TEST((a.ec == error::shut_down));
  BOOST_TEST(a.abandon);
  BOOST_TEST(a.message.find("shut down") != std::string::npos);
}

// A key in lock-delay (docs/protocol.md, "Lock-delay") has no holder to long-poll on: the poll would answer
// at once, again and again. The waiting acquire pauses for the delay's remaining time, then tries again.
BOOST_AUTO_TEST_CASE(a_waiting_acquire_pauses_out_a_lock_delay_instead_of_polling) {
  acquire_reply delayed = held_by(9);
  delayed.holder.owner.clear();
  delayed.holder.lock_delay_remaining = 1500ms;
  acquire_fsm f(mode::wait, "k", t0 + 5s, policy(), 1);
  auto a = f.on_acquire(delayed, t0);
  BOOST_TEST((a.what == kind::pause));
  BOOST_TEST((a.wait == 1500ms));
  BOOST_TEST(!a.retry);  // a definite answer, not a failure: no backoff counted
  BOOST_TEST(f.failures() == 0);
  BOOST_TEST((f.on_pause_done().what == kind::send_acquire));
  // Never past the give-up instant, and then the wait fails naming the delay.
  a = f.on_acquire(delayed, t0 + 4s);
  BOOST_TEST((a.what == kind::pause));
  BOOST_TEST((a.wait == 1s));
  a = f.on_acquire(delayed, t0 + 5s);
  BOOST_TEST((a.what == kind::fail));
  BOOST_TEST((a.ec == error::wait_timeout));
  BOOST_TEST(a.message == "lock \"k\" still in lock-delay");
  // A try-once acquire is answered held, the delay in its holder.
  acquire_fsm once(mode::try_once, "k", std::nullopt, policy(), 1);
  a = once.on_acquire(delayed, t0);
  BOOST_TEST((a.what == kind::held));
  BOOST_TEST((a.holder.lock_delay_remaining == 1500ms));
}
