// SPDX-License-Identifier: Apache-2.0
// baton-agent's /metrics page (docs/agent.md, "Metrics"). Every per-job series is written for every
// configured job from the start, at zero, so that `increase()` and alerts on a series see its first event.

#include "agent.hpp"

#include "baton/common/process_metrics.hpp"
#include "baton/common/prometheus_text.hpp"

namespace baton::agent {

namespace {

constexpr run_outcome all_outcomes[] = {
    run_outcome::succeeded,    run_outcome::failed,   run_outcome::timed_out, run_outcome::stopped,
    run_outcome::spawn_failed, run_outcome::replaced, run_outcome::lost};

double seconds_since_epoch(std::optional<std::chrono::system_clock::time_point> t) {
  return t ? std::chrono::duration<double>(t->time_since_epoch()).count() : 0.0;
}

}  // namespace

std::string agent_runtime::render_metrics() const {
  std::string out;
  prometheus_text m(out);
  using u64 = std::uint64_t;
  const auto now_leading = current();
  m.family("baton_agent_leader", "1 while this agent leads.", "gauge");
  m.sample("baton_agent_leader", {}, now_leading.leader ? 1 : 0);
  m.family("baton_agent_token", "Fencing token of the current leadership (0 when not leading).", "gauge");
  m.sample("baton_agent_token", {}, u64{now_leading.token});
  m.family("baton_agent_elections_won_total", "Elections this agent won.", "counter");
  m.sample("baton_agent_elections_won_total", {}, u64{elections_won_.load()});
  m.family("baton_agent_leases_lost_total", "Leaderships that ended by losing the lease.", "counter");
  m.sample("baton_agent_leases_lost_total", {}, u64{leases_lost_.load()});

  // The jobs configured now, and any job a run was counted for since (a job removed by a reload keeps its
  // series, as a counter must not vanish).
  std::vector<std::string> names;
  for (const auto& j : jobs_)
    names.push_back(j->name);
  std::lock_guard lk(metrics_mu_);
  for (const auto& [name, stats] : job_stats_)
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  const auto stats_of = [&](const std::string& name) {
    const auto it = job_stats_.find(name);
    return it == job_stats_.end() ? job_stats{} : it->second;
  };
  const auto count_of = [](const std::map<std::string, u64>& counts, run_outcome o) {
    const auto it = counts.find(std::string(to_string(o)));
    return it == counts.end() ? u64{0} : it->second;
  };

  m.family("baton_agent_renew_latency_seconds", "Round trip of confirmed renews.", "summary");
  m.sample("baton_agent_renew_latency_seconds_sum", {}, renew_seconds_sum_);
  m.sample("baton_agent_renew_latency_seconds_count", {}, u64{renews_.load()});

  m.family("baton_agent_job_runs_total",
           "Job run attempts by job and outcome (each retry is an attempt; see baton_agent_job_slots_total).",
           "counter");
  for (const auto& name : names) {
    const auto s = stats_of(name);
    for (const auto o : all_outcomes)
      m.sample("baton_agent_job_runs_total", {{"job", name}, {"outcome", to_string(o)}},
               count_of(s.outcomes, o));
  }
  m.family("baton_agent_job_slots_total",
           "Slots run on this agent by job and final outcome: the last attempt's, once retries are over.",
           "counter");
  for (const auto& name : names) {
    const auto s = stats_of(name);
    for (const auto o : all_outcomes)
      m.sample("baton_agent_job_slots_total", {{"job", name}, {"outcome", to_string(o)}},
               count_of(s.slots, o));
  }
  m.family("baton_agent_job_consecutive_failures",
           "Slots in a row whose final outcome was failed, timed_out or spawn_failed (0 after a success).",
           "gauge");
  for (const auto& name : names)
    m.sample("baton_agent_job_consecutive_failures", {{"job", name}}, stats_of(name).consecutive_failures);
  m.family("baton_agent_job_duration_seconds", "Duration of job runs.", "summary");
  for (const auto& name : names) {
    const auto s = stats_of(name);
    m.sample("baton_agent_job_duration_seconds_sum", {{"job", name}}, s.duration_sum);
    m.sample("baton_agent_job_duration_seconds_count", {{"job", name}}, s.duration_count);
  }
  m.family("baton_agent_job_slots_skipped_total", "Slots not run, by job and reason.", "counter");
  for (const auto& name : names) {
    const auto s = stats_of(name);
    m.sample("baton_agent_job_slots_skipped_total", {{"job", name}, {"reason", "overlap"}},
             s.skipped_overlap);
    m.sample("baton_agent_job_slots_skipped_total", {{"job", name}, {"reason", "missed"}}, s.missed);
    m.sample("baton_agent_job_slots_skipped_total", {{"job", name}, {"reason", "suspended"}},
             s.skipped_suspended);
  }
  m.family("baton_agent_job_kill_failures_total",
           "Runs whose process group could not be signalled or outlived SIGKILL.", "counter");
  for (const auto& name : names)
    m.sample("baton_agent_job_kill_failures_total", {{"job", name}}, stats_of(name).kill_failures);

  // Every configured job, on every agent (0: no such run on this agent yet), so that a dashboard takes the
  // maximum over the agents of a group whichever of them led.
  m.family("baton_agent_job_last_run_timestamp_seconds", "Start of the latest run of the job on this agent.",
           "gauge");
  for (const auto& j : jobs_)
    m.sample("baton_agent_job_last_run_timestamp_seconds", {{"job", j->name}},
             seconds_since_epoch(history_.last_run(j->name)));
  m.family("baton_agent_job_last_success_timestamp_seconds",
           "End of the latest succeeded run of the job on this agent.", "gauge");
  for (const auto& j : jobs_)
    m.sample("baton_agent_job_last_success_timestamp_seconds", {{"job", j->name}},
             seconds_since_epoch(history_.last_success(j->name)));
  m.family("baton_agent_job_next_run_timestamp_seconds",
           "The job's next slot by its schedule (whichever agent leads then runs it; 0: none).", "gauge");
  const auto now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  for (const auto& j : jobs_) {
    const auto next = j->sched.next_fire(now, j->tz);
    m.sample("baton_agent_job_next_run_timestamp_seconds", {{"job", j->name}},
             next ? static_cast<double>(next->time_since_epoch().count()) : 0.0);
  }
  m.family("baton_agent_job_suspended", "1 while the job is suspended on this agent.", "gauge");
  for (const auto& j : jobs_)
    m.sample("baton_agent_job_suspended", {{"job", j->name}}, suspended_.contains(j->name) ? 1 : 0);
  m.family("baton_agent_job_running", "Runs of the job in flight on this agent.", "gauge");
  for (const auto& j : jobs_) {
    const auto it = running_by_name_.find(j->name);
    m.sample("baton_agent_job_running", {{"job", j->name}}, it == running_by_name_.end() ? 0 : it->second);
  }

  const auto server = lock_server_.status();
  m.family("baton_agent_lock_server_reachable", "1 while the lock server answers this agent's requests.",
           "gauge");
  m.sample("baton_agent_lock_server_reachable", {}, server.reachable ? 1 : 0);
  m.family("baton_agent_lock_server_errors_total", "Requests to the lock server that got no usable answer.",
           "counter");
  m.sample("baton_agent_lock_server_errors_total", {}, u64{server.errors});

  m.family("baton_agent_config_info",
           "1, labelled with the hash of the configuration file applied (replicas that differ show here).",
           "gauge");
  m.sample("baton_agent_config_info", {{"hash", config_status_.hash}}, 1);
  m.family("baton_agent_config_last_reload_successful",
           "1 when the last reload (SIGHUP, POST /v1/reload) applied the file, 0 when it was refused.",
           "gauge");
  m.sample("baton_agent_config_last_reload_successful", {}, config_status_.last_reload_ok ? 1 : 0);
  m.family("baton_agent_config_last_reload_success_timestamp_seconds",
           "When a configuration was last applied (start or reload).", "gauge");
  m.sample("baton_agent_config_last_reload_success_timestamp_seconds", {},
           seconds_since_epoch(config_status_.applied_at));
  out += process_metrics_text();
  return out;
}

}  // namespace baton::agent
