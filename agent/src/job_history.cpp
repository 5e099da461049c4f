// SPDX-License-Identifier: Apache-2.0
#include "job_history.hpp"

namespace baton::agent {

void job_history::started(const std::string& job, time_point at) {
  auto& j = jobs_[job];
  if (!j.last_run || at > *j.last_run) j.last_run = at;
}

void job_history::finished(const std::string& job, run_record run, std::size_t limit) {
  auto& j = jobs_[job];
  if (run.outcome == run_outcome::succeeded) {
    const auto end = run.started + run.duration;
    if (!j.last_success || end > *j.last_success) j.last_success = end;
  }
  j.runs.push_front(std::move(run));
  while (j.runs.size() > limit)
    j.runs.pop_back();
}

void job_history::set_limit(const std::string& job, std::size_t limit) {
  const auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  while (it->second.runs.size() > limit)
    it->second.runs.pop_back();
}

std::vector<run_record> job_history::runs(const std::string& job) const {
  const auto it = jobs_.find(job);
  if (it == jobs_.end()) return {};
  return {it->second.runs.begin(), it->second.runs.end()};
}

std::optional<job_history::time_point> job_history::last_run(const std::string& job) const {
  const auto it = jobs_.find(job);
  return it == jobs_.end() ? std::nullopt : it->second.last_run;
}

std::optional<job_history::time_point> job_history::last_success(const std::string& job) const {
  const auto it = jobs_.find(job);
  return it == jobs_.end() ? std::nullopt : it->second.last_success;
}

}  // namespace baton::agent
