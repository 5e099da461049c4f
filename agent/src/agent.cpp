// SPDX-License-Identifier: Apache-2.0
#include "agent.hpp"

#include "job_hooks.hpp"

#include "baton/common/log.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <set>

namespace baton::agent {
namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using clock_type = std::chrono::steady_clock;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

namespace {

client_config make_client_config(const agent_config& c) {
  client_config cc;
  cc.server_url = c.server;
  cc.tls = c.tls;
  cc.etcd_password_file = c.etcd_password_file;
  if (c.etcd_lease_revocation_bug) cc.etcd_lease_revocation_bug = *c.etcd_lease_revocation_bug;
  cc.identity = c.identity;
  cc.bearer_token = c.server_token;
  return cc;
}

// The jobs for the scheduler of `mode`: every job, those of the other mode marked `elsewhere` (so both
// schedulers index the jobs alike, and count every run).
std::vector<scheduled_job> make_jobs(const std::vector<job_config>& jobs,
                                     const std::set<std::string>& suspended, agent_mode mode) {
  std::vector<scheduled_job> out;
  for (const auto& j : jobs)
    out.push_back({j.name, j.sched, j.tz, j.overlap == overlap_policy::allow,
                   j.misfire == misfire_policy::run_once, suspended.contains(j.name),
                   j.starting_deadline
                       ? std::optional(std::chrono::duration_cast<std::chrono::seconds>(*j.starting_deadline))
                       : std::nullopt,
                   j.overlap == overlap_policy::replace, j.mode != mode});
  return out;
}

std::set<std::string> suspended_in(const std::vector<job_config>& jobs) {
  std::set<std::string> out;
  for (const auto& j : jobs)
    if (j.suspend) out.insert(j.name);
  return out;
}

std::vector<std::shared_ptr<const job_config>> share_jobs(const std::vector<job_config>& jobs) {
  std::vector<std::shared_ptr<const job_config>> out;
  for (const auto& j : jobs)
    out.push_back(std::make_shared<const job_config>(j));
  return out;
}

// The backend of make_backend() for `config`, observed by `observe` (which also carries client::reload_tls()
// through to it).
std::shared_ptr<backend> make_observed_backend(
    const asio::any_io_executor& ex, const client_config& config,
    std::function<void(const boost::system::error_code&, const std::string&)> observe) {
  return observe_backend(make_backend(ex, config), std::move(observe));
}

// The backend's configuration: the client's, with its own event handler, since the backend reports a lock
// server defect itself (an etcd that revokes live leases: client_config::etcd_lease_revocation_bug). Logged
// once per member, as the SDK would otherwise say it on stderr.
client_config backend_config(const agent_config& config) {
  auto cc = make_client_config(config);
  cc.on_event = [server = baton::without_credentials(config.server)](const lease_event& e) {
    if (e.what == lease_event::kind::server_warning)
      log::warn("lock_server_defect", {{"server", server}, {"reason", std::string(e.reason)}});
  };
  return cc;
}

std::chrono::sys_seconds wall_now() {
  return std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::system_clock::now());
}

}  // namespace

agent_runtime::agent_runtime(asio::any_io_executor ex, agent_config config)
    : ex_(ex),
      config_(std::move(config)),
      client_(
          ex,
          [&] {
            auto cc = make_client_config(config_);
            cc.on_event = [this](const lease_event& e) {
              if (e.what == lease_event::kind::renewed) {
                renews_.fetch_add(1);
                last_renew_us_.store(e.latency.count());
                std::lock_guard lk(metrics_mu_);
                renew_seconds_sum_ += static_cast<double>(e.latency.count()) / 1e6;
              }
            };
            return cc;
          }(),
          // Every request, the SDK's internal retries included, tells whether the server answered.
          make_observed_backend(ex, backend_config(config_),
                                [this](const boost::system::error_code& ec, const std::string& diagnostic) {
                                  observe_lock_server(ec, diagnostic);
                                })),
      scheduler_(make_jobs(config_.jobs, suspended_in(config_.jobs), agent_mode::leader)),
      per_job_scheduler_(make_jobs(config_.jobs, suspended_in(config_.jobs), agent_mode::per_job)),
      jobs_(share_jobs(config_.jobs)),
      state_written_(ex, asio::steady_timer::time_point::max()),
      control_(ex, asio::steady_timer::time_point::max()),
      per_job_control_(ex, asio::steady_timer::time_point::max()) {
  suspended_ = suspended_in(config_.jobs);
}

void agent_runtime::observe_lock_server(const boost::system::error_code& ec, const std::string& diagnostic) {
  std::optional<lock_server_notice> n;
  if (is_lock_server_failure(ec)) {
    std::string error = ec.message();
    if (!diagnostic.empty()) error += ": " + diagnostic;
    n = lock_server_.failed(clock_type::now(), std::chrono::system_clock::now(), std::move(error));
  } else if (ec != asio::error::operation_aborted) {  // an answer, a refusal included
    n = lock_server_.answered(clock_type::now());
  }
  if (!n) return;
  const auto server = baton::without_credentials(config_.server);
  switch (n->what) {
    case lock_server_notice::kind::unreachable:
      log::warn("lock_server_unreachable", {{"server", server}, {"error", n->error}});
      break;
    case lock_server_notice::kind::still_unreachable:
      log::warn("lock_server_unreachable", {{"server", server},
                                            {"error", n->error},
                                            {"failures", n->failures},
                                            {"down_for_ms", n->down_for.count()}});
      break;
    case lock_server_notice::kind::reachable:
      log::info("lock_server_reachable",
                {{"server", server}, {"failures", n->failures}, {"down_for_ms", n->down_for.count()}});
      break;
  }
}

std::chrono::seconds agent_runtime::misfire_window(const job_config& job) const {
  if (job.starting_deadline) return std::chrono::duration_cast<std::chrono::seconds>(*job.starting_deadline);
  return misfire_window();
}

std::chrono::seconds agent_runtime::misfire_window() const {
  return std::chrono::duration_cast<std::chrono::seconds>(config_.election.ttl) + std::chrono::seconds(1);
}

void agent_runtime::note_skips(const slot_decision& d) {
  const auto& name = jobs_[d.job]->name;
  // The slot's own decision (kind::missed) is one of the missed; a start or skip comes after them.
  notify_missed(*jobs_[d.job], d.missed,
                d.what == slot_decision::kind::missed ? d.slot : d.slot - std::chrono::seconds(1));
  {
    std::lock_guard lk(metrics_mu_);
    auto& s = job_stats_[name];
    s.missed += d.missed;
    if (d.what == slot_decision::kind::skip_overlap) ++s.skipped_overlap;
    if (d.what == slot_decision::kind::skip_suspended) ++s.skipped_suspended;
  }
  if (d.what == slot_decision::kind::missed)
    // Slots that passed while no replica led (the group's state says where the last leader stopped).
    log::warn("job_skipped", {{"job", name},
                              {"reason", "missed"},
                              {"slots", d.missed},
                              {"through", rfc3339(d.slot)},
                              {"while", "no_leader"}});
  else if (d.missed > 0)
    log::info("job_skipped",
              {{"job", name}, {"reason", "missed"}, {"slots", d.missed}, {"before", rfc3339(d.slot)}});
  if (d.what == slot_decision::kind::skip_overlap)
    log::info("job_skipped", {{"job", name}, {"slot", rfc3339(d.slot)}, {"reason", "overlap"}});
  if (d.what == slot_decision::kind::skip_suspended)
    log::info("job_skipped", {{"job", name}, {"slot", rfc3339(d.slot)}, {"reason", "suspended"}});
}

void agent_runtime::apply_suspended(const std::set<std::string>& names) {
  suspended_ = names;
  for (std::size_t i = 0; i < jobs_.size(); ++i) {
    scheduler_.set_suspended(i, suspended_.contains(jobs_[i]->name));
    per_job_scheduler_.set_suspended(i, suspended_.contains(jobs_[i]->name));
  }
}

std::set<std::string> agent_runtime::leader_jobs_in(const std::set<std::string>& names) const {
  std::set<std::string> out;
  for (const auto& j : jobs_)
    if (j->mode == agent_mode::leader && names.contains(j->name)) out.insert(j->name);
  return out;
}

bool agent_runtime::campaigns() const {
  return config_.mode == agent_mode::leader ||
         std::any_of(jobs_.begin(), jobs_.end(), [](const auto& j) { return j->mode == agent_mode::leader; });
}

asio::awaitable<agent_runtime::suspend_result> agent_runtime::set_suspended(std::string name,
                                                                            bool suspended) {
  const auto it = std::find_if(jobs_.begin(), jobs_.end(), [&](const auto& j) { return j->name == name; });
  if (it == jobs_.end()) co_return suspend_result::unknown_job;
  const bool leader_mode = (*it)->mode == agent_mode::leader;
  if (leader_mode && (!state_lease_ || !state_lease_->active())) co_return suspend_result::not_leader;
  auto names = suspended_;
  if (suspended)
    names.insert(name);
  else
    names.erase(name);
  if (leader_mode) {
    // The group's suspension is kept in its state before it is applied or answered: an answer never reports
    // a change a new leader would not see.
    const auto before = group_.suspended;
    group_.suspended = leader_jobs_in(names);
    if (!co_await persist_group_state()) {
      group_.suspended = before;
      co_return suspend_result::not_saved;
    }
  }
  apply_suspended(names);
  log::info(suspended ? "job_suspended" : "job_resumed", {{"job", name}});
  co_return suspend_result::done;
}

agent_runtime::status agent_runtime::current() const {
  // Leading means an active lease now, not only that run() has not yet seen it end: an agent woken from a
  // freeze past its deadline answers before its runtime has noticed the loss, and must not say it leads.
  const bool leading = leader_.load() && state_lease_ && state_lease_->active();
  return {leading, leading ? token_.load() : 0};
}

void agent_runtime::shutdown() {
  stopping_ = true;
  control_.cancel();
  per_job_control_.cancel();
}

bool agent_runtime::resign() {
  if (!leader_.load()) return false;
  resigning_ = true;
  control_.cancel();
  return true;
}

void agent_runtime::apply_jobs(std::vector<job_config> jobs) {
  auto shared = share_jobs(jobs);
  // The file's `suspend` decides for a new job and for one whose `suspend` the file changed; any other job
  // keeps what the API made of it.
  std::set<std::string> suspended;
  for (const auto& j : jobs) {
    const auto before = std::find_if(config_.jobs.begin(), config_.jobs.end(),
                                     [&](const job_config& old) { return old.name == j.name; });
    const bool from_file = before == config_.jobs.end() || before->suspend != j.suspend;
    if (from_file ? j.suspend : suspended_.contains(j.name)) suspended.insert(j.name);
  }
  suspended_ = std::move(suspended);
  const auto before = scheduler_.replace_jobs(make_jobs(jobs, suspended_, agent_mode::leader));
  per_job_scheduler_.replace_jobs(make_jobs(jobs, suspended_, agent_mode::per_job));
  // A job that is new to the schedulers may still have runs in flight: it was removed by an earlier reload
  // while they ran, and comes back now. They count for its overlap rule as before.
  for (std::size_t i = 0; i < shared.size(); ++i)
    if (!before[i])
      for (int n = running_by_name_[shared[i]->name]; n > 0; --n) {
        scheduler_.run_started(i);
        per_job_scheduler_.run_started(i);
      }
  jobs_ = std::move(shared);
  if (state_lease_ && group_.suspended != leader_jobs_in(suspended_)) {
    group_.suspended = leader_jobs_in(suspended_);
    asio::co_spawn(ex_, persist_group_state(), asio::detached);
  }
  for (const auto& j : jobs_)
    history_.set_limit(j->name, j->history_limit);
  config_.jobs = std::move(jobs);
  // Wake the scheduling loop, so a new job's first slot is not up to a second late. Only the loop waits on
  // control_ while the scheduler leads (a campaign would take the wake-up for a shutdown or a resign).
  if (scheduler_.leading()) control_.cancel();
  per_job_control_.cancel();
}

void agent_runtime::restart_election(std::string key, lease_options election) {
  config_.election_key = std::move(key);
  config_.election = election;
  if (!campaigns()) return;  // each per-job run's lock reads them when it is taken
  recampaign_ = true;
  control_.cancel();
}

std::string agent_runtime::leader_value() const {
  boost::json::object v{{"identity", client_.identity()}};
  if (!api_url_.empty()) v["api"] = api_url_;
  return boost::json::serialize(v);
}

void agent_runtime::apply_settings(std::string resign_token, std::chrono::milliseconds shutdown_grace) {
  config_.resign_token = std::move(resign_token);
  config_.shutdown_grace = shutdown_grace;
}

void agent_runtime::job_run_began(const std::string& job, std::size_t index,
                                  const std::shared_ptr<run_control>& control) {
  ++running_by_name_[job];
  runs_by_job_.emplace(job, control);
  scheduler_.run_started(index);
  per_job_scheduler_.run_started(index);
}

void agent_runtime::job_run_ended(const std::string& job, const std::shared_ptr<run_control>& control) {
  if (--running_by_name_[job] <= 0) running_by_name_.erase(job);
  const auto [first, last] = runs_by_job_.equal_range(job);
  for (auto it = first; it != last; ++it)
    if (it->second == control) {
      runs_by_job_.erase(it);
      break;
    }
  control->mark_ended();
  // The job may have moved, or gone, since the run began (apply_jobs).
  for (std::size_t i = 0; i < jobs_.size(); ++i)
    if (jobs_[i]->name == job) {
      scheduler_.run_finished(i);
      per_job_scheduler_.run_finished(i);
    }
}

agent_runtime::run_list agent_runtime::replace_runs(const std::string& job, std::chrono::sys_seconds slot) {
  run_list out;
  const auto [first, last] = runs_by_job_.equal_range(job);
  for (auto it = first; it != last; ++it) {
    it->second->replace("by the run for slot " + rfc3339(slot));
    out.push_back(it->second);
  }
  return out;
}

asio::awaitable<bool> agent_runtime::replaced_runs_ended(const run_list& replacing,
                                                         std::shared_ptr<run_control> control) {
  // The runs replaced stop as on a lost lease (TERM, grace, KILL), and the new run starts only once they are
  // gone: two copies of a job never run at once with overlap: replace, as with forbid.
  for (const auto& r : replacing)
    while (!r->has_ended()) {
      if (control->stop_requested()) co_return false;
      co_await (r->ended().async_wait(use_tuple) || control->wake().async_wait(use_tuple));
    }
  co_return !control->stop_requested();
}

asio::awaitable<void> agent_runtime::sleep_or_wake(clock_type::duration d) {
  asio::steady_timer t(ex_, d);
  control_.expires_at(asio::steady_timer::time_point::max());
  if (stopping_ || resigning_ || recampaign_) co_return;
  co_await (t.async_wait(use_tuple) || control_.async_wait(use_tuple));
}

asio::awaitable<void> agent_runtime::per_job_sleep(clock_type::duration d) {
  asio::steady_timer t(ex_, d);
  per_job_control_.expires_at(asio::steady_timer::time_point::max());
  if (stopping_) co_return;
  co_await (t.async_wait(use_tuple) || per_job_control_.async_wait(use_tuple));
}

void agent_runtime::record_run(const job_config& job, const run_result& r) {
  std::lock_guard lk(metrics_mu_);
  auto& s = job_stats_[job.name];
  ++s.outcomes[std::string(to_string(r.outcome))];
  s.duration_sum += std::chrono::duration<double>(r.duration).count();
  ++s.duration_count;
  if (r.kill_failed) ++s.kill_failures;
}

void agent_runtime::notify_slot(const job_config& job, const run_result& r) {
  const bool failure = r.outcome == run_outcome::failed || r.outcome == run_outcome::timed_out ||
                       r.outcome == run_outcome::spawn_failed;
  const auto& hook = failure                               ? job.on_failure
                     : r.outcome == run_outcome::succeeded ? job.on_success
                                                           : std::nullopt;
  if (!hook) return;
  boost::json::object body{{"event", failure ? "failure" : "success"},
                           {"job", job.name},
                           {"agent", client_.identity()},
                           {"outcome", to_string(r.outcome)}};
  // The slot's last attempt, as GET /v1/jobs shows it.
  if (const auto runs = history_.runs(job.name); !runs.empty()) body["run"] = run_json(runs.front());
  asio::co_spawn(
      ex_, deliver_hook(*hook, {failure ? "failure" : "success", job.name, boost::json::serialize(body)}),
      asio::detached);
}

void agent_runtime::notify_missed(const job_config& job, std::uint64_t slots, sys_seconds through) {
  if (!job.on_missed || slots == 0) return;
  boost::json::object body{{"event", "missed"},
                           {"job", job.name},
                           {"agent", client_.identity()},
                           {"slots", slots},
                           {"through", rfc3339(through)}};
  asio::co_spawn(ex_, deliver_hook(*job.on_missed, {"missed", job.name, boost::json::serialize(body)}),
                 asio::detached);
}

void agent_runtime::record_slot(const job_config& job, const run_result& r) {
  notify_slot(job, r);
  if (job.mode == agent_mode::leader) {
    finish_slot(group_, job.name, r.outcome, std::chrono::system_clock::now());
    if (state_lease_) asio::co_spawn(ex_, persist_group_state(), asio::detached);
  }
  std::lock_guard lk(metrics_mu_);
  auto& s = job_stats_[job.name];
  ++s.slots[std::string(to_string(r.outcome))];
  if (r.outcome == run_outcome::succeeded) s.consecutive_failures = 0;
  if (r.outcome == run_outcome::failed || r.outcome == run_outcome::timed_out ||
      r.outcome == run_outcome::spawn_failed)
    ++s.consecutive_failures;
}

void agent_runtime::note_config(bool applied, std::string hash) {
  std::lock_guard lk(metrics_mu_);
  config_status_.last_reload_ok = applied;
  if (!applied) return;
  config_status_.hash = std::move(hash);
  config_status_.applied_at = std::chrono::system_clock::now();
}

void agent_runtime::log_result(const job_config& job, const run_context& ctx, const run_result& r,
                               std::chrono::system_clock::time_point started, bool manual) {
  record_run(job, r);
  run_record record{ctx.run_id,
                    ctx.token,
                    ctx.identity,
                    ctx.lock_key,
                    ctx.slot,
                    started,
                    std::chrono::duration_cast<std::chrono::milliseconds>(r.duration),
                    r.outcome,
                    r.exit_status,
                    r.detail,
                    manual,
                    ctx.attempt,
                    r.stdout_tail,
                    r.stderr_tail,
                    r.stdout_cut,
                    r.stderr_cut};
  // Leader mode: the group's history too (written with the slot's end, record_slot()).
  if (job.mode == agent_mode::leader) add_run(group_, job.name, record, job.history_limit);
  history_.finished(job.name, std::move(record), job.history_limit);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(r.duration).count();
  auto level = r.outcome == run_outcome::succeeded ? log::level::info : log::level::warn;
  const bool stopped = r.outcome == run_outcome::stopped || r.outcome == run_outcome::replaced ||
                       r.outcome == run_outcome::lost;
  log::write(level, stopped ? "job_stopped" : "job_finished",
             {{"job", job.name},
              {"run", ctx.run_id},
              {"slot", rfc3339(ctx.slot)},
              {"key", ctx.lock_key},
              {"token", ctx.token},
              {"outcome", to_string(r.outcome)},
              {"status", r.exit_status},
              {"duration_ms", ms},
              {"detail", r.detail},
              {"attempt", ctx.attempt}});
}

asio::awaitable<run_result> agent_runtime::run_guarded(std::shared_ptr<const job_config> job, run_context ctx,
                                                       std::shared_ptr<run_control> control, lease* l) {
  if (!l) co_return co_await run_job(*job, ctx, control);
  // The watcher turns a lost lease into a graceful stop of the run, then waits for the run to finish.
  auto watch = [l, control]() -> asio::awaitable<void> {
    co_await l->async_wait_lost();
    control->lose();
    asio::steady_timer forever(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
    co_await forever.async_wait(use_tuple);
  };
  auto r = co_await (run_job(*job, ctx, control) || capture(watch()));
  if (r.index() == 0) co_return std::get<0>(std::move(r));
  run_result stopped;
  stopped.outcome = run_outcome::lost;
  co_return stopped;
}

asio::awaitable<run_result> agent_runtime::run_attempts(std::shared_ptr<const job_config> job,
                                                        run_context ctx, std::shared_ptr<run_control> control,
                                                        lease* l, bool manual,
                                                        std::function<std::string()> next_run_id) {
  // Whether a retry may start: the run was not stopped, and the lease it ran under still leads (leader mode:
  // a lost lease stops the runs only once run() gets there).
  const auto may_go_on = [&] {
    if (control->stop_requested()) return false;
    if (l) return l->active();
    return leading_lease_ && leading_lease_->active() && leading_lease_->token() == ctx.token && !stopping_ &&
           !resigning_ && !recampaign_;
  };
  // jitter: a scheduled run starts a random moment in [0, jitter) after it is due; a manual one at once.
  if (!manual && job->jitter.count() > 0) {
    const auto delay = std::chrono::milliseconds(
        std::uniform_int_distribution<std::int64_t>(0, job->jitter.count() - 1)(random_));
    asio::steady_timer pause(ex_, delay);
    co_await (pause.async_wait(use_tuple) || control->wake().async_wait(use_tuple));
    if (!may_go_on()) {
      log::info("job_skipped", {{"job", job->name},
                                {"slot", rfc3339(ctx.slot)},
                                {"reason", control->replaced() ? "replaced" : "stopped"}});
      run_result stopped;
      stopped.outcome = run_outcome::stopped;
      co_return stopped;
    }
  }
  for (;;) {
    const auto started = std::chrono::system_clock::now();
    history_.started(job->name, started);
    log::info("job_started", {{"job", job->name},
                              {"run", ctx.run_id},
                              {"slot", rfc3339(ctx.slot)},
                              {"key", ctx.lock_key},
                              {"token", ctx.token},
                              {"trigger", manual ? "manual" : "schedule"},
                              {"attempt", ctx.attempt}});
    auto r = co_await run_guarded(job, ctx, control, l);
    if (r.outcome == run_outcome::stopped && control->replaced()) {
      r.outcome = run_outcome::replaced;
      r.detail = "replaced " + control->replaced_by() + (r.detail.empty() ? "" : "; " + r.detail);
    }
    if (r.outcome == run_outcome::stopped && control->lost()) {
      r.outcome = run_outcome::lost;
      r.detail = "stopped: the lease was lost" + (r.detail.empty() ? "" : "; " + r.detail);
    }
    log_result(*job, ctx, r, started, manual);
    const bool failed = r.outcome == run_outcome::failed || r.outcome == run_outcome::timed_out ||
                        r.outcome == run_outcome::spawn_failed;
    if (!failed || r.outlived || ctx.attempt > job->retries || !may_go_on()) co_return r;
    const auto wait =
        retry_wait(ctx.attempt, job->retry_backoff, std::uniform_real_distribution<>(0, 1)(random_),
                   std::chrono::system_clock::now(), job->sched.next_fire(ctx.slot, job->tz));
    if (!wait) {
      log::warn(
          "job_retry_skipped",
          {{"job", job->name}, {"run", ctx.run_id}, {"attempt", ctx.attempt + 1}, {"reason", "next_slot"}});
      co_return r;
    }
    log::info(
        "job_retry",
        {{"job", job->name}, {"run", ctx.run_id}, {"attempt", ctx.attempt + 1}, {"wait_ms", wait->count()}});
    asio::steady_timer pause(ex_, *wait);
    co_await (pause.async_wait(use_tuple) || control->wake().async_wait(use_tuple));
    if (!may_go_on()) co_return r;
    ++ctx.attempt;
    ctx.run_id = next_run_id();
  }
}

std::string agent_runtime::start_run(std::size_t index, std::chrono::sys_seconds slot, const lease& l,
                                     bool manual, run_list replacing, std::shared_ptr<run_control>* started) {
  auto job = jobs_[index];
  auto control = std::make_shared<run_control>(ex_);
  if (started) *started = control;
  runs_.push_back(control);
  auto it = std::prev(runs_.end());
  run_context ctx{config_.election_key,
                  l.token(),
                  client_.identity(),
                  slot,
                  make_run_id(l.token(), ++runs_under_lease_),
                  1,
                  &l,
                  leading_options_};
  job_run_began(job->name, index, control);
  // The coroutine may run to its end before co_spawn returns (Boost 1.81 starts it at once, and a command
  // that cannot start fails at once): the caller holds no lock, and everything it touches is already set.
  asio::co_spawn(
      ex_,
      [this, job, ctx, control, it, manual, replacing = std::move(replacing)]() -> asio::awaitable<void> {
        if (!co_await replaced_runs_ended(replacing, control)) {
          // Stopped (lost lease, shutdown, or replaced in turn) before the runs it replaces were gone.
          log::info("job_skipped", {{"job", job->name},
                                    {"slot", rfc3339(ctx.slot)},
                                    {"reason", control->replaced() ? "replaced" : "stopped"}});
          runs_.erase(it);
          job_run_ended(job->name, control);
          co_return;
        }
        // Leader mode: a lost election lease stops every run through stop_all_runs().
        auto r = co_await run_attempts(job, ctx, control, nullptr, manual, [this, token = ctx.token] {
          return make_run_id(token, ++runs_under_lease_);
        });
        record_slot(*job, r);
        runs_.erase(it);
        if (r.outlived) co_await r.outlived();
        job_run_ended(job->name, control);
      },
      asio::detached);
  return ctx.run_id;
}

void agent_runtime::start_per_job_run(std::size_t index, std::chrono::sys_seconds slot, bool misfire,
                                      run_list replacing) {
  auto control = std::make_shared<run_control>(ex_);
  per_job_runs_.push_back(control);
  auto it = std::prev(per_job_runs_.end());
  auto shared = jobs_[index];
  job_run_began(shared->name, index, control);
  asio::co_spawn(
      ex_,
      [this, shared, slot, misfire, control, it,
       replacing = std::move(replacing)]() -> asio::awaitable<void> {
        const job_config& job = *shared;
        const std::string key = "jobs/" + job.name;
        // The run replaced holds jobs/<name> until it is gone; the lock is asked for after that.
        if (!co_await replaced_runs_ended(replacing, control)) {
          log::info("job_skipped", {{"job", job.name},
                                    {"slot", rfc3339(slot)},
                                    {"reason", control->replaced() ? "replaced" : "stopped"}});
          job_run_ended(job.name, control);
          per_job_runs_.erase(it);
          co_return;
        }
        // misfire: run_once retries a slot whose lock could not be asked for (lock server unreachable) until
        // the misfire window after the slot has passed, as a leader elected late would still run it.
        const bool retry = job.misfire == misfire_policy::run_once;
        const auto retry_until = slot + misfire_window(job);
        std::optional<lease> l;
        lease_options opts;  // those the lock was taken with (a reload may change config_.election meanwhile)
        bool late = misfire;
        // With the lock's record (the slots decided are kept there), a replica waits for the lock while the
        // slot can still start (until its misfire window or the next slot, whichever is first), and the
        // record tells whether the slot ran: a holder that died with the lock (kill -9) delays the slot by
        // the rest of its TTL instead of losing it. Without records, one try, as before.
        const auto next_slot = job.sched.next_fire(slot, job.tz);
        auto wait_until = retry_until;
        if (next_slot) wait_until = std::min(wait_until, *next_slot);
        for (;;) {
          try {
            opts = config_.election;
            if (records_seen_ && !records_unsupported_) {
              const auto wait =
                  std::max(std::chrono::duration_cast<milliseconds>(
                               wait_until - std::chrono::system_clock::now() - milliseconds(100)),
                           milliseconds(0));
              // As a value, not thrown: `||` waits for the first branch that succeeds, so a thrown
              // wait_timeout would leave it waiting on the wake-up for ever.
              auto got = co_await (client_.async_acquire(key, opts, wait, use_tuple) ||
                                   control->wake().async_wait(use_tuple));
              if (got.index() == 1) break;  // stopped
              auto& [ec, acquired] = std::get<0>(got);
              if (ec == error::wait_timeout) {
                // The lock stayed held while the slot could start (the slot's run elsewhere, or a dead
                // replica's lease): whoever runs the job next counts the slot from the record if nobody ran
                // it.
                log::debug("job_skipped", {{"job", job.name}, {"slot", rfc3339(slot)}, {"reason", "held"}});
                break;
              }
              if (ec) throw exception(ec, "");
              l.emplace(std::move(acquired));
              break;
            }
            auto got = co_await client_.async_try_acquire(key, opts);
            if (got.acquired) l.emplace(std::move(*got.acquired));
            // Every replica but one lands here on every slot: not worth a line at info.
            else
              log::debug("job_skipped", {{"job", job.name},
                                         {"slot", rfc3339(slot)},
                                         {"reason", "held"},
                                         {"holder", got.holder.owner}});
            break;
          } catch (const std::exception& e) {
            if (!retry || control->stop_requested() || std::chrono::system_clock::now() >= retry_until) {
              log::warn("job_skipped", {{"job", job.name},
                                        {"slot", rfc3339(slot)},
                                        {"reason", "lock_error"},
                                        {"error", e.what()}});
              break;
            }
          }
          late = true;
          asio::steady_timer pause(ex_, std::chrono::seconds(1));
          co_await (pause.async_wait(use_tuple) || control->wake().async_wait(use_tuple));
        }
        // The job's record: whether the slot ran already, and the slots nobody ran since the last one.
        std::optional<group_state> record_state;
        if (l && !control->stop_requested()) {
          record_state = co_await claim_per_job_slot(job, key, slot, *l);
          if (!record_state && !records_unsupported_) {
            co_await release_quietly(*l, key);
            l.reset();
          }
        }
        if (l && !control->stop_requested()) {
          run_context ctx{key, l->token(), client_.identity(), slot, make_run_id(l->token(), 1), 1,
                          &*l, opts};
          // Each attempt has its own run id under the slot's lease: <token>-1, <token>-2, ...
          auto r = co_await run_attempts(
              shared, ctx, control, &*l, false,
              [token = ctx.token, n = std::uint64_t{1}]() mutable { return make_run_id(token, ++n); });
          record_slot(job, r);
          if (record_state && l->active()) {
            // The slot's outcome into the job's record (its attempts, newest first), while the lease holds.
            auto runs = history_.runs(job.name);
            for (auto run = runs.rbegin(); run != runs.rend(); ++run)
              if (run->token == ctx.token && run->lock_key == key)
                add_run(*record_state, job.name, *run, job.history_limit);
            finish_slot(*record_state, job.name, r.outcome, std::chrono::system_clock::now());
            auto text = encode(*record_state, max_state_bytes);
            auto [ec, version] = co_await l->async_write_record(std::move(text), use_tuple);
            if (ec)
              log::warn("job_record_write_failed",
                        {{"job", job.name}, {"key", key}, {"error", ec.message()}});
          }
          // A group that outlived SIGKILL keeps the job's lock, so no replica starts the job beside it; but a
          // shutdown does not wait for it (its guard stays armed).
          if (r.outlived && !control->stop_requested())
            co_await (r.outlived() || control->wake().async_wait(use_tuple));
          // Keep the slot's lock a while after a quick run, so a replica whose clock runs a little behind
          // does not take the same slot again: until half the way to the next slot (at most half the TTL).
          // A slot run late (misfire) is considered by replicas that start up to the misfire window after
          // it, so its lock is kept that long (still at most half the way to the next slot).
          // With the record, which says the slot ran, nothing needs the lock after the run.
          auto next = job.sched.next_fire(slot, job.tz);
          std::chrono::system_clock::duration longest = config_.election.ttl / 2;
          if (late) longest = misfire_window(job);
          auto hold = next && !record_state
                          ? std::min<std::chrono::system_clock::duration>((*next - slot) / 2, longest)
                          : std::chrono::system_clock::duration::zero();
          auto hold_until = slot + hold;
          while (l->active() && !control->stop_requested() && std::chrono::system_clock::now() < hold_until) {
            asio::steady_timer t(ex_, std::chrono::milliseconds(50));
            co_await t.async_wait(use_tuple);
          }
          if (l->active()) {
            try {
              co_await l->async_release();
            } catch (const std::exception& e) {
              log::warn("release_failed", {{"key", key}, {"error", e.what()}});
            }
          }
        }
        job_run_ended(job.name, control);
        per_job_runs_.erase(it);
      },
      asio::detached);
}

asio::awaitable<void> agent_runtime::release_quietly(lease& l, const std::string& key) {
  if (!l.active()) co_return;
  try {
    co_await l.async_release();
  } catch (const std::exception& e) {
    log::warn("release_failed", {{"key", key}, {"error", e.what()}});
  }
}

asio::awaitable<std::optional<group_state>> agent_runtime::claim_per_job_slot(const job_config& job,
                                                                              const std::string& key,
                                                                              sys_seconds slot, lease& l) {
  diagnostics diag;
  auto [ec, record] = co_await client_.async_read_record(key, with_diagnostics(diag, use_tuple));
  if (ec == error::invalid_config) {
    note_records_unsupported(key, diag.message().empty() ? ec.message() : diag.message(),
                             "each slot's lock is kept after its run instead; a lock held by a dead replica "
                             "loses slots until its TTL passes");
    co_return std::nullopt;
  }
  if (ec) {
    // Whether the slot ran cannot be known: not run twice, counted by the next replica that runs the job.
    log::warn("job_skipped", {{"job", job.name},
                              {"slot", rfc3339(slot)},
                              {"reason", "record_unreadable"},
                              {"error", ec.message()},
                              {"detail", diag.message()}});
    co_return std::nullopt;
  }
  records_seen_ = true;
  group_state state;
  if (record) {
    std::string why;
    if (auto read = decode(record->value, why))
      state = std::move(*read);
    else
      log::warn("job_record_unreadable",
                {{"job", job.name}, {"key", key}, {"error", why}, {"replaced", "true"}});
  }
  const auto decided = state.jobs[job.name].decided;
  if (decided && *decided >= slot) {
    // Another replica ran it (this one waited for the lock meanwhile, or its clock runs behind): routine.
    log::debug("job_skipped", {{"job", job.name}, {"slot", rfc3339(slot)}, {"reason", "already_run"}});
    co_return std::nullopt;
  }
  decide(state, job.name, slot);
  state.leader = client_.identity();
  state.token = l.token();
  // Claimed before it runs: a replica that gets the lock after this one sees the slot decided.
  auto text = encode(state, max_state_bytes);
  diagnostics write_diag;
  auto [write_ec, version] =
      co_await l.async_write_record(std::move(text), with_diagnostics(write_diag, use_tuple));
  if (write_ec) {
    log::warn("job_skipped", {{"job", job.name},
                              {"slot", rfc3339(slot)},
                              {"reason", "record_unwritten"},
                              {"error", write_ec.message()},
                              {"detail", write_diag.message()}});
    co_return std::nullopt;
  }
  if (decided) {
    // The slots between the last one run and this one: no replica ran them (a lock held by a replica that
    // died, every replica down). Counted once, by the replica that claimed the next slot.
    const auto span = slots_between(job.sched, job.tz, *decided, slot);
    if (span.count > 1) {
      const auto before = job.sched.next_fire(*decided, job.tz);
      {
        std::lock_guard lk(metrics_mu_);
        job_stats_[job.name].missed += span.count - 1;
      }
      notify_missed(job, span.count - 1, slot - std::chrono::seconds(1));
      log::warn("job_skipped", {{"job", job.name},
                                {"reason", "missed"},
                                {"slots", span.count - 1},
                                {"from", before ? rfc3339(*before) : std::string()},
                                {"before", rfc3339(slot)},
                                {"while", "no_replica"}});
    }
  }
  co_return state;
}

asio::awaitable<void> agent_runtime::run_per_job() {
  // Every replica schedules; the locks decide. Starting is this mode's election: a run_once job whose slot
  // passed within the misfire window (all replicas were down, or restarting) runs once, on one replica.
  for (auto& d : per_job_scheduler_.on_elected(wall_now(), misfire_window())) {
    note_skips(d);
    if (d.what == slot_decision::kind::start) start_per_job_run(d.job, d.slot, true);
    if (d.what == slot_decision::kind::replace)
      start_per_job_run(d.job, d.slot, true, replace_runs(jobs_[d.job]->name, d.slot));
  }
  while (!stopping_) {
    for (auto& d : per_job_scheduler_.due(wall_now())) {
      note_skips(d);
      if (d.what == slot_decision::kind::start) start_per_job_run(d.job, d.slot, false);
      if (d.what == slot_decision::kind::replace)
        start_per_job_run(d.job, d.slot, false, replace_runs(jobs_[d.job]->name, d.slot));
    }
    auto next = per_job_scheduler_.next_due();
    auto wait = std::chrono::milliseconds(1000);
    if (next)
      wait = std::clamp(
          std::chrono::duration_cast<std::chrono::milliseconds>(*next - std::chrono::system_clock::now()),
          std::chrono::milliseconds(1), wait);
    co_await per_job_sleep(wait);
  }
  per_job_scheduler_.on_lost();
  co_await stop_all_runs(per_job_runs_, config_.shutdown_grace);
}

asio::awaitable<void> agent_runtime::stop_all_runs(const std::list<std::shared_ptr<run_control>>& runs,
                                                   std::chrono::milliseconds let_finish, bool lease_lost) {
  const auto give_up = clock_type::now() + let_finish;
  while (!runs.empty() && clock_type::now() < give_up) {
    asio::steady_timer t(ex_, std::chrono::milliseconds(20));
    co_await t.async_wait(use_tuple);
  }
  for (auto& r : runs)
    if (lease_lost)
      r->lose();
    else
      r->stop();
  // Each run stops its process group itself (TERM, then KILL after its grace); wait until all are gone.
  while (!runs.empty()) {
    asio::steady_timer t(ex_, std::chrono::milliseconds(20));
    co_await t.async_wait(use_tuple);
  }
}

agent_runtime::manual_run agent_runtime::run_now(const std::string& name) {
  manual_run out;
  std::optional<std::size_t> index;
  for (std::size_t i = 0; i < jobs_.size(); ++i)
    if (jobs_[i]->name == name) index = i;
  if (!index) return out;
  using result = manual_run::result;
  if (jobs_[*index]->mode == agent_mode::per_job) {
    out.what = result::per_job_mode;
    return out;
  }
  // The same conditions as a scheduled start: an active lease, scheduling under it, not stepping down.
  if (!leading_lease_ || !leading_lease_->active() || !scheduler_.leading() || stopping_ || resigning_ ||
      recampaign_) {
    out.what = result::not_leader;
    return out;
  }
  if (jobs_[*index]->overlap == overlap_policy::forbid && scheduler_.running(*index) > 0) {
    out.what = result::running;
    return out;
  }
  out.what = result::started;
  out.token = leading_lease_->token();
  out.slot = wall_now();
  run_list replacing;
  if (jobs_[*index]->overlap == overlap_policy::replace) replacing = replace_runs(name, out.slot);
  out.run_id = start_run(*index, out.slot, *leading_lease_, true, std::move(replacing), &out.control);
  return out;
}

asio::awaitable<void> agent_runtime::lead(lease& l) {
  // run_now() starts runs under this lease while lead() schedules, and never after it returns (or is
  // destroyed when the lease is lost).
  leading_lease_ = &l;
  struct lease_in_use {
    const lease*& slot;
    ~lease_in_use() { slot = nullptr; }
  } in_use{leading_lease_};
  runs_under_lease_ = 0;
  co_await load_group_state();
  const bool handover = group_known_ && group_.handover;
  if (group_known_) {
    // The group's suspension decides for the leader jobs its state knows; the file for the other leader
    // jobs. A per-job job's suspension is this agent's, and stays as it is.
    std::set<std::string> names;
    for (const auto& j : jobs_) {
      bool suspended = j->suspend;
      if (j->mode != agent_mode::leader)
        suspended = suspended_.contains(j->name);
      else if (group_.suspended && (group_.jobs.contains(j->name) || group_.suspended->contains(j->name)))
        suspended = group_.suspended->contains(j->name);
      if (suspended) names.insert(j->name);
    }
    apply_suspended(names);
    if (group_.suspended) group_.suspended = leader_jobs_in(names);
  }
  group_.leader = client_.identity();
  group_.token = l.token();
  group_.handover = false;
  // Named, not temporaries of the co_await expressions (GCC 12 destroys those twice).
  const auto decided = group_known_ ? decided_slots(group_) : std::map<std::string, sys_seconds>{};
  auto elected = scheduler_.on_elected(wall_now(), misfire_window(), decided, handover);
  co_await carry_out(std::move(elected), l);
  while (!stopping_ && !resigning_ && !recampaign_) {
    // A lease past its deadline decides nothing: the slots from here on are the next leader's to run or to
    // count (a leader woken from a freeze must not count as missed the slots another leader ran).
    if (!l.active()) co_return;
    auto due = scheduler_.due(wall_now());
    co_await carry_out(std::move(due), l);
    // Sleep until the next slot, at most a second at a time so a wall-clock jump is noticed promptly.
    auto next = scheduler_.next_due();
    auto wait = std::chrono::milliseconds(1000);
    if (next) {
      auto until = *next - std::chrono::system_clock::now();
      wait = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(until),
                        std::chrono::milliseconds(1), wait);
    }
    co_await sleep_or_wake(wait);
  }
}

asio::awaitable<void> agent_runtime::carry_out(std::vector<slot_decision> decisions, lease& l) {
  if (decisions.empty()) co_return;
  for (const auto& d : decisions)
    decide(group_, jobs_[d.job]->name, d.slot);
  // Every decision covers its slot in the group's state before a run starts for one: a new leader never
  // runs a slot again that this one started (run_once), and counts the ones nobody decided. Skips and
  // missed slots are counted only once the decisions are kept: unsaved, they are the next leader's to count.
  const bool saved = co_await persist_group_state();
  if (saved)
    for (const auto& d : decisions)
      note_skips(d);
  for (const auto& d : decisions) {
    if (d.what != slot_decision::kind::start && d.what != slot_decision::kind::replace) continue;
    const auto& name = jobs_[d.job]->name;
    if (!saved || !l.active()) {  // never start a run without an active lease and a recorded decision
      log::warn(
          "job_skipped",
          {{"job", name}, {"slot", rfc3339(d.slot)}, {"reason", !l.active() ? "lost" : "state_unsaved"}});
      continue;
    }
    // overlap: replace: the job's runs going (of this leadership, or of an earlier one whose group outlived
    // SIGKILL) are stopped, and the new run waits until they are gone.
    start_run(d.job, d.slot, l, false,
              d.what == slot_decision::kind::replace ? replace_runs(name, d.slot) : run_list{});
  }
}

void agent_runtime::note_records_unsupported(const std::string& key, const std::string& reason,
                                             std::string_view effect) {
  records_unsupported_ = true;
  if (warned_unsupported_) return;
  warned_unsupported_ = true;
  log::warn("group_state_unavailable", {{"key", key}, {"reason", reason}, {"effect", std::string(effect)}});
}

asio::awaitable<void> agent_runtime::load_group_state() {
  group_known_ = false;
  records_unsupported_ = false;  // looked at again at each election: the server may have been upgraded
  diagnostics diag;
  auto [ec, record] =
      co_await client_.async_read_record(config_.election_key, with_diagnostics(diag, use_tuple));
  if (ec == error::invalid_config) {
    note_records_unsupported(config_.election_key, diag.message().empty() ? ec.message() : diag.message(),
                             "job state is kept by this agent only; a new leader starts without it");
    co_return;
  }
  if (ec) {
    // Decided from the misfire window alone, as without a state; the first write replaces it.
    log::warn("group_state_unreadable",
              {{"key", config_.election_key}, {"error", ec.message()}, {"detail", diag.message()}});
    group_ = {};
    co_return;
  }
  group_ = {};
  group_known_ = true;
  if (!record) co_return;  // the group's first leader
  std::string why;
  if (auto state = decode(record->value, why)) {
    group_ = std::move(*state);
    log::info("group_state_loaded", {{"key", config_.election_key},
                                     {"written_by", group_.leader},
                                     {"token", group_.token},
                                     {"handover", group_.handover ? "true" : "false"}});
  } else {
    group_known_ = false;
    log::warn("group_state_unreadable", {{"key", config_.election_key}, {"error", why}});
  }
}

asio::awaitable<bool> agent_runtime::persist_group_state() {
  if (records_unsupported_) co_return true;
  const auto want = ++state_version_;
  while (durable_version_ < want) {
    if (!state_lease_ || !state_lease_->active()) co_return false;
    if (state_writing_) {
      co_await state_written_.async_wait(use_tuple);
      continue;
    }
    state_writing_ = true;
    const auto version = state_version_;
    diagnostics diag;
    auto text = encode(group_, max_state_bytes);
    auto [ec, written] =
        co_await state_lease_->async_write_record(std::move(text), with_diagnostics(diag, use_tuple));
    state_writing_ = false;
    state_written_.cancel();
    if (!ec) {
      durable_version_ = std::max(durable_version_, version);
      continue;
    }
    if (ec == error::invalid_config && state_lease_ && state_lease_->active()) {
      note_records_unsupported(config_.election_key, diag.message().empty() ? ec.message() : diag.message(),
                               "job state is kept by this agent only");
      co_return true;
    }
    log::warn("group_state_write_failed",
              {{"key", config_.election_key}, {"error", ec.message()}, {"detail", diag.message()}});
    co_return false;
  }
  co_return true;
}

asio::awaitable<void> agent_runtime::refresh_group_state() {
  if (!campaigns() || state_lease_) co_return;
  diagnostics diag;
  auto [ec, record] =
      co_await client_.async_read_record(config_.election_key, with_diagnostics(diag, use_tuple));
  if (ec || !record) co_return;  // the last one read stays
  std::string why;
  if (auto state = decode(record->value, why)) {
    group_ = std::move(*state);
    group_known_ = true;
  }
}

asio::awaitable<void> agent_runtime::run() {
  // The two modes side by side: the election for the leader jobs, the per-job loop for the others. Each
  // ends at shutdown, after stopping its own runs.
  co_await (run_elections() && run_per_job());
}

asio::awaitable<void> agent_runtime::run_elections() {
  int failures = 0;
  while (!stopping_) {
    if (!campaigns()) {
      // No leader job (yet): nothing to lead. A reload that adds one starts the campaign.
      co_await sleep_or_wake(std::chrono::seconds(1));
      continue;
    }
    // Each campaign uses the election settings of the moment (restart_election() may change them).
    recampaign_ = false;
    const std::string key = config_.election_key;
    const lease_options opts = config_.election;
    if (!election_ || election_->key() != key) election_.emplace(client_, key);
    std::optional<lease> l;
    try {
      control_.expires_at(asio::steady_timer::time_point::max());
      // A campaign cancelled by the race leaves no lease behind (election::async_campaign).
      auto r = co_await (capture(election_->async_campaign(leader_value(), opts)) ||
                         control_.async_wait(use_tuple));
      if (r.index() == 1) continue;  // shutdown, or new election settings, while campaigning
      auto& got = std::get<0>(r);
      if (got.error) std::rethrow_exception(got.error);
      l.emplace(std::move(*got.value));
      failures = 0;
    } catch (const std::exception& e) {
      log::warn("campaign_failed", {{"key", key}, {"error", e.what()}});
    }
    if (!l) {
      co_await sleep_or_wake(std::chrono::milliseconds(std::min(5000, 200 << std::min(failures++, 5))));
      continue;
    }
    // The group's state is written under this lease until it is released or lost (runs that end while the
    // jobs drain on shutdown are written too).
    state_lease_ = &*l;
    struct state_lease_in_use {
      lease*& slot;
      ~state_lease_in_use() { slot = nullptr; }
    } state_in_use{state_lease_};
    leader_ = true;
    token_ = l->token();
    leading_options_ = opts;
    elections_won_.fetch_add(1);
    log::info("elected", {{"key", key}, {"token", l->token()}, {"identity", client_.identity()}});

    bool lost = false;
    try {
      co_await with_lease(*l, lead(*l));
    } catch (const exception& e) {
      lost = e.code() == error::lease_lost;
    }
    lost = lost || !l->active();  // lead() also returns when it finds the lease past its deadline
    if (lost) {
      leases_lost_.fetch_add(1);
      log::warn("lost", {{"key", key}, {"token", l->token()}, {"reason", l->loss_reason()}});
    }
    // Stop scheduling at once. On shutdown running jobs may finish within shutdown_grace while the lease is
    // still held (renewal goes on); on loss, resign or new election settings they are stopped now.
    scheduler_.on_lost();
    if (!lost && stopping_ && !runs_.empty()) {
      log::info("draining_jobs", {{"running", runs_.size()}, {"grace_ms", config_.shutdown_grace.count()}});
      try {
        co_await with_lease(*l, stop_all_runs(runs_, config_.shutdown_grace));
      } catch (const exception&) {
        lost = true;  // the lease ended while the jobs finished: they are stopped below
      }
    }
    leader_ = false;
    co_await stop_all_runs(runs_, {}, lost);
    if (lost || l->state() == lease_state::lost) continue;  // campaign again, for a new token
    if (stopping_ || resigning_) {
      // Handed over on purpose: the next leader runs the slots that came due meanwhile (within the window)
      // rather than counting them as missed by a failure.
      group_.handover = true;
      co_await persist_group_state();
    }
    state_lease_ = nullptr;
    try {
      co_await election_->async_resign();
    } catch (const std::exception& e) {
      log::warn("release_failed", {{"key", key}, {"error", e.what()}});
      // The election still counts the lease as its own and would refuse to campaign until the lease's
      // deadline; the next campaign uses a new election object, and the server frees the key at the TTL.
      election_.reset();
    }
    if (stopping_) {
      log::info("released", {{"key", key}, {"token", l->token()}});
    } else if (resigning_) {
      log::info("resigned", {{"key", key}, {"token", l->token()}});
      resigning_ = false;
      // Let a standby take over: wait until someone else holds the lock (or a hold-off of two TTLs).
      if (!recampaign_ && election_)
        co_await let_another_lead(std::chrono::duration_cast<milliseconds>(config_.election.ttl * 2));
    } else {
      // New election settings (restart_election()): campaign with them at once.
      log::info("election_changed", {{"key", key}, {"token", l->token()}, {"new_key", config_.election_key}});
    }
  }
}

namespace {
// Completes once anyone leads `e` (a failure ends the wait early, like the hold-off).
asio::awaitable<void> until_someone_leads(election& e) {
  auto leaders = e.observe();
  while (!co_await leaders.async_next()) {
  }
}
}  // namespace

asio::awaitable<void> agent_runtime::let_another_lead(std::chrono::milliseconds hold_off) {
  asio::steady_timer t(ex_, hold_off);
  co_await (capture(until_someone_leads(*election_)) || t.async_wait(use_tuple) ||
            control_.async_wait(use_tuple));
}

agent_runtime::job_status agent_runtime::status_of(std::size_t index,
                                                   std::chrono::system_clock::time_point now) const {
  const auto& job = jobs_[index];
  job_status out;
  out.job = job;
  out.next_run = job->sched.next_fire(std::chrono::floor<std::chrono::seconds>(now), job->tz);
  if (const auto it = running_by_name_.find(job->name); it != running_by_name_.end())
    out.running = it->second;
  // Leader mode with the group's state: the group's runs, wherever they ran (the leader adds its own as
  // they end); otherwise this agent's.
  const auto group_job = group_.jobs.find(job->name);
  if (job->mode == agent_mode::leader && group_known_)
    out.runs = group_job == group_.jobs.end()
                   ? std::vector<run_record>{}
                   : std::vector<run_record>(group_job->second.runs.begin(), group_job->second.runs.end());
  else
    out.runs = history_.runs(job->name);
  // A follower shows the group's suspension as last read (its own applies only once it leads).
  if (job->mode == agent_mode::leader && group_known_ && !state_lease_ && group_.suspended)
    out.suspended = group_.suspended->contains(job->name);
  else
    out.suspended = suspended_.contains(job->name);
  return out;
}

std::vector<agent_runtime::job_status> agent_runtime::jobs(std::chrono::system_clock::time_point now) const {
  std::vector<job_status> out;
  for (std::size_t i = 0; i < jobs_.size(); ++i)
    out.push_back(status_of(i, now));
  return out;
}

std::optional<agent_runtime::job_status> agent_runtime::job(const std::string& name,
                                                            std::chrono::system_clock::time_point now) const {
  for (std::size_t i = 0; i < jobs_.size(); ++i)
    if (jobs_[i]->name == name) return status_of(i, now);
  return std::nullopt;
}

}  // namespace baton::agent
