// SPDX-License-Identifier: Apache-2.0
#include "job_run.hpp"

#include "baton/common/log.hpp"
#include "baton/common/process_group.hpp"
#include "baton/common/stop_schedule.hpp"
#include "baton/config.hpp"
#include "http_job.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <istream>
#include <optional>

namespace baton::agent {
namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using clock_type = std::chrono::steady_clock;

std::string_view to_string(run_outcome o) {
  switch (o) {
    case run_outcome::succeeded:
      return "succeeded";
    case run_outcome::failed:
      return "failed";
    case run_outcome::timed_out:
      return "timed_out";
    case run_outcome::stopped:
      return "stopped";
    case run_outcome::spawn_failed:
      return "spawn_failed";
    case run_outcome::replaced:
      return "replaced";
    case run_outcome::lost:
      return "lost";
  }
  return "failed";
}

run_control::run_control(const asio::any_io_executor& ex)
    : wake_(ex, asio::steady_timer::time_point::max()),
      ended_timer_(ex, asio::steady_timer::time_point::max()) {}

void run_control::stop() {
  stop_requested_ = true;
  wake_.cancel();
}

void run_control::lose() {
  if (!stop_requested_) lost_ = true;
  stop();
}

void run_control::replace(std::string by) {
  // A run already stopping (a lost lease, a shutdown, an earlier replacement) keeps the reason it stops for.
  if (!stop_requested_) replaced_by_ = std::move(by);
  stop();
}

void run_control::mark_ended() {
  ended_ = true;
  ended_timer_.cancel();
}

std::string rfc3339(std::chrono::sys_seconds t) {
  return date::format("%FT%TZ", t);
}

std::string make_run_id(std::uint64_t token, std::uint64_t n) {
  return std::to_string(token) + "-" + std::to_string(n);
}

namespace {

// The job's timeout as an absolute instant (max when the job has none).
clock_type::time_point timeout_at(const job_config& job, clock_type::time_point started) {
  return job.timeout.count() > 0 ? started + job.timeout : clock_type::time_point::max();
}

// What a run keeps of one output stream: its end, for the history and the failure's detail, and how much went
// to the log.
struct output_capture {
  std::string tail;
  bool cut = false;
  std::size_t logged = 0;
  std::uint64_t dropped_lines = 0;
  bool open = true;  // the pump still reads

  void keep(std::string_view line) {
    tail.append(line).push_back('\n');
    if (tail.size() > output_tail_bytes) {
      tail.erase(0, tail.size() - output_tail_bytes);
      cut = true;
    }
  }
};

// Copies one of the command's streams to the agent's log, one line per entry, tagged with job, run and
// stream, up to output_log_bytes per run (the rest is counted), and keeps its end.
asio::awaitable<void> pump_output(std::shared_ptr<asio::posix::stream_descriptor> pipe, std::string job,
                                  std::string run_id, const char* stream,
                                  std::shared_ptr<output_capture> out) {
  asio::streambuf buf(64 * 1024);
  for (;;) {
    auto [ec, n] = co_await asio::async_read_until(*pipe, buf, '\n', asio::as_tuple(asio::use_awaitable));
    if (ec && buf.size() == 0) break;  // end of output (or the pipe closed)
    std::string line;
    if (!ec) {
      std::istream in(&buf);
      std::getline(in, line);
    } else {
      // The last line without a newline, or a line longer than the buffer: log what there is.
      line.assign(asio::buffers_begin(buf.data()), asio::buffers_end(buf.data()));
      buf.consume(buf.size());
    }
    out->keep(line);
    if (out->logged < output_log_bytes) {
      out->logged += line.size() + 1;
      log::write_unthrottled(log::level::info, "job_output",
                             {{"job", job}, {"run", run_id}, {"stream", stream}, {"line", line}});
    } else {
      ++out->dropped_lines;
    }
    if (ec && ec != asio::error::not_found) break;
  }
  if (out->dropped_lines > 0)
    log::warn("job_output_truncated", {{"job", job},
                                       {"run", run_id},
                                       {"stream", stream},
                                       {"logged_bytes", out->logged},
                                       {"dropped_lines", out->dropped_lines}});
  out->open = false;
}

// What a command's exit status says: "exit status 3", "killed by signal 9 (SIGKILL)".
std::string exit_text(int status) {
  if (status > 128 && status < 128 + NSIG) {
    const char* name = sigabbrev_np(status - 128);
    return "killed by signal " + std::to_string(status - 128) +
           (name ? " (SIG" + std::string(name) + ")" : "");
  }
  return "exit status " + std::to_string(status);
}

// The last non-empty line of `tail`, at most 200 bytes of its end.
std::string last_line(const std::string& tail) {
  auto end = tail.find_last_not_of('\n');
  if (end == std::string::npos) return {};
  const auto begin = tail.rfind('\n', end);
  std::string line = tail.substr(begin == std::string::npos ? 0 : begin + 1,
                                 end - (begin == std::string::npos ? 0 : begin + 1) + 1);
  if (line.size() > 200) line = "..." + line.substr(line.size() - 200);
  return line;
}

// How long the command's group may take to disappear after SIGKILL before the run reports that it could not
// be stopped. SIGKILL cannot be caught; only a process in uninterruptible sleep (a hung NFS mount) or one
// that kill(2) may not signal any more outlives it.
constexpr auto kill_wait = std::chrono::seconds(5);

std::string errno_text(int err) {
  return std::strerror(err);
}

// Waits for the command to exit, at most until `until`; the exit status if it did.
asio::awaitable<std::optional<int>> exit_before(group_child& child, clock_type::time_point until) {
  asio::steady_timer timer(co_await asio::this_coro::executor, until);
  auto r = co_await (child.wait_exit() || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (r.index() == 0) co_return std::get<0>(r);
  co_return std::nullopt;
}

// Reaps what is left of the group (this process is a subreaper, so the command's orphans are ours): a zombie
// still counts as a process, and the group must be empty before the run reports it ended. True once empty.
asio::awaitable<bool> group_emptied(group_child& child, clock_type::time_point until) {
  auto ex = co_await asio::this_coro::executor;
  while (child.group_alive()) {
    if (clock_type::now() >= until) co_return false;
    asio::steady_timer tick(ex, std::chrono::milliseconds(10));
    co_await tick.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  co_return true;
}

// A group that outlived SIGKILL: SIGKILL again every second until it is gone, then let its guard go.
asio::awaitable<void> await_stray_end(std::shared_ptr<group_child> stray, std::shared_ptr<group_guard> guard,
                                      std::string job, std::string run_id) {
  for (;;) {
    // Not `while (!co_await ...)`: GCC 12 compiled that condition into a crash (SIGILL) on resumption here.
    const bool gone = co_await group_emptied(*stray, clock_type::now() + std::chrono::seconds(1));
    if (gone) break;
    stray->signal_group(SIGKILL);
  }
  co_await guard->disarm();
  log::info("job_group_ended", {{"job", job}, {"run", run_id}, {"pgid", stray->pid()}});
}

// The run's link to its lease: tells the guard each deadline a confirmed renew gives the lease, and says when
// SIGKILL must come at the latest. Without a lease, neither.
class lease_link {
 public:
  explicit lease_link(const run_context& ctx)
      : ctx_(ctx), reported_(ctx.lease ? ctx.lease->deadline() : lease_clock::time_point()) {}

  // The guard is the backstop: SIGTERM at the deadline, SIGKILL only at the latest instant, so that an agent
  // that runs sends its own SIGKILL after the job's grace first, and logs it.
  std::optional<guard_limits> limits() const {
    if (!ctx_.lease) return std::nullopt;
    return guard_limits{reported_.time_since_epoch(), latest_kill(reported_),
                        borrowed_time(ctx_.lease_options.effective_safety_margin())};
  }

  void report(group_guard& guard) {
    if (!ctx_.lease || !ctx_.lease->active()) return;
    const auto deadline = ctx_.lease->deadline();
    if (deadline > reported_ && guard.extend(deadline.time_since_epoch(), latest_kill(deadline)))
      reported_ = deadline;
  }

  /// Never ends; cancel it.
  asio::awaitable<void> report_renewals(group_guard& guard) {
    asio::steady_timer tick(co_await asio::this_coro::executor, clock_type::time_point::max());
    for (;;) {
      if (ctx_.lease) tick.expires_after(report_period(ctx_.lease_options.ttl));
      co_await tick.async_wait(asio::use_awaitable);
      report(guard);
    }
  }

  /// The latest instant for SIGKILL (on the agent's timers' clock) under the lease as it stands now; max
  /// without a lease.
  clock_type::time_point kill_at() const {
    if (!ctx_.lease) return clock_type::time_point::max();
    const auto left = lease_clock::time_point(latest_kill(ctx_.lease->deadline())) - lease_clock::now();
    return clock_type::now() + std::chrono::duration_cast<clock_type::duration>(left);
  }

  /// How long a wait may last before report() and kill_at() are looked at again.
  clock_type::duration look_again() const {
    return ctx_.lease ? clock_type::duration(report_period(ctx_.lease_options.ttl))
                      : clock_type::duration::max();
  }

 private:
  std::chrono::nanoseconds latest_kill(lease_clock::time_point deadline) const {
    return kill_by(deadline.time_since_epoch(), ctx_.lease_options.effective_safety_margin());
  }

  const run_context& ctx_;
  lease_clock::time_point reported_;
};

// Waits for the command to exit until `grace_end`, or until the lease's SIGKILL time if that comes first
// (the lease may be lost meanwhile), telling the guard of renewals meanwhile. The exit status if it exited;
// `cut` says whether the lease ended the wait before the grace did.
asio::awaitable<std::optional<int>> exit_within_grace(group_child& child, clock_type::time_point grace_end,
                                                      lease_link& link, group_guard& guard, bool& cut) {
  for (;;) {
    const auto lease_end = link.kill_at();
    const auto now = clock_type::now();
    if (now >= std::min(grace_end, lease_end)) {
      cut = lease_end < grace_end;
      co_return std::nullopt;
    }
    auto wake = std::min(grace_end, lease_end);
    if (wake - now > link.look_again()) wake = now + link.look_again();
    if (auto status = co_await exit_before(child, wake)) co_return status;
    link.report(guard);
  }
}

asio::awaitable<run_result> run_command(const job_config& job, const run_context& ctx,
                                        std::shared_ptr<run_control> control) {
  auto ex = co_await asio::this_coro::executor;
  run_result result;
  const auto started = clock_type::now();
  // The same instant on the guard's clock, to measure the run by the exit the guard saw.
  const auto started_boot = lease_clock::now().time_since_epoch();
  auto spawn_failed = [&](std::string why) {
    result.outcome = run_outcome::spawn_failed;
    result.detail = std::move(why);
    result.duration = clock_type::now() - started;
    return result;
  };
  std::vector<std::string> argv = job.command;
  if (job.shell) {
    // `/bin/sh -c script [$0 $1 ...]`: the first item is the script, the rest its positional parameters.
    argv = {"/bin/sh", "-c"};
    argv.insert(argv.end(), job.command.begin(), job.command.end());
  }
  // The job's own variables first, then the agent's (no job may set a BATON_* one: config.cpp).
  std::vector<std::pair<std::string, std::string>> env = job.env;
  env.insert(env.end(), {
                            {"BATON_FENCING_TOKEN", std::to_string(ctx.token)},
                            {"BATON_LOCK_KEY", ctx.lock_key},
                            {"BATON_JOB", job.name},
                            {"BATON_SCHEDULED_AT", rfc3339(ctx.slot)},
                            {"BATON_IDENTITY", ctx.identity},
                            {"BATON_RUN_ID", ctx.run_id},
                            {"BATON_ATTEMPT", std::to_string(ctx.attempt)},
                        });
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) co_return spawn_failed("output pipe: " + errno_text(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    co_return spawn_failed("error pipe: " + errno_text(e));
  }
  auto reader = std::make_shared<asio::posix::stream_descriptor>(ex, out[0]);
  auto error_reader = std::make_shared<asio::posix::stream_descriptor>(ex, err[0]);
  child_setup setup;
  setup.error_fd = err[1];
  setup.working_dir = job.working_dir;
  setup.user = job.credentials;
  setup.oom_first = true;  // a job out of memory is killed, not the agent (docs/agent.md, `user`)
  // The guard kills the command's group if this agent dies before the run is over, and under a lease stops
  // it by the lease's deadline should this agent not (docs/design.md).
  lease_link link(ctx);
  std::unique_ptr<group_guard> guard;
  std::unique_ptr<group_child> child;
  std::string failure;
  try {
    guard = std::make_unique<group_guard>(ex, link.limits());
    child =
        std::make_unique<group_child>(ex, argv, env, std::vector<int>{}, out[1], guard->command_fd(), setup);
  } catch (const spawn_error& e) {
    failure = e.what();
  }
  ::close(out[1]);  // the child has them; our copies would keep the pipes open after the child exits
  ::close(err[1]);
  if (!child) {
    if (guard) co_await guard->disarm();
    co_return spawn_failed(failure);
  }
  auto stdout_capture = std::make_shared<output_capture>();
  auto stderr_capture = std::make_shared<output_capture>();
  asio::co_spawn(ex, pump_output(reader, job.name, ctx.run_id, "stdout", stdout_capture),
                 [stdout_capture](std::exception_ptr) { stdout_capture->open = false; });
  asio::co_spawn(ex, pump_output(error_reader, job.name, ctx.run_id, "stderr", stderr_capture),
                 [stderr_capture](std::exception_ptr) { stderr_capture->open = false; });

  asio::steady_timer deadline(ex, timeout_at(job, started));
  std::optional<int> status;
  if (!control->stop_requested()) {
    auto r =
        co_await (child->wait_exit() || control->wake().async_wait(asio::as_tuple(asio::use_awaitable)) ||
                  deadline.async_wait(asio::as_tuple(asio::use_awaitable)) || link.report_renewals(*guard));
    if (r.index() == 0)
      status = std::get<0>(r);
    else if (r.index() == 2)
      result.outcome = run_outcome::timed_out;
  }
  // Why the group could not be stopped, if it could not.
  std::string stop_failure;
  auto send = [&](int sig) {
    if (int err = child->signal_group(sig); err != 0 && stop_failure.empty())
      stop_failure = std::string(sig == SIGTERM ? "SIGTERM" : "SIGKILL") + " to process group " +
                     std::to_string(child->pid()) + ": " + errno_text(err);
  };
  if (!status) {
    // Stop the whole process group: SIGTERM, then SIGKILL once the grace period is over.
    if (result.outcome != run_outcome::timed_out) result.outcome = run_outcome::stopped;
    send(SIGTERM);
    bool cut = false;
    status = co_await exit_within_grace(*child, clock_type::now() + job.grace, link, *guard, cut);
    if (!status) {
      log::warn("job_killed", {{"job", job.name},
                               {"run", ctx.run_id},
                               {"grace_ms", job.grace.count()},
                               {"reason", cut ? "lease_ending" : "grace_over"}});
      send(SIGKILL);
      // A refused SIGKILL was not delivered: waiting for it to work would only delay the report.
      if (stop_failure.empty()) status = co_await exit_before(*child, clock_type::now() + kill_wait);
    }
  } else if (const auto seen = guard->reports();
             seen.timer_errno != 0 && (*status == 128 + SIGTERM || *status == 128 + SIGKILL) &&
             (!seen.terminated_at || (ctx.lease && ctx.lease->active()))) {
    // Its guard could not re-arm its timer after a renew, and stopped it at the deadline it still held,
    // while the lease went on.
    result.outcome = run_outcome::stopped;
    result.detail =
        "stopped by its guard at an earlier deadline of the lease: it could not re-arm its timer "
        "after a renew (" +
        errno_text(seen.timer_errno) + ")";
  } else if (seen.terminated_at) {
    // Its guard stopped it at the lease's deadline (this agent was stopped, starved, or a moment late):
    // whatever it exited with, what it did from the deadline on was not under the lease.
    result.outcome = run_outcome::lost;
    result.detail =
        "stopped by its guard: the lease's deadline passed while it ran (" + exit_text(*status) + ")";
  } else {
    result.outcome = *status == 0 ? run_outcome::succeeded : run_outcome::failed;
  }
  if (stop_failure.empty() && child->group_alive()) send(SIGKILL);  // whatever the command left in its group
  const bool emptied = stop_failure.empty() ? co_await group_emptied(*child, clock_type::now() + kill_wait)
                                            : !child->group_alive();
  if (!emptied && stop_failure.empty())
    stop_failure = "process group " + std::to_string(child->pid()) + " still running " +
                   std::to_string(kill_wait.count()) + "s after SIGKILL";
  result.exit_status = status.value_or(-1);
  result.duration = clock_type::now() - started;
  // A stopped or starved agent reaps late: the guard's sight of the exit is the run's real end.
  if (const auto exited = guard->reports().exited_at; exited && *exited >= started_boot)
    result.duration =
        std::min(result.duration, std::chrono::duration_cast<clock_type::duration>(*exited - started_boot));
  if (!stop_failure.empty()) {
    result.kill_failed = true;
    result.detail = "could not stop: " + stop_failure;
    log::error("job_kill_failed",
               {{"job", job.name}, {"run", ctx.run_id}, {"pgid", child->pid()}, {"error", stop_failure}});
  }
  // Let the output pump drain what is left (bounded: the group is gone, the pipe closes). A stray group keeps
  // the pipe open: no point waiting then.
  asio::steady_timer drain(ex, emptied ? std::chrono::seconds(2) : std::chrono::seconds(0));
  while ((stdout_capture->open || stderr_capture->open) && clock_type::now() < drain.expiry()) {
    asio::steady_timer tick(ex, std::chrono::milliseconds(5));
    co_await tick.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  boost::system::error_code ignored;
  reader->close(ignored);
  error_reader->close(ignored);
  result.stdout_tail = stdout_capture->tail;
  result.stdout_cut = stdout_capture->cut;
  result.stderr_tail = stderr_capture->tail;
  result.stderr_cut = stderr_capture->cut;
  if (result.outcome == run_outcome::failed && result.detail.empty()) {
    // What happened, for the history and the alert: the status, and the last line the command wrote to
    // stderr.
    result.detail = exit_text(result.exit_status);
    if (const auto line = last_line(result.stderr_tail); !line.empty()) result.detail += "; stderr: " + line;
  }
  if (emptied) {
    co_await guard->disarm();
    co_return result;
  }
  // The group outlived SIGKILL. The run is reported now; the guard stays armed, and the job counts as running
  // until the group is gone, so no second copy of it starts with the same token.
  result.outcome = result.outcome == run_outcome::succeeded ? run_outcome::failed : result.outcome;
  std::shared_ptr<group_child> stray(std::move(child));
  std::shared_ptr<group_guard> stray_guard(std::move(guard));
  result.outlived = [stray, stray_guard, name = job.name, run_id = ctx.run_id] {
    return await_stray_end(stray, stray_guard, name, run_id);
  };
  co_return result;
}

asio::awaitable<run_result> run_http(const job_config& job, const run_context& ctx,
                                     std::shared_ptr<run_control> control) {
  run_result result;
  const auto started = clock_type::now();
  http_request_spec spec;
  spec.method = job.http->method;
  spec.url = job.http->url;
  spec.ca_file = job.http->ca_file;
  spec.headers = job.http->headers;
  spec.headers.emplace_back("Fencing-Token", std::to_string(ctx.token));
  spec.headers.emplace_back("Baton-Job", job.name);
  spec.headers.emplace_back("Baton-Scheduled-At", rfc3339(ctx.slot));
  spec.headers.emplace_back("Baton-Run-Id", ctx.run_id);
  spec.headers.emplace_back("Baton-Attempt", std::to_string(ctx.attempt));
  spec.body = job.http->body;
  if (control->stop_requested()) {
    result.outcome = run_outcome::stopped;
    co_return result;
  }
  auto r = co_await (call_http(spec, job.timeout) ||
                     control->wake().async_wait(asio::as_tuple(asio::use_awaitable)));
  result.duration = clock_type::now() - started;
  if (r.index() == 1) {
    result.outcome = run_outcome::stopped;
    result.detail = "aborted";
    co_return result;
  }
  auto& call = std::get<0>(r);
  if (ctx.lease && !ctx.lease->active()) {
    // The answer came after the lease's deadline (the agent was stopped or starved meanwhile): when the
    // request took effect is unknown, so it cannot count as done under the lease.
    result.outcome = run_outcome::lost;
    result.exit_status = call.ec ? -1 : call.status;
    result.detail = "the answer came after the lease's deadline had passed";
    co_return result;
  }
  if (call.ec == boost::system::errc::timed_out) {
    result.outcome = run_outcome::timed_out;
    result.detail = "no complete answer within " + std::to_string(job.timeout.count()) + "ms";
  } else if (call.ec) {
    result.outcome = run_outcome::failed;
    result.detail = call.ec.message() + (call.body.empty() ? "" : ": " + call.body);
  } else {
    result.exit_status = call.status;
    result.outcome = call.status >= 200 && call.status < 300 ? run_outcome::succeeded : run_outcome::failed;
    result.detail = call.body.substr(0, 200);
    // A redirect is the run's answer: following it would send the fencing token and the body to a place the
    // configuration never named.
    if (call.status >= 300 && call.status < 400)
      result.detail =
          "redirect to " +
          (call.location.empty() ? std::string("(no Location)") : without_credentials(call.location)) +
          " not followed";
  }
  co_return result;
}

}  // namespace

asio::awaitable<run_result> run_job(const job_config& job, const run_context& ctx,
                                    std::shared_ptr<run_control> control) {
  if (job.http) co_return co_await run_http(job, ctx, std::move(control));
  co_return co_await run_command(job, ctx, std::move(control));
}

}  // namespace baton::agent
