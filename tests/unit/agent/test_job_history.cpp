// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE job_history
#include <boost/test/unit_test.hpp>

// The per-job run history behind GET /v1/jobs and the last-run metrics, with explicit times.

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
