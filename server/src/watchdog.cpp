// SPDX-License-Identifier: Apache-2.0
#include "watchdog.hpp"

#include "baton/common/log.hpp"
#include "baton/common/sd_notify.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <memory>

namespace baton::server {
namespace asio = boost::asio;

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
}  // namespace

// systemd's watchdog (WatchdogSec): WATCHDOG=1 every half of `timeout`, and only when every worker ran the
// probe posted to it at the previous ping. A worker whose loop is wedged (a handler that never returns, a
// deadlock) then stops the pings, and systemd restarts batond within `timeout` instead of leaving it up
// and unable to answer. Runs on worker 0, so a wedged worker 0 stops its own timer too.
asio::awaitable<void> watchdog_loop(std::vector<asio::io_context*> workers, std::chrono::microseconds timeout,
                                    const std::atomic<bool>& draining) {
  const auto half = timeout / 2;
  const auto half_ms = std::chrono::duration_cast<std::chrono::milliseconds>(half).count();
  auto answered = std::make_shared<std::vector<std::atomic<bool>>>(workers.size());
  for (auto& a : *answered)
    a.store(true);
  asio::steady_timer t(*workers[0]);
  while (!draining.load()) {
    if (std::all_of(answered->begin(), answered->end(), [](const auto& a) { return a.load(); })) {
      sd_notify::notify("WATCHDOG=1");
    } else {
      log::warn("watchdog_ping_withheld",
                {{"reason", "a worker thread did not run the probe posted to it"}, {"within_ms", half_ms}});
    }
    for (std::size_t i = 0; i < workers.size(); ++i) {
      (*answered)[i].store(false);
      asio::post(*workers[i], [answered, i] { (*answered)[i].store(true); });
    }
    t.expires_after(half);
    co_await t.async_wait(use_tuple);
  }
}

}  // namespace baton::server
