// SPDX-License-Identifier: Apache-2.0
#pragma once
// The clock and the timers of a client. Private to the SDK.
//
// A client reads the time and waits on the lease clock (CLOCK_BOOTTIME), or, when it was made with a
// baton::testing::memory_backend that drives its clients' clocks, on that backend's manual clock: then a
// test moves every deadline, renew period, backoff and request timeout of the client by hand, and a 15 s
// lease is tested in milliseconds without a sleep. Either way the code above is the same: a `timer` whose
// waits complete when its expiry passes on the client's clock, are cancelled by cancel(), a new expiry or
// the timer's destruction (operation_aborted), and honour a handler's cancellation slot.

#include "baton/lease_state.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/basic_waitable_timer.hpp>

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>

namespace baton::detail {

/// Time moved by hand (advance()). Held by shared_ptr (its waits' cancellation handlers refer to it weakly).
/// Waits whose expiry it passes complete, through their executors. Not thread-safe: use it on one thread (the
/// tests' io_context thread, or while no other thread runs it).
class manual_clock : public std::enable_shared_from_this<manual_clock> {
 public:
  explicit manual_clock(lease_clock::time_point start) : now_(start) {}
  ~manual_clock();
  manual_clock(const manual_clock&) = delete;
  manual_clock& operator=(const manual_clock&) = delete;

  lease_clock::time_point now() const noexcept { return now_; }
  /// Moves the time forward by `d` and completes every wait that is due.
  void advance(lease_clock::duration d);

  /// Registers a wait of the timer `owner` for `expiry`, to complete through `ex`; it completes at once
  /// (through post) if it is already due. The handler's cancellation slot, if connected, cancels it.
  void add(const void* owner, lease_clock::time_point expiry, const boost::asio::any_io_executor& ex,
           boost::asio::any_completion_handler<void(boost::system::error_code)> h);
  /// Completes the waits of `owner` with operation_aborted; returns how many.
  std::size_t cancel(const void* owner);

 private:
  struct wait {
    std::uint64_t id;
    const void* owner;
    lease_clock::time_point expiry;
    boost::asio::any_io_executor ex;
    boost::asio::any_completion_handler<void(boost::system::error_code)> handler;
  };
  void complete(std::list<wait>::iterator it, boost::system::error_code ec);
  void cancel_id(std::uint64_t id);

  lease_clock::time_point now_;
  std::uint64_t next_id_ = 1;
  std::list<wait> waits_;
};

/// Where a client reads the time, and on which executor its timers run.
struct time_base {
  boost::asio::any_io_executor ex;
  std::shared_ptr<manual_clock> manual;  // null: the lease clock

  lease_clock::time_point now() const { return manual ? manual->now() : lease_clock::now(); }
};

/// A timer on a client's clock, with the interface of Asio's waitable timers that the SDK uses.
class timer {
 public:
  using clock_type = lease_clock;
  using time_point = lease_clock::time_point;
  using duration = lease_clock::duration;

  explicit timer(const time_base& base);
  timer(const time_base& base, time_point at);
  timer(const time_base& base, duration after);
  ~timer();
  timer(const timer&) = delete;
  timer& operator=(const timer&) = delete;

  /// Sets the expiry; pending waits complete with operation_aborted. Returns how many.
  std::size_t expires_at(time_point at);
  std::size_t expires_after(duration d);
  time_point expiry() const;
  /// Pending waits complete with operation_aborted. Returns how many.
  std::size_t cancel();

  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code)) Token>
  auto async_wait(Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [this](auto handler) {
          if (real_)
            real_->async_wait(std::move(handler));
          else
            wait_manual(std::move(handler));
        },
        token);
  }

 private:
  void wait_manual(boost::asio::any_completion_handler<void(boost::system::error_code)> h);

  boost::asio::any_io_executor ex_;
  std::optional<boost::asio::basic_waitable_timer<lease_clock>> real_;  // on the lease clock
  std::shared_ptr<manual_clock> manual_;                                // or on a manual one
  time_point expiry_{};
};

}  // namespace baton::detail
