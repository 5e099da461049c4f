// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper for Boost.Test programs: batond's lock service and journal over the simulated disk
// (sim_storage.hpp), driven by hand on a fixed clock. The journal writes only when flush() is called, so
// "not answered yet" is exact.

#include "journal.hpp"
#include "lock_service.hpp"
#include "sim_storage.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace baton::sim {

inline server::time_point fixed_now() {
  using namespace std::chrono_literals;
  return server::time_point{} + 1000s;
}

// One batond over the simulated disk, whose journal writes only when flush() is called.
struct batond {
  boost::asio::io_context ioc;  // first: outlives the coroutines the journal's waiters hold
  server::server_metrics metrics;
  server::journal log;
  server::lock_service service{log, metrics, &fixed_now};

  explicit batond(sim_storage& fs) : log(server::journal_options{fs.path(), 64ull << 20, &fs}, &metrics) {
    fs.start_begins();
    log.open(service.table(), fixed_now());
    fs.start_ends();
  }

  // Starts `op`; its answer, once it has one.
  template <class T>
  std::shared_ptr<std::optional<T>> start(boost::asio::awaitable<T> op) {
    auto answer = std::make_shared<std::optional<T>>();
    boost::asio::co_spawn(ioc, std::move(op), [answer](std::exception_ptr e, T v) {
      if (!e) *answer = std::move(v);
    });
    ioc.restart();
    ioc.poll();
    return answer;
  }
  void flush() {
    BOOST_REQUIRE(log.flush());
    ioc.restart();
    ioc.poll();
  }
  // Acquires `key` for `owner` (answered once flushed); returns its token.
  std::uint64_t acquired(std::string_view key, std::string_view owner, std::string_view value = {}) {
    using namespace std::chrono_literals;
    auto a = start(service.acquire(key, owner, 60'000ms, {}, std::nullopt, value));
    BOOST_TEST(!a->has_value());  // not durable yet
    flush();
    BOOST_REQUIRE(a->has_value());
    return std::get<server::acquire_granted>(**a).token;
  }
};

}  // namespace baton::sim
