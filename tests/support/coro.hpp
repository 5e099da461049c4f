// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: runs a coroutine on an io_context to completion, within a bound, rethrowing its exception.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>

namespace baton::test {

inline void run_coro(boost::asio::io_context& ioc, boost::asio::awaitable<void> body,
                     std::chrono::seconds bound = std::chrono::seconds(120)) {
  bool done = false;
  std::exception_ptr failure;
  boost::asio::co_spawn(ioc, std::move(body), [&](std::exception_ptr e) {
    done = true;
    failure = e;
  });
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    ioc.restart();
    ioc.run_for(std::chrono::milliseconds(50));
  }
  if (!done) throw std::runtime_error("coroutine did not finish within the test's bound");
  if (failure) std::rethrow_exception(failure);
}

/// Waits `d` on the calling coroutine's executor (never throws on cancellation: it just returns early).
inline boost::asio::awaitable<void> sleep_for(std::chrono::steady_clock::duration d) {
  boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, d);
  co_await t.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
}

/// The outcome of an operation started with start_background(), once `done`.
template <class T>
struct background {
  std::optional<T> value;
  std::exception_ptr error;
  bool done = false;
};

/// Starts `op` on `ioc` without waiting for it; the test looks at the outcome when it wants to.
template <class T>
std::shared_ptr<background<T>> start_background(boost::asio::io_context& ioc, boost::asio::awaitable<T> op) {
  auto out = std::make_shared<background<T>>();
  boost::asio::co_spawn(ioc, std::move(op), [out](std::exception_ptr e, T v) {
    out->done = true;
    out->error = e;
    if (!e) out->value = std::move(v);
  });
  return out;
}

/// The error code `op` throws (as a boost::system::system_error, baton::exception included), or none.
template <class T>
boost::asio::awaitable<boost::system::error_code> error_of(boost::asio::awaitable<T> op) {
  try {
    co_await std::move(op);
  } catch (const boost::system::system_error& e) {
    co_return e.code();
  }
  co_return boost::system::error_code{};
}

/// The error code of the exception an operation ended with (a boost::system::system_error, baton::exception
/// included), or none when it ended without one.
inline boost::system::error_code error_of(std::exception_ptr e) {
  if (!e) return {};
  try {
    std::rethrow_exception(e);
  } catch (const boost::system::system_error& x) {
    return x.code();
  }
}

}  // namespace baton::test
