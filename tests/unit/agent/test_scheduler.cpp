// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE scheduler
#include <boost/test/unit_test.hpp>

#include "scheduler.hpp"

using namespace baton::agent;
using namespace std::chrono_literals;
using kind = slot_decision::kind;

namespace {

sys_seconds at(int h, int m, int s = 0) {
  sys_seconds day = date::sys_days(date::year{2026} / 11 / 30);
  return day + std::chrono::hours(h) + std::chrono::minutes(m) + std::chrono::seconds(s);
}

scheduled_job job(std::string name, std::string expr, bool overlap = false, bool missed_once = false) {
  return scheduled_job{std::move(name), schedule::parse(expr), nullptr, overlap, missed_once,
                       false,           std::nullopt};
}

}  // namespace

BOOST_AUTO_TEST_CASE(nothing_is_due_before_the_election) {
  scheduler s({job("a", "* * * * *")});
  BOOST_TEST(s.due(at(10, 5)).empty());
  BOOST_TEST(!s.next_due().has_value());
}

BOOST_AUTO_TEST_CASE(after_election_slots_start_when_due) {
  scheduler s({job("every-minute", "* * * * *"), job("hourly", "0 * * * *")});
  BOOST_TEST(s.on_elected(at(10, 5, 30), 60s).empty());
  BOOST_TEST((*s.next_due() == at(10, 6)));
  BOOST_TEST(s.due(at(10, 5, 59)).empty());
  auto d = s.due(at(10, 6));
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST((d[0].what == kind::start));
  BOOST_TEST(d[0].job == 0u);
  BOOST_TEST((d[0].slot == at(10, 6)));
  BOOST_TEST(d[0].missed == 0u);
  BOOST_TEST((*s.next_due() == at(10, 7)));
}

BOOST_AUTO_TEST_CASE(a_late_wakeup_runs_only_the_latest_slot_and_counts_the_missed_ones) {
  scheduler s({job("a", "* * * * *")});
  s.on_elected(at(10, 0, 30), 60s);
  auto d = s.due(at(10, 4, 10));  // paused from 10:00:30 to 10:04:10: slots 10:01..10:04 passed
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST((d[0].slot == at(10, 4)));
  BOOST_TEST(d[0].missed == 3u);
  BOOST_TEST((*s.next_due() == at(10, 5)));
}

BOOST_AUTO_TEST_CASE(overlap_forbid_skips_a_slot_while_the_previous_run_is_going) {
  scheduler s({job("forbid", "* * * * *"), job("allow", "* * * * *", true)});
  s.on_elected(at(10, 0, 30), 60s);
  auto first = s.due(at(10, 1));
  BOOST_REQUIRE(first.size() == 2u);
  s.run_started(0);
  s.run_started(1);
  auto second = s.due(at(10, 2));
  BOOST_REQUIRE(second.size() == 2u);
  BOOST_TEST((second[0].what == kind::skip_overlap));
  BOOST_TEST((second[1].what == kind::start));
  s.run_finished(0);
  BOOST_TEST((s.due(at(10, 3))[0].what == kind::start));
}

BOOST_AUTO_TEST_CASE(misfire_run_once_runs_the_latest_slot_missed_during_the_failover) {
  scheduler s({job("skip", "*/5 * * * *"), job("once", "*/5 * * * *", false, true)});
  // The previous leader died; this agent is elected at 10:06:20, 80 s after the 10:05 slot.
  auto d = s.on_elected(at(10, 6, 20), 120s);
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].job == 1u);
  BOOST_TEST((d[0].slot == at(10, 5)));
  BOOST_TEST((d[0].what == kind::start));
  // Outside the window, nothing is run.
  scheduler late({job("once", "*/5 * * * *", false, true)});
  BOOST_TEST(late.on_elected(at(10, 9, 50), 120s).empty());
}

BOOST_AUTO_TEST_CASE(losing_leadership_stops_all_scheduling) {
  scheduler s({job("a", "* * * * * *")});
  s.on_elected(at(10, 0), 60s);
  BOOST_TEST(!s.due(at(10, 0, 1)).empty());
  s.on_lost();
  BOOST_TEST(!s.leading());
  BOOST_TEST(s.due(at(10, 0, 5)).empty());
  BOOST_TEST(!s.next_due().has_value());
  // Re-elected: scheduling resumes from the new election, with no backlog from the gap.
  s.on_elected(at(10, 1), 60s);
  auto d = s.due(at(10, 1, 1));
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].missed == 0u);
}

BOOST_AUTO_TEST_CASE(run_counts_never_go_negative) {
  scheduler s({job("a", "* * * * *")});
  s.run_finished(0);
  BOOST_TEST(s.running(0) == 0);
  s.run_started(0);
  s.run_started(0);
  s.run_finished(0);
  BOOST_TEST(s.running(0) == 1);
}

BOOST_AUTO_TEST_CASE(a_backward_clock_step_restarts_interval_schedules_from_the_new_time) {
  scheduler s({job("every-minute", "* * * * *"), job("every-90s", "@every 90s")});
  s.on_elected(at(10, 0, 30), 60s);
  BOOST_TEST(s.due(at(10, 31, 5)).size() == 2u);
  BOOST_TEST((*s.next_due() == at(10, 31, 30)));
  // The clock is corrected one hour back. Without recomputing, both jobs would wait for 10:31:30 again.
  BOOST_TEST(s.due(at(9, 31, 10)).empty());
  BOOST_TEST((*s.next_due() == at(9, 31, 30)));
  auto d = s.due(at(9, 32));
  BOOST_REQUIRE(d.size() == 2u);
  BOOST_TEST((d[0].slot == at(9, 32)));
  BOOST_TEST(d[0].missed == 0u);
  BOOST_TEST((d[1].slot == at(9, 31, 30)));
  BOOST_TEST((d[0].what == kind::start));
}

BOOST_AUTO_TEST_CASE(a_short_backward_step_does_not_repeat_a_time_of_day_slot) {
  scheduler s({job("office-hours", "0 9-17 * * *"), job("every-minute", "* * * * *")});
  s.on_elected(at(9, 30), 60s);
  auto ran = s.due(at(10, 0, 1));
  BOOST_REQUIRE(ran.size() == 2u);
  BOOST_TEST((ran[0].slot == at(10, 0)));
  // 40 minutes back: the 10:00 run is not repeated; the next office-hours slot is still 11:00.
  BOOST_TEST(s.due(at(9, 20)).empty());
  BOOST_TEST((*s.next_due() == at(9, 21)));
  auto d = s.due(at(10, 0, 30));
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].job == 1u);
  BOOST_TEST((s.due(at(11, 0))[0].slot == at(11, 0)));
}

BOOST_AUTO_TEST_CASE(a_backward_step_beyond_the_bound_resets_time_of_day_schedules_too) {
  scheduler s({job("daily", "0 10 * * *")});
  s.on_elected(at(9, 0), 60s);
  BOOST_REQUIRE(s.due(at(10, 0)).size() == 1u);
  BOOST_TEST((*s.next_due() == at(10, 0) + 24h));
  // The clock had been a day and a half ahead. The job runs at the next 10:00 of the corrected clock rather
  // than waiting two days for the slot it was waiting for.
  const auto corrected = at(22, 0) - 48h;
  BOOST_TEST(s.due(corrected).empty());
  BOOST_TEST((*s.next_due() == at(10, 0) - 24h));
  // Exactly at the bound the step still counts as short.
  scheduler t({job("daily", "0 10 * * *")});
  t.on_elected(at(9, 0), 60s);
  t.due(at(10, 0));
  t.due(at(10, 0) - scheduler::max_unrepeated_step);
  BOOST_TEST((*t.next_due() == at(10, 0) + 24h));
}

BOOST_AUTO_TEST_CASE(a_new_job_list_keeps_runs_in_flight_and_starts_no_past_slot) {
  scheduler s({job("a", "* * * * *"), job("b", "0 * * * *")});
  s.on_elected(at(10, 0, 30), 60s);
  BOOST_REQUIRE(s.due(at(10, 1, 10)).size() == 1u);
  s.run_started(0);
  // Reloaded at 10:01:40: `a` now every 5 minutes and listed second, `b` gone, `c` new.
  const auto before = s.replace_jobs({job("c", "*/30 * * * * *"), job("a", "*/5 * * * *")});
  BOOST_REQUIRE(before.size() == 2u);
  BOOST_TEST(!before[0].has_value());
  BOOST_TEST(*before[1] == 0u);
  BOOST_TEST(s.running(1) == 1);  // a's run in flight is still counted, under its new index
  BOOST_TEST(s.running(0) == 0);
  // The slots are computed from 10:01:10, the last time they were: c's 10:01:30 is due, nothing earlier.
  BOOST_TEST((*s.next_due() == at(10, 1, 30)));
  auto d = s.due(at(10, 1, 40));
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].job == 0u);
  BOOST_TEST((d[0].slot == at(10, 1, 30)));
  BOOST_TEST((s.due(at(10, 5))[1].what == kind::skip_overlap));  // a's 10:05 slot, its run still going
  // Not leading: nothing is pending until the next election computes the slots.
  scheduler idle({job("a", "* * * * *")});
  idle.replace_jobs({job("a", "* * * * *"), job("b", "* * * * *")});
  BOOST_TEST(!idle.next_due().has_value());
  BOOST_TEST(idle.size() == 2u);
}

BOOST_AUTO_TEST_CASE(a_suspended_jobs_slots_are_skipped_and_resuming_starts_nothing_from_before) {
  scheduler s({job("a", "* * * * *"), job("b", "* * * * *")});
  s.on_elected(at(10, 0, 30), 60s);
  s.set_suspended(0, true);
  auto d = s.due(at(10, 1));
  BOOST_REQUIRE(d.size() == 2u);
  BOOST_TEST((d[0].what == kind::skip_suspended));
  BOOST_TEST((d[0].slot == at(10, 1)));
  BOOST_TEST((d[1].what == kind::start));
  // Paused while suspended: one skip for the latest slot, the others counted as missed.
  d = s.due(at(10, 4, 5));
  BOOST_TEST((d[0].what == kind::skip_suspended));
  BOOST_TEST(d[0].missed == 2u);
  // Resumed at 10:04:30: nothing from before starts; the next slot does.
  s.set_suspended(0, false);
  BOOST_TEST(s.due(at(10, 4, 30)).empty());
  d = s.due(at(10, 5));
  BOOST_REQUIRE(d.size() == 2u);
  BOOST_TEST((d[0].what == kind::start));
  // Suspension wins over overlap: a suspended job with a run going reports suspended.
  s.run_started(1);
  s.set_suspended(1, true);
  BOOST_TEST((s.due(at(10, 6))[1].what == kind::skip_suspended));
}

BOOST_AUTO_TEST_CASE(a_suspended_run_once_job_does_not_run_its_misfired_slot_on_election) {
  scheduled_job j = job("once", "*/5 * * * *", false, true);
  j.suspended = true;
  scheduler s({j});
  auto d = s.on_elected(at(10, 6, 20), 120s);
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST((d[0].what == kind::skip_suspended));
  BOOST_TEST((d[0].slot == at(10, 5)));
}

BOOST_AUTO_TEST_CASE(a_new_job_list_carries_each_jobs_suspension_as_given) {
  scheduler s({job("a", "* * * * *")});
  s.on_elected(at(10, 0, 30), 60s);
  scheduled_job a = job("a", "* * * * *");
  a.suspended = true;
  s.replace_jobs({a, job("b", "* * * * *")});
  auto d = s.due(at(10, 1));
  BOOST_REQUIRE(d.size() == 2u);
  BOOST_TEST((d[0].what == kind::skip_suspended));
  BOOST_TEST((d[1].what == kind::start));
}

BOOST_AUTO_TEST_CASE(retry_waits_double_are_jittered_and_never_reach_the_next_slot) {
  const std::chrono::system_clock::time_point now = at(10, 0, 0);
  const std::optional<sys_seconds> far = at(11, 0);
  // unit 0 is the shortest wait (half the backoff), unit close to 1 the longest (just under the backoff).
  BOOST_TEST(retry_wait(1, 1000ms, 0.0, now, far).value().count() == 500);
  BOOST_TEST(retry_wait(1, 1000ms, 0.999, now, far).value().count() == 999);
  BOOST_TEST(retry_wait(2, 1000ms, 0.0, now, far).value().count() == 1000);
  BOOST_TEST(retry_wait(3, 1000ms, 0.0, now, far).value().count() == 2000);
  // The doubling stops at 1024 times the backoff.
  BOOST_TEST(retry_wait(11, 1ms, 0.0, now, far).value().count() == 512);
  BOOST_TEST(retry_wait(50, 1ms, 0.0, now, far).value().count() == 512);
  // A retry that would start at or after the next slot is not made; without a next slot it always is.
  BOOST_TEST(!retry_wait(1, 2000ms, 0.0, now, at(10, 0, 1)).has_value());
  BOOST_TEST(!retry_wait(1, 2000ms, 0.0, now + 1ms, at(10, 0, 1)).has_value());
  BOOST_TEST(retry_wait(1, 2000ms, 0.0, now, at(10, 0, 2)).has_value());
  BOOST_TEST(retry_wait(20, 1h, 0.5, now, std::nullopt).has_value());
}

BOOST_AUTO_TEST_CASE(a_jobs_starting_deadline_replaces_the_misfire_window_on_election) {
  // Elected at 10:06:20, 80 s after the 10:05 slot: outside a 60 s window, inside a job's 90 s deadline.
  scheduled_job wide = job("wide", "*/5 * * * *", false, true);
  wide.misfire_window = 90s;
  scheduled_job narrow = job("narrow", "*/5 * * * *", false, true);
  narrow.misfire_window = 30s;
  scheduler s({job("default", "*/5 * * * *", false, true), wide, narrow});
  auto d = s.on_elected(at(10, 6, 20), 60s);
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].job == 1u);
  BOOST_TEST((d[0].slot == at(10, 5)));
  // A narrower deadline than the default: 40 s after the slot is too late for it, not for the default.
  scheduler t({job("default", "*/5 * * * *", false, true), narrow});
  d = t.on_elected(at(10, 5, 40), 60s);
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].job == 0u);
}

BOOST_AUTO_TEST_CASE(overlap_replace_replaces_the_run_going_and_starts_plainly_when_none_is) {
  scheduled_job replace = job("replace", "* * * * *");
  replace.replace_running = true;
  scheduler s({replace, job("forbid", "* * * * *")});
  s.on_elected(at(10, 0, 30), 60s);
  // Nothing going: a plain start.
  auto d = s.due(at(10, 1));
  BOOST_REQUIRE(d.size() == 2u);
  BOOST_TEST((d[0].what == kind::start));
  s.run_started(0);
  s.run_started(1);
  // The previous runs still going at 10:02: replace's slot replaces its run, forbid's is skipped.
  d = s.due(at(10, 2));
  BOOST_REQUIRE(d.size() == 2u);
  BOOST_TEST((d[0].what == kind::replace));
  BOOST_TEST((d[0].slot == at(10, 2)));
  BOOST_TEST((d[1].what == kind::skip_overlap));
  // The runtime starts the new run at once (it counts as running while the old one stops): the next slot
  // that comes before both are over replaces them in turn, with the slots missed meanwhile counted.
  s.run_started(0);
  d = s.due(at(10, 4, 30));
  BOOST_TEST((d[0].what == kind::replace));
  BOOST_TEST((d[0].slot == at(10, 4)));
  BOOST_TEST(d[0].missed == 1u);
  // Once they are over, a plain start again.
  s.run_finished(0);
  s.run_finished(0);
  BOOST_TEST((s.due(at(10, 5))[0].what == kind::start));
  // A suspended job replaces nothing: its slot is skipped and the run going goes on.
  s.run_started(0);
  s.set_suspended(0, true);
  BOOST_TEST((s.due(at(10, 6))[0].what == kind::skip_suspended));
}

BOOST_AUTO_TEST_CASE(overlap_replace_applies_to_a_misfired_slot_run_on_election_and_survives_a_reload) {
  scheduled_job once = job("once", "*/5 * * * *", false, true);
  once.replace_running = true;
  scheduler s({once});
  // A run of the job is still counted at the election (a group of the previous leadership that outlived
  // SIGKILL): the misfired slot replaces it rather than being skipped.
  s.run_started(0);
  auto d = s.on_elected(at(10, 6, 20), 120s);
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST((d[0].what == kind::replace));
  BOOST_TEST((d[0].slot == at(10, 5)));
  // A reload that turns replace into forbid: the next slot is skipped as overlap.
  s.replace_jobs({job("once", "*/5 * * * *", false, true)});
  BOOST_TEST((s.due(at(10, 10))[0].what == kind::skip_overlap));
}

// ---- what the group's state says of earlier leaderships

BOOST_AUTO_TEST_CASE(slots_no_leader_decided_are_counted_and_only_the_latest_run_once_slot_runs) {
  scheduler s({job("skip", "* * * * *"), job("once", "* * * * *", false, true)});
  // The last leader decided 10:02 for both, then every replica was down until 10:06:20.
  auto d = s.on_elected(at(10, 6, 20), 120s, {{"skip", at(10, 2)}, {"once", at(10, 2)}});
  BOOST_REQUIRE(d.size() == 2u);
  BOOST_TEST((d[0].what == kind::missed));  // 10:03..10:06, none runs
  BOOST_TEST(d[0].missed == 4u);
  BOOST_TEST((d[0].slot == at(10, 6)));
  BOOST_TEST((d[1].what == kind::start));  // 10:06 runs; 10:03..10:05 are counted
  BOOST_TEST((d[1].slot == at(10, 6)));
  BOOST_TEST(d[1].missed == 3u);
  BOOST_TEST((*s.last_decided(0) == at(10, 6)));
  BOOST_TEST((*s.last_decided(1) == at(10, 6)));
}

BOOST_AUTO_TEST_CASE(a_run_once_slot_the_last_leader_decided_does_not_run_again) {
  scheduler s({job("once", "*/5 * * * *", false, true)});
  // The old leader started the 10:05 slot and handed over at 10:06:20: within the window, but decided.
  BOOST_TEST(s.on_elected(at(10, 6, 20), 120s, {{"once", at(10, 5)}}).empty());
  BOOST_TEST((*s.last_decided(0) == at(10, 5)));
  // Without the group's state the same election would run it again.
  scheduler blind({job("once", "*/5 * * * *", false, true)});
  BOOST_TEST(blind.on_elected(at(10, 6, 20), 120s).size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_run_once_slot_outside_the_window_is_counted_not_run) {
  scheduler s({job("once", "*/5 * * * *", false, true)});
  auto d = s.on_elected(at(10, 9, 50), 120s, {{"once", at(10, 0)}});
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST((d[0].what == kind::missed));
  BOOST_TEST(d[0].missed == 1u);  // 10:05
}

BOOST_AUTO_TEST_CASE(a_decided_slot_in_the_future_of_this_clock_counts_nothing) {
  // The last leader's clock ran ahead: it decided 10:07 while this one reads 10:06:20.
  scheduler s({job("a", "* * * * *", false, true)});
  BOOST_TEST(s.on_elected(at(10, 6, 20), 120s, {{"a", at(10, 7)}}).empty());
  BOOST_TEST((*s.last_decided(0) == at(10, 7)));
}

BOOST_AUTO_TEST_CASE(due_slots_become_the_last_decided_and_a_reload_keeps_it) {
  scheduler s({job("a", "* * * * *")});
  BOOST_TEST(!s.last_decided(0).has_value());
  s.on_elected(at(10, 0, 30), 60s);
  s.due(at(10, 3, 5));
  BOOST_TEST((*s.last_decided(0) == at(10, 3)));
  s.replace_jobs({job("a", "*/2 * * * *")});
  BOOST_TEST((*s.last_decided(0) == at(10, 3)));
}

BOOST_AUTO_TEST_CASE(a_long_gap_of_a_per_second_schedule_is_bounded_and_still_finds_the_latest_slot) {
  scheduler s({job("a", "* * * * * *")});
  const auto known = at(0, 0) - std::chrono::days(30);
  auto d = s.on_elected(at(10, 0, 7), 60s, {{"a", known}});
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST((d[0].slot == at(10, 0, 7)));
  BOOST_TEST(d[0].missed >= 1'000'000u);
}

BOOST_AUTO_TEST_CASE(after_a_handover_every_job_runs_its_latest_undecided_slot_within_the_window) {
  scheduler s({job("skip", "* * * * * *"), job("far", "30 * * * *")});
  // The old leader drained from 10:00:00 and handed over at 10:00:04: skip's 10:00:01..04 were not decided.
  auto d = s.on_elected(at(10, 0, 4), 11s, {{"skip", at(10, 0, 0)}, {"far", at(8, 30)}}, true);
  BOOST_REQUIRE(d.size() == 2u);
  BOOST_TEST((d[0].what == kind::start));
  BOOST_TEST((d[0].slot == at(10, 0, 4)));
  BOOST_TEST(d[0].missed == 3u);
  // A slot older than the window is counted, handover or not.
  BOOST_TEST((d[1].what == kind::missed));
  BOOST_TEST((d[1].slot == at(9, 30)));
  BOOST_TEST(d[1].missed == 1u);
}

BOOST_AUTO_TEST_CASE(a_job_scheduled_elsewhere_is_never_due_here_but_its_runs_count) {
  // Two schedulers share the job list, each with the other's jobs `elsewhere` (leader and per-job jobs in one
  // agent).
  auto mine = job("mine", "* * * * *", false, true);
  auto other = job("other", "* * * * *", false, true);
  other.elsewhere = true;
  scheduler s({mine, other});
  const auto elected = s.on_elected(at(10, 5, 30), 60s);
  BOOST_REQUIRE(elected.size() == 1u);  // misfire run_once: only its own job's 10:05 slot
  BOOST_TEST(elected[0].job == 0u);
  s.run_started(1);  // a run of `other` started by the other scheduler still counts here
  BOOST_TEST(s.running(1) == 1);
  const auto d = s.due(at(10, 8));
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].job == 0u);
  BOOST_TEST((*s.next_due() == at(10, 9)));
  // A backward step and a reload do not make it due either; moved here by a reload, it is.
  BOOST_TEST(s.due(at(10, 7)).size() == 0u);
  other.elsewhere = false;
  const auto before = s.replace_jobs({mine, other});
  BOOST_TEST(*before[1] == 1u);
  BOOST_TEST(s.running(1) == 1);
  const auto moved = s.due(at(10, 9));
  BOOST_REQUIRE(moved.size() == 2u);
  BOOST_TEST(moved[1].job == 1u);
  BOOST_TEST((moved[1].what == slot_decision::kind::skip_overlap));  // its run in flight counts
}
