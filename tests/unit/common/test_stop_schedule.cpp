// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE stop_schedule
#include <boost/test/unit_test.hpp>

// When a command under a lease gets SIGTERM and SIGKILL (common/include/baton/common/stop_schedule.hpp):
// the borrowed time after a loss, and the supervisor's decisions, with time passed in by hand.

#include "baton/common/stop_schedule.hpp"

using namespace baton;
using namespace std::chrono_literals;
using ns = std::chrono::nanoseconds;

namespace {

// A lease of TTL 3 s renewed at 0: local deadline 2.7 s (margin 300 ms), the server's expiry 3 s at the
// earliest, SIGKILL by 2.85 s.
constexpr ns deadline = 2700ms;
constexpr ns margin = 300ms;

}  // namespace

BOOST_AUTO_TEST_CASE(sigkill_comes_half_the_margin_after_the_deadline_before_the_server_can_expire_it) {
  BOOST_TEST(borrowed_time(margin).count() == ns(150ms).count());
  BOOST_TEST(kill_by(deadline, margin).count() == ns(2850ms).count());
  BOOST_TEST(kill_by(deadline, margin) < deadline + margin);
}

BOOST_AUTO_TEST_CASE(a_grace_fits_only_within_the_borrowed_time) {
  BOOST_TEST(grace_fits(0ms, margin));
  BOOST_TEST(grace_fits(150ms, margin));
  BOOST_TEST(!grace_fits(151ms, margin));
  BOOST_TEST(!grace_fits(5s, margin));  // the old default, against a 3 s TTL
  BOOST_TEST(grace_fits(5s, 10s));      // a 10 s margin leaves 5 s
}

BOOST_AUTO_TEST_CASE(nothing_happens_before_the_deadline) {
  stop_schedule s(deadline, kill_by(deadline, margin), 100ms);
  BOOST_TEST(s.wake_at().count() == deadline.count());
  auto a = s.poll(deadline - 1ns);
  BOOST_TEST(!a.term);
  BOOST_TEST(!a.kill);
  BOOST_TEST(!s.terminating());
}

BOOST_AUTO_TEST_CASE(sigterm_at_the_deadline_then_sigkill_after_the_grace) {
  stop_schedule s(deadline, kill_by(deadline, margin), 100ms);
  auto a = s.poll(deadline);
  BOOST_TEST(a.term);
  BOOST_TEST(!a.kill);
  BOOST_TEST(s.wake_at().count() == ns(2800ms).count());
  BOOST_TEST(!s.poll(2799ms).kill);
  a = s.poll(2800ms);
  BOOST_TEST(!a.term);  // once
  BOOST_TEST(a.kill);
  BOOST_TEST(s.wake_at() == stop_schedule::never);
  a = s.poll(10s);
  BOOST_TEST(!a.term);
  BOOST_TEST(!a.kill);  // once
}

BOOST_AUTO_TEST_CASE(a_grace_longer_than_the_borrowed_time_is_cut_at_kill_by) {
  stop_schedule s(deadline, kill_by(deadline, margin), 5s);
  BOOST_TEST(s.poll(deadline).term);
  BOOST_TEST(s.wake_at().count() == ns(2850ms).count());
  BOOST_TEST(s.poll(2850ms).kill);
}

BOOST_AUTO_TEST_CASE(a_late_wake_up_sends_both_signals_at_once_when_kill_by_has_passed) {
  // The supervisor was not scheduled until after kill_by (a suspend, a starved host): no grace is left.
  stop_schedule s(deadline, kill_by(deadline, margin), 100ms);
  auto a = s.poll(4s);
  BOOST_TEST(a.term);
  BOOST_TEST(a.kill);
}

BOOST_AUTO_TEST_CASE(a_late_sigterm_still_ends_its_grace_by_kill_by) {
  stop_schedule s(deadline, kill_by(deadline, margin), 100ms);
  BOOST_TEST(s.poll(2800ms).term);                        // 100 ms late
  BOOST_TEST(s.wake_at().count() == ns(2850ms).count());  // not 2.9 s
}

BOOST_AUTO_TEST_CASE(a_renew_moves_both_limits_later) {
  stop_schedule s(deadline, kill_by(deadline, margin), 100ms);
  const ns later = deadline + 1s;
  s.extend(later, kill_by(later, margin));
  BOOST_TEST(s.wake_at().count() == later.count());
  BOOST_TEST(!s.poll(deadline).term);
  BOOST_TEST(s.poll(later).term);
  BOOST_TEST(s.poll(later + 100ms).kill);
}

BOOST_AUTO_TEST_CASE(an_older_report_never_shortens_the_limits) {
  stop_schedule s(deadline, kill_by(deadline, margin), 100ms);
  s.extend(deadline - 1s, kill_by(deadline - 1s, margin));
  BOOST_TEST(s.wake_at().count() == deadline.count());
  BOOST_TEST(!s.poll(deadline - 1ns).term);
}

BOOST_AUTO_TEST_CASE(no_extension_once_the_stop_has_begun) {
  // A lease lost is never regained: a renew reported after SIGTERM changes nothing.
  stop_schedule s(deadline, kill_by(deadline, margin), 100ms);
  BOOST_TEST(s.poll(deadline).term);
  s.extend(deadline + 10s, kill_by(deadline + 10s, margin));
  BOOST_TEST(s.wake_at().count() == ns(2800ms).count());
  BOOST_TEST(s.poll(2800ms).kill);
}
