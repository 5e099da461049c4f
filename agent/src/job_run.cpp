#include "job_run.hpp"

#include "baton/common/log.hpp"
#include "baton/common/process_group.hpp"
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

#include <istream>

namespace baton::agent {
namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using clock_type = std::chrono::steady_clock;

std::string_view to_string(run_outcome o) {
  switch (o) {
    case run_outcome::succeeded: return "succeeded";
    case run_outcome::failed: return "failed";
    case run_outcome::timed_out: return "timed_out";
    case run_outcome::stopped: return "stopped";
    case run_outcome::spawn_failed: return "spawn_failed";
  }
  return "failed";
}

run_control::run_control(const asio::any_io_executor& ex) : wake_(ex, asio::steady_timer::time_point::max()) {}

void run_control::stop() {
  stop_requested_ = true;
  wake_.cancel();
}

std::string rfc3339(std::chrono::sys_seconds t) { return date::format("%FT%TZ", t); }

namespace {

// The job's timeout as an absolute instant (max when the job has none).
clock_type::time_point timeout_at(const job_config& job, clock_type::time_point started) {
  return job.timeout.count() > 0 ? started + job.timeout : clock_type::time_point::max();
}

// Copies the command's output to the agent's log, one line per entry, tagged with job and run.
asio::awaitable<void> pump_output(std::shared_ptr<asio::posix::stream_descriptor> pipe, std::string job,
                                  std::uint64_t run_id) {
  asio::streambuf buf(64 * 1024);
  for (;;) {
    auto [ec, n] = co_await asio::async_read_until(*pipe, buf, '\n', asio::as_tuple(asio::use_awaitable));
    if (ec && buf.size() == 0) co_return;  // end of output (or the pipe closed)
    std::string line;
    if (!ec) {
      std::istream in(&buf);
      std::getline(in, line);
    } else {
      // The last line without a newline, or a line longer than the buffer: log what there is.
      line.assign(asio::buffers_begin(buf.data()), asio::buffers_end(buf.data()));
      buf.consume(buf.size());
    }
    log::info("job_output", {{"job", job}, {"run", run_id}, {"line", line}});
    if (ec && ec != asio::error::not_found) co_return;
  }
}

asio::awaitable<run_result> run_command(const job_config& job, const run_context& ctx,
                                        std::shared_ptr<run_control> control) {
  auto ex = co_await asio::this_coro::executor;
  run_result result;
  const auto started = clock_type::now();
  std::vector<std::string> argv = job.command;
  if (job.shell) {
    // `/bin/sh -c script [$0 $1 ...]`: the first item is the script, the rest its positional parameters.
    argv = {"/bin/sh", "-c"};
    argv.insert(argv.end(), job.command.begin(), job.command.end());
  }
  std::vector<std::pair<std::string, std::string>> env{
      {"BATON_FENCING_TOKEN", std::to_string(ctx.token)},
      {"BATON_LOCK_KEY", ctx.lock_key},
      {"BATON_JOB", job.name},
      {"BATON_SCHEDULED_AT", rfc3339(ctx.slot)},
      {"BATON_IDENTITY", ctx.identity},
      {"BATON_RUN_ID", std::to_string(ctx.run_id)},
  };
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    result.outcome = run_outcome::spawn_failed;
    result.detail = "pipe failed";
    co_return result;
  }
  auto reader = std::make_shared<asio::posix::stream_descriptor>(ex, out[0]);
  std::unique_ptr<group_child> child;
  try {
    child = std::make_unique<group_child>(ex, argv, env, std::vector<int>{}, out[1]);
  } catch (const spawn_error& e) {
    ::close(out[1]);
    result.outcome = run_outcome::spawn_failed;
    result.detail = e.what();
    result.duration = clock_type::now() - started;
    co_return result;
  }
  ::close(out[1]);  // the child has it; our copy would keep the pipe open after the child exits
  auto pumping = std::make_shared<bool>(true);
  asio::co_spawn(ex, pump_output(reader, job.name, ctx.run_id), [pumping](std::exception_ptr) { *pumping = false; });

  asio::steady_timer deadline(ex, timeout_at(job, started));
  std::optional<int> status;
  if (!control->stop_requested()) {
    auto r = co_await (child->wait_exit() || control->wake().async_wait(asio::as_tuple(asio::use_awaitable)) ||
                       deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (r.index() == 0) status = std::get<0>(r);
    else if (r.index() == 2) result.outcome = run_outcome::timed_out;
  }
  if (!status) {
    // Stop the whole process group: SIGTERM, then SIGKILL once the grace period is over.
    if (result.outcome != run_outcome::timed_out) result.outcome = run_outcome::stopped;
    child->signal_group(SIGTERM);
    asio::steady_timer grace(ex, job.grace);
    auto r = co_await (child->wait_exit() || grace.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (r.index() == 1) {
      log::warn("job_killed", {{"job", job.name}, {"run", ctx.run_id}, {"grace_ms", job.grace.count()}});
      child->signal_group(SIGKILL);
      status = co_await child->wait_exit();
    } else {
      status = std::get<0>(r);
    }
    child->signal_group(SIGKILL);  // whatever the command left behind in its group
  } else {
    result.outcome = *status == 0 ? run_outcome::succeeded : run_outcome::failed;
    child->signal_group(SIGKILL);
  }
  // Reap what the KILL left (this process is a subreaper, so the command's orphans are ours): a zombie
  // still counts as a process, and the group must be empty before the run reports it ended.
  for (int i = 0; i < 500 && child->group_alive(); ++i) {
    asio::steady_timer tick(ex, std::chrono::milliseconds(10));
    co_await tick.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  result.exit_status = *status;
  result.duration = clock_type::now() - started;
  // Let the output pump drain what is left (bounded: the group is gone, the pipe closes).
  asio::steady_timer drain(ex, std::chrono::seconds(2));
  while (*pumping && clock_type::now() < drain.expiry()) {
    asio::steady_timer tick(ex, std::chrono::milliseconds(5));
    co_await tick.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  boost::system::error_code ignored;
  reader->close(ignored);
  co_return result;
}

asio::awaitable<run_result> run_http(const job_config& job, const run_context& ctx,
                                     std::shared_ptr<run_control> control) {
  run_result result;
  const auto started = clock_type::now();
  http_request_spec spec;
  spec.method = job.http->method;
  spec.url = job.http->url;
  spec.headers = job.http->headers;
  spec.headers.emplace_back("Fencing-Token", std::to_string(ctx.token));
  spec.headers.emplace_back("Baton-Job", job.name);
  spec.headers.emplace_back("Baton-Scheduled-At", rfc3339(ctx.slot));
  spec.body = job.http->body;
  if (control->stop_requested()) {
    result.outcome = run_outcome::stopped;
    co_return result;
  }
  auto r = co_await (call_http(spec, job.timeout) || control->wake().async_wait(asio::as_tuple(asio::use_awaitable)));
  result.duration = clock_type::now() - started;
  if (r.index() == 1) {
    result.outcome = run_outcome::stopped;
    result.detail = "aborted";
    co_return result;
  }
  auto& call = std::get<0>(r);
  if (call.ec == boost::system::errc::timed_out) {
    result.outcome = run_outcome::timed_out;
  } else if (call.ec) {
    result.outcome = run_outcome::failed;
    result.detail = call.ec.message() + (call.body.empty() ? "" : ": " + call.body);
  } else {
    result.exit_status = call.status;
    result.outcome = call.status >= 200 && call.status < 300 ? run_outcome::succeeded : run_outcome::failed;
    result.detail = call.body.substr(0, 200);
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
