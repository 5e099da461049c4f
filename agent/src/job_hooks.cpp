// SPDX-License-Identifier: Apache-2.0
#include "job_hooks.hpp"

#include "http_job.hpp"

#include "baton/common/log.hpp"
#include "baton/common/process_group.hpp"
#include "baton/config.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

namespace baton::agent {
namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace {

asio::awaitable<void> deliver_webhook(const job_hook& hook, const hook_event& e) {
  http_request_spec spec;
  spec.method = "POST";
  spec.url = hook.url;
  spec.ca_file = hook.ca_file;
  spec.headers = hook.headers;
  spec.headers.emplace_back("Content-Type", "application/json");
  spec.headers.emplace_back("Baton-Event", e.event);
  spec.body = e.body;
  const auto target = without_credentials(hook.url);
  auto pause = hook_first_backoff;
  for (int attempt = 1;; ++attempt) {
    const auto r = co_await call_http(spec, hook_timeout);
    const bool ok = !r.ec && r.status >= 200 && r.status < 300;
    if (ok) {
      log::info(
          "hook_delivered",
          {{"job", e.job}, {"event", e.event}, {"url", target}, {"status", r.status}, {"attempt", attempt}});
      co_return;
    }
    const std::string why = r.ec ? r.ec.message() : "status " + std::to_string(r.status);
    if (attempt >= hook_attempts) {
      log::error(
          "hook_given_up",
          {{"job", e.job}, {"event", e.event}, {"url", target}, {"error", why}, {"attempts", attempt}});
      co_return;
    }
    log::warn("hook_failed",
              {{"job", e.job}, {"event", e.event}, {"url", target}, {"error", why}, {"attempt", attempt}});
    asio::steady_timer t(co_await asio::this_coro::executor, pause);
    co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    pause *= 2;
  }
}

asio::awaitable<void> run_hook_command(const job_hook& hook, const hook_event& e) {
  auto ex = co_await asio::this_coro::executor;
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  std::unique_ptr<group_child> child;
  try {
    child = std::make_unique<group_child>(
        ex, hook.command,
        std::vector<std::pair<std::string, std::string>>{
            {"BATON_HOOK_EVENT", e.event}, {"BATON_JOB", e.job}, {"BATON_HOOK_JSON", e.body}},
        std::vector<int>{}, null_fd);
  } catch (const spawn_error& err) {
    if (null_fd >= 0) ::close(null_fd);
    log::error("hook_given_up", {{"job", e.job},
                                 {"event", e.event},
                                 {"command", hook.command.front()},
                                 {"error", err.what()},
                                 {"attempts", 1}});
    co_return;
  }
  if (null_fd >= 0) ::close(null_fd);
  asio::steady_timer limit(ex, hook_timeout);
  auto r = co_await (child->wait_exit() || limit.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (r.index() == 1) {
    child->signal_group(SIGKILL);
    log::error("hook_given_up",
               {{"job", e.job},
                {"event", e.event},
                {"command", hook.command.front()},
                {"error", "still running after " + std::to_string(hook_timeout.count()) + "ms: killed"},
                {"attempts", 1}});
    co_return;
  }
  const int status = std::get<0>(r);
  if (status == 0)
    log::info("hook_delivered",
              {{"job", e.job}, {"event", e.event}, {"command", hook.command.front()}, {"status", 0}});
  else
    log::error("hook_given_up", {{"job", e.job},
                                 {"event", e.event},
                                 {"command", hook.command.front()},
                                 {"error", "exit status " + std::to_string(status)},
                                 {"attempts", 1}});
}

}  // namespace

asio::awaitable<void> deliver_hook(job_hook hook, hook_event e) {
  try {
    if (!hook.command.empty())
      co_await run_hook_command(hook, e);
    else
      co_await deliver_webhook(hook, e);
  } catch (const std::exception& err) {
    log::error("hook_given_up", {{"job", e.job}, {"event", e.event}, {"error", err.what()}});
  }
}

}  // namespace baton::agent
