// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE job_history
#include <boost/test/unit_test.hpp>

// The per-job run history behind GET /v1/jobs and the last-run metrics, and the group's state that carries
// it (with each job's decided slot and the group's suspension) from one leader to the next, with explicit
// times.

#include "group_state.hpp"
#include "job_history.hpp"

using namespace baton::agent;
using namespace std::chrono_literals;
using time_point = job_history::time_point;

namespace {

const time_point t0 = date::sys_days(date::year{2026} / 11 / 30) + 10h;

run_record run(std::string id, run_outcome outcome, time_point started, std::chrono::milliseconds duration) {
  run_record r;
  r.run_id = std::move(id);
  r.outcome = outcome;
  r.started = started;
  r.duration = duration;
  return r;
}

std::vector<std::string> ids(const std::vector<run_record>& runs) {
  std::vector<std::string> out;
  for (const auto& r : runs)
    out.push_back(r.run_id);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_job_that_never_ran_has_no_runs_and_no_times) {
  job_history h;
  BOOST_TEST(h.runs("a").empty());
  BOOST_TEST(!h.last_run("a").has_value());
  BOOST_TEST(!h.last_success("a").has_value());
  h.set_limit("a", 1);  // a limit for an unknown job creates nothing
  BOOST_TEST(h.runs("a").empty());
}

BOOST_AUTO_TEST_CASE(runs_are_kept_newest_first_up_to_the_limit) {
  job_history h;
  for (int i = 1; i <= 4; ++i)
    h.finished("a", run("7-" + std::to_string(i), run_outcome::succeeded, t0 + i * 1s, 10ms), 3);
  BOOST_TEST(ids(h.runs("a")) == (std::vector<std::string>{"7-4", "7-3", "7-2"}),
             boost::test_tools::per_element());
  h.finished("b", run("8-1", run_outcome::failed, t0, 10ms), 3);
  BOOST_TEST(h.runs("a").size() == 3u);  // jobs are kept apart
  // A lower limit (a reload) drops the oldest at once; a higher one keeps what is there.
  h.set_limit("a", 1);
  BOOST_TEST(ids(h.runs("a")) == std::vector<std::string>{"7-4"}, boost::test_tools::per_element());
  h.set_limit("a", 10);
  BOOST_TEST(h.runs("a").size() == 1u);
}

BOOST_AUTO_TEST_CASE(last_run_is_the_latest_start_and_last_success_the_end_of_the_latest_success) {
  job_history h;
  h.started("a", t0);
  BOOST_TEST((*h.last_run("a") == t0));
  BOOST_TEST(!h.last_success("a").has_value());  // running, not yet succeeded
  h.finished("a", run("1-1", run_outcome::succeeded, t0, 1500ms), 10);
  BOOST_TEST((*h.last_success("a") == t0 + 1500ms));
  // Failed, timed-out, stopped and unstartable runs are runs, never successes.
  for (auto outcome :
       {run_outcome::failed, run_outcome::timed_out, run_outcome::stopped, run_outcome::spawn_failed}) {
    h.started("a", t0 + 10s);
    h.finished("a", run("1-2", outcome, t0 + 10s, 1s), 10);
  }
  BOOST_TEST((*h.last_run("a") == t0 + 10s));
  BOOST_TEST((*h.last_success("a") == t0 + 1500ms));
  // A run that started earlier but ended later than the latest success (overlap: allow) moves it on; one
  // that ended before it does not move it back.
  h.finished("a", run("1-3", run_outcome::succeeded, t0 - 1s, 5s), 10);
  BOOST_TEST((*h.last_success("a") == t0 + 4s));
  h.finished("a", run("1-4", run_outcome::succeeded, t0, 1s), 10);
  BOOST_TEST((*h.last_success("a") == t0 + 4s));
  // An earlier start reported late does not move last_run back.
  h.started("a", t0);
  BOOST_TEST((*h.last_run("a") == t0 + 10s));
}

// ---- the group's state (group_state.hpp)

namespace {

run_record full_run(std::string id, run_outcome outcome) {
  auto r = run(std::move(id), outcome, t0 + 250ms, 1500ms);
  r.token = 41;
  r.identity = "node-1";
  r.lock_key = "group/leader";
  r.slot = std::chrono::floor<std::chrono::seconds>(t0);
  r.status = outcome == run_outcome::succeeded ? 0 : 3;
  r.detail = "exit \"3\"\nline";
  r.manual = true;
  r.attempt = 2;
  return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_group_state_reads_back_as_written) {
  group_state s;
  s.leader = "node-1";
  s.token = 41;
  s.suspended = std::set<std::string>{"b"};
  s.handover = true;
  decide(s, "a", std::chrono::floor<std::chrono::seconds>(t0));
  add_run(s, "a", full_run("41-1", run_outcome::failed), 5);
  finish_slot(s, "a", run_outcome::failed, t0);
  add_run(s, "a", full_run("41-2", run_outcome::succeeded), 5);
  finish_slot(s, "a", run_outcome::succeeded, t0 + 1750ms);
  std::string error;
  const auto back = decode(encode(s, 1 << 20), error);
  BOOST_REQUIRE(back.has_value());
  BOOST_TEST(back->leader == "node-1");
  BOOST_TEST(back->token == 41u);
  BOOST_TEST(back->handover);
  BOOST_TEST((back->suspended == std::set<std::string>{"b"}));
  const auto& a = back->jobs.at("a");
  BOOST_TEST((a.decided == std::chrono::floor<std::chrono::seconds>(t0)));
  BOOST_REQUIRE(a.runs.size() == 2u);
  BOOST_TEST(a.runs[0].run_id == "41-2");
  const auto& r = a.runs[1];
  const auto& w = s.jobs.at("a").runs[1];
  BOOST_TEST((r.started == w.started));
  BOOST_TEST((r.slot == w.slot));
  BOOST_TEST(r.duration.count() == 1500);
  BOOST_TEST((r.outcome == run_outcome::failed));
  BOOST_TEST(r.detail == w.detail);
  BOOST_TEST(r.identity == "node-1");
  BOOST_TEST(r.lock_key == "group/leader");
  BOOST_TEST(r.manual);
  BOOST_TEST(r.attempt == 2);
  BOOST_TEST(r.status == 3);
  BOOST_TEST(a.consecutive_failures == 0u);
  BOOST_TEST((a.last_success == t0 + 1750ms));
  // No suspension written: the file decides.
  BOOST_TEST(!decode(encode(group_state{}, 1 << 20), error)->suspended.has_value());
}

BOOST_AUTO_TEST_CASE(a_record_that_is_not_a_group_state_is_refused_with_a_reason) {
  std::string error;
  BOOST_TEST(!decode("not json", error).has_value());
  BOOST_TEST(error == "not a JSON object");
  BOOST_TEST(!decode(R"({"version":2,"jobs":{}})", error).has_value());
  BOOST_TEST(error == "not a version 1 group state");
  BOOST_TEST(!decode(R"({"version":1})", error).has_value());
  BOOST_TEST(error == "no \"jobs\" object");
  // A run that does not parse is left out; the rest stays.
  const auto s =
      decode(R"({"version":1,"jobs":{"a":{"decided":"2026-11-30T10:00:00Z","runs":[{"run_id":1}]}}})", error);
  BOOST_REQUIRE(s.has_value());
  BOOST_TEST(s->jobs.at("a").runs.empty());
  BOOST_TEST(s->jobs.at("a").decided.has_value());
}

BOOST_AUTO_TEST_CASE(a_state_over_the_record_limit_drops_the_oldest_runs_of_the_fullest_job_first) {
  group_state s;
  for (int i = 0; i < 10; ++i)
    add_run(s, "big", full_run("b-" + std::to_string(i), run_outcome::succeeded), 20);
  add_run(s, "small", full_run("s-0", run_outcome::succeeded), 20);
  decide(s, "big", std::chrono::floor<std::chrono::seconds>(t0));
  const auto whole = encode(s, 1 << 20);
  const auto limit = whole.size() * 6 / 10;
  const auto text = encode(s, limit);
  BOOST_TEST(text.size() <= limit);
  std::string error;
  const auto back = decode(text, error);
  BOOST_REQUIRE(back.has_value());
  const auto& big = back->jobs.at("big").runs;
  BOOST_TEST(big.size() < 10u);
  BOOST_TEST(big.front().run_id == "b-9");               // newest kept
  BOOST_TEST(back->jobs.at("small").runs.size() == 1u);  // the smaller job untouched
  BOOST_TEST(back->jobs.at("big").decided.has_value());  // decisions are never dropped
}

BOOST_AUTO_TEST_CASE(a_slots_final_outcome_counts_for_failures_in_a_row_and_decisions_never_go_back) {
  group_state s;
  add_run(s, "a", full_run("1-1", run_outcome::failed), 2);  // an attempt: a retry follows
  BOOST_TEST(s.jobs["a"].consecutive_failures == 0u);
  finish_slot(s, "a", run_outcome::failed, t0);
  finish_slot(s, "a", run_outcome::timed_out, t0);
  BOOST_TEST(s.jobs["a"].consecutive_failures == 2u);
  finish_slot(s, "a", run_outcome::lost, t0);  // neither a failure nor a success
  BOOST_TEST(s.jobs["a"].consecutive_failures == 2u);
  BOOST_TEST(!s.jobs["a"].last_success.has_value());
  finish_slot(s, "a", run_outcome::succeeded, t0 + 5s);
  BOOST_TEST(s.jobs["a"].consecutive_failures == 0u);
  BOOST_TEST((s.jobs["a"].last_success == t0 + 5s));
  add_run(s, "a", full_run("2-1", run_outcome::succeeded), 2);
  add_run(s, "a", full_run("3-1", run_outcome::succeeded), 2);
  BOOST_TEST(s.jobs["a"].runs.size() == 2u);
  BOOST_TEST(s.jobs["a"].runs.back().run_id == "2-1");
  const auto slot = std::chrono::floor<std::chrono::seconds>(t0);
  decide(s, "a", slot);
  decide(s, "a", slot - 60s);
  BOOST_TEST((decided_slots(s).at("a") == slot));
}
