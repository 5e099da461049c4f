// SPDX-License-Identifier: Apache-2.0
// What a reload changes (compare_configs): the keys that differ between the running configuration and the
// file read again, and which of them only a restart applies.

#include "config.hpp"

#include <algorithm>

namespace baton::agent {
namespace {

bool same_lease(const baton::lease_options& a, const baton::lease_options& b) {
  return a.ttl == b.ttl && a.renew_every == b.renew_every && a.jitter == b.jitter &&
         a.safety_margin == b.safety_margin && a.lock_delay == b.lock_delay;
}

bool same_http(const std::optional<http_job>& a, const std::optional<http_job>& b) {
  if (!a || !b) return !a && !b;
  return a->method == b->method && a->url == b->url && a->headers == b->headers && a->body == b->body &&
         a->ca_file == b->ca_file;
}

// Everything that decides when and how a job runs; not where it is written in the file.
bool same_job(const job_config& a, const job_config& b) {
  return a.name == b.name && a.sched.text() == b.sched.text() && a.timezone == b.timezone &&
         a.command == b.command && a.shell == b.shell && same_http(a.http, b.http) &&
         a.timeout == b.timeout && a.grace == b.grace && a.overlap == b.overlap && a.misfire == b.misfire &&
         a.history_limit == b.history_limit && a.suspend == b.suspend && a.retries == b.retries &&
         a.retry_backoff == b.retry_backoff && a.starting_deadline == b.starting_deadline &&
         a.jitter == b.jitter && a.env == b.env && a.working_dir == b.working_dir && a.user == b.user &&
         a.on_failure == b.on_failure && a.on_success == b.on_success && a.on_missed == b.on_missed &&
         a.mode == b.mode;
}

const job_config* find_job(const std::vector<job_config>& jobs, const std::string& name) {
  const auto it = std::find_if(jobs.begin(), jobs.end(), [&](const job_config& j) { return j.name == name; });
  return it == jobs.end() ? nullptr : &*it;
}

}  // namespace

config_changes compare_configs(const agent_config& running, const agent_config& loaded) {
  config_changes out;
  const auto differs = [&](std::string key, bool changed, bool needs_restart) {
    if (!changed) return;
    if (needs_restart) out.restart_needed.push_back(key);
    out.keys.push_back(std::move(key));
  };
  const auto& a = running;
  const auto& b = loaded;
  differs("server", a.server != b.server, true);
  // Applied by reading the files into the client's TLS context (client::reload_tls()), as unchanged paths are
  // read again on every reload.
  differs("tls",
          a.tls.ca_file != b.tls.ca_file || a.tls.cert_file != b.tls.cert_file ||
              a.tls.key_file != b.tls.key_file,
          false);
  differs("etcd_password_file", a.etcd_password_file != b.etcd_password_file, true);
  differs("etcd_lease_revocation_bug", a.etcd_lease_revocation_bug != b.etcd_lease_revocation_bug, true);
  differs("identity", a.identity != b.identity, true);
  differs("listen", a.listen != b.listen, true);
  differs("metrics_listen", a.metrics_listen != b.metrics_listen, true);
  differs("mode", a.mode != b.mode, true);
  differs("log_level", a.log_level != b.log_level, false);
  differs("log_format", a.log_format != b.log_format, false);
  differs("token_file", a.token_file != b.token_file || a.server_token != b.server_token, true);
  differs("resign_token", a.resign_token != b.resign_token, false);
  differs("shutdown_grace", a.shutdown_grace != b.shutdown_grace, false);
  differs("reload_on_change", a.reload_on_change != b.reload_on_change, true);
  out.election = a.election_key != b.election_key || !same_lease(a.election, b.election);
  differs("election", out.election, false);
  differs("history_limit", a.history_limit != b.history_limit, false);
  for (const auto& job : b.jobs) {
    const auto* before = find_job(a.jobs, job.name);
    if (!before)
      out.jobs_added.push_back(job.name);
    else if (!same_job(*before, job))
      out.jobs_changed.push_back(job.name);
  }
  for (const auto& job : a.jobs)
    if (!find_job(b.jobs, job.name)) out.jobs_removed.push_back(job.name);
  differs("jobs", !out.jobs_added.empty() || !out.jobs_removed.empty() || !out.jobs_changed.empty(), false);
  return out;
}

}  // namespace baton::agent
