// SPDX-License-Identifier: Apache-2.0
#include "agent.hpp"

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

std::vector<scheduled_job> make_jobs(const std::vector<job_config>& jobs,
                                     const std::set<std::string>& suspended) {
  std::vector<scheduled_job> out;
  for (const auto& j : jobs)
    out.push_back({j.name, j.sched, j.tz, j.overlap == overlap_policy::allow,
                   j.misfire == misfire_policy::run_once, suspended.contains(j.name),
                   j.starting_deadline
                       ? std::optional(std::chrono::duration_cast<std::chrono::seconds>(*j.starting_deadline))
                       : std::nullopt,
                   j.overlap == overlap_policy::replace});
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
      scheduler_(make_jobs(config_.jobs, suspended_in(config_.jobs))),
      jobs_(share_jobs(config_.jobs)),
      control_(ex, asio::steady_timer::time_point::max()) {
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

bool agent_runtime::set_suspended(const std::string& name, bool suspended) {
  for (std::size_t i = 0; i < jobs_.size(); ++i) {
    if (jobs_[i]->name != name) continue;
    if (suspended)
      suspended_.insert(name);
    else
      suspended_.erase(name);
    scheduler_.set_suspended(i, suspended);
    log::info(suspended ? "job_suspended" : "job_resumed", {{"job", name}});
    return true;
  }
  return false;
}

agent_runtime::status agent_runtime::current() const {
  return {leader_.load(), token_.load()};
}

void agent_runtime::shutdown() {
  stopping_ = true;
  control_.cancel();
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
  const auto before = scheduler_.replace_jobs(make_jobs(jobs, suspended_));
  // A job that is new to the scheduler may still have runs in flight: it was removed by an earlier reload
  // while they ran, and comes back now. They count for its overlap rule as before.
  for (std::size_t i = 0; i < shared.size(); ++i)
    if (!before[i])
      for (int n = running_by_name_[shared[i]->name]; n > 0; --n)
        scheduler_.run_started(i);
  jobs_ = std::move(shared);
  for (const auto& j : jobs_)
    history_.set_limit(j->name, j->history_limit);
  config_.jobs = std::move(jobs);
  // Wake the scheduling loop, so a new job's first slot is not up to a second late. Only the loop waits on
  // control_ while the scheduler leads (a campaign would take the wake-up for a shutdown or a resign).
  if (scheduler_.leading()) control_.cancel();
}

void agent_runtime::restart_election(std::string key, lease_options election) {
  config_.election_key = std::move(key);
  config_.election = election;
  if (config_.mode == agent_mode::per_job) return;  // each run's lock reads them when it is taken
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
    if (jobs_[i]->name == job) scheduler_.run_finished(i);
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

void agent_runtime::record_run(const job_config& job, const run_result& r) {
  std::lock_guard lk(metrics_mu_);
  auto& s = job_stats_[job.name];
  ++s.outcomes[std::string(to_string(r.outcome))];
  s.duration_sum += std::chrono::duration<double>(r.duration).count();
  ++s.duration_count;
  if (r.kill_failed) ++s.kill_failures;
}

void agent_runtime::record_slot(const job_config& job, const run_result& r) {
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
  history_.finished(job.name,
                    {ctx.run_id, ctx.token, ctx.identity, ctx.lock_key, ctx.slot, started,
                     std::chrono::duration_cast<std::chrono::milliseconds>(r.duration), r.outcome,
                     r.exit_status, r.detail, manual, ctx.attempt},
                    job.history_limit);
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
                                     bool manual, run_list replacing) {
  auto job = jobs_[index];
  auto control = std::make_shared<run_control>(ex_);
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
  runs_.push_back(control);
  auto it = std::prev(runs_.end());
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
          runs_.erase(it);
          co_return;
        }
        // misfire: run_once retries a slot whose lock could not be asked for (lock server unreachable) until
        // the misfire window after the slot has passed, as a leader elected late would still run it.
        const bool retry = job.misfire == misfire_policy::run_once;
        const auto retry_until = slot + misfire_window(job);
        std::optional<lease> l;
        lease_options opts;  // those the lock was taken with (a reload may change config_.election meanwhile)
        bool late = misfire;
        for (;;) {
          try {
            opts = config_.election;
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
        if (l && !control->stop_requested()) {
          run_context ctx{key, l->token(), client_.identity(), slot, make_run_id(l->token(), 1), 1,
                          &*l, opts};
          // Each attempt has its own run id under the slot's lease: <token>-1, <token>-2, ...
          auto r = co_await run_attempts(
              shared, ctx, control, &*l, false,
              [token = ctx.token, n = std::uint64_t{1}]() mutable { return make_run_id(token, ++n); });
          record_slot(job, r);
          // A group that outlived SIGKILL keeps the job's lock, so no replica starts the job beside it; but a
          // shutdown does not wait for it (its guard stays armed).
          if (r.outlived && !control->stop_requested())
            co_await (r.outlived() || control->wake().async_wait(use_tuple));
          // Keep the slot's lock a while after a quick run, so a replica whose clock runs a little behind
          // does not take the same slot again: until half the way to the next slot (at most half the TTL).
          // A slot run late (misfire) is considered by replicas that start up to the misfire window after
          // it, so its lock is kept that long (still at most half the way to the next slot).
          auto next = job.sched.next_fire(slot, job.tz);
          std::chrono::system_clock::duration longest = config_.election.ttl / 2;
          if (late) longest = misfire_window(job);
          auto hold = next ? std::min<std::chrono::system_clock::duration>((*next - slot) / 2, longest)
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
        runs_.erase(it);
      },
      asio::detached);
}

asio::awaitable<void> agent_runtime::run_per_job() {
  leader_ = false;
  // Every replica schedules; the locks decide. Starting is this mode's election: a run_once job whose slot
  // passed within the misfire window (all replicas were down, or restarting) runs once, on one replica.
  for (auto& d : scheduler_.on_elected(wall_now(), misfire_window())) {
    note_skips(d);
    if (d.what == slot_decision::kind::start) start_per_job_run(d.job, d.slot, true);
    if (d.what == slot_decision::kind::replace)
      start_per_job_run(d.job, d.slot, true, replace_runs(jobs_[d.job]->name, d.slot));
  }
  while (!stopping_) {
    for (auto& d : scheduler_.due(wall_now())) {
      note_skips(d);
      if (d.what == slot_decision::kind::start) start_per_job_run(d.job, d.slot, false);
      if (d.what == slot_decision::kind::replace)
        start_per_job_run(d.job, d.slot, false, replace_runs(jobs_[d.job]->name, d.slot));
    }
    auto next = scheduler_.next_due();
    auto wait = std::chrono::milliseconds(1000);
    if (next)
      wait = std::clamp(
          std::chrono::duration_cast<std::chrono::milliseconds>(*next - std::chrono::system_clock::now()),
          std::chrono::milliseconds(1), wait);
    co_await sleep_or_wake(wait);
  }
  scheduler_.on_lost();
  co_await stop_all_runs(config_.shutdown_grace);
}

asio::awaitable<void> agent_runtime::stop_all_runs(std::chrono::milliseconds let_finish, bool lease_lost) {
  const auto give_up = clock_type::now() + let_finish;
  while (!runs_.empty() && clock_type::now() < give_up) {
    asio::steady_timer t(ex_, std::chrono::milliseconds(20));
    co_await t.async_wait(use_tuple);
  }
  for (auto& r : runs_)
    if (lease_lost)
      r->lose();
    else
      r->stop();
  // Each run stops its process group itself (TERM, then KILL after its grace); wait until all are gone.
  while (!runs_.empty()) {
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
  if (config_.mode == agent_mode::per_job) {
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
  out.run_id = start_run(*index, out.slot, *leading_lease_, true, std::move(replacing));
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
  // overlap: replace: the job's runs going (of this leadership, or of an earlier one whose group outlived
  // SIGKILL) are stopped, and the new run waits until they are gone.
  const auto start = [&](const slot_decision& d) {
    start_run(d.job, d.slot, l, false,
              d.what == slot_decision::kind::replace ? replace_runs(jobs_[d.job]->name, d.slot) : run_list{});
  };
  for (auto& d : scheduler_.on_elected(wall_now(), misfire_window())) {
    note_skips(d);
    if (d.what == slot_decision::kind::start || d.what == slot_decision::kind::replace) start(d);
  }
  while (!stopping_ && !resigning_ && !recampaign_) {
    // A lease past its deadline decides nothing: the slots from here on are the next leader's to run or to
    // count (a leader woken from a freeze must not count as missed the slots another leader ran).
    if (!l.active()) co_return;
    for (auto& d : scheduler_.due(wall_now())) {
      note_skips(d);
      if (d.what != slot_decision::kind::start && d.what != slot_decision::kind::replace) continue;
      if (!l.active()) {  // never start a run without an active lease
        log::warn("job_skipped",
                  {{"job", jobs_[d.job]->name}, {"slot", rfc3339(d.slot)}, {"reason", "lost"}});
        continue;
      }
      start(d);
    }
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

asio::awaitable<void> agent_runtime::run() {
  if (config_.mode == agent_mode::per_job) {
    co_await run_per_job();
    co_return;
  }
  int failures = 0;
  while (!stopping_) {
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
        co_await with_lease(*l, stop_all_runs(config_.shutdown_grace));
      } catch (const exception&) {
        lost = true;  // the lease ended while the jobs finished: they are stopped below
      }
    }
    leader_ = false;
    co_await stop_all_runs({}, lost);
    if (lost || l->state() == lease_state::lost) continue;  // campaign again, for a new token
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
  out.runs = history_.runs(job->name);
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
