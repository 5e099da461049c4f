// SPDX-License-Identifier: Apache-2.0
#pragma once
// systemd's watchdog for batond's worker threads.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <vector>

namespace baton::server {

/// Pings systemd (WATCHDOG=1) every half of `timeout` while every io_context of `workers` keeps running the
/// probes posted to it, until `draining` is set. Run it on workers[0].
boost::asio::awaitable<void> watchdog_loop(std::vector<boost::asio::io_context*> workers,
                                           std::chrono::microseconds timeout,
                                           const std::atomic<bool>& draining);

}  // namespace baton::server
