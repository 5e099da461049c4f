// SPDX-License-Identifier: Apache-2.0
#pragma once
// A long-poll waiter's timer (lock_service::wait_timer) on the simulation's virtual time: it fires when
// batond's clock reaches its expiry, not while batond is paused, and cancel() completes the wait at once, as
// a steady_timer's cancel does. A crashed batond's waiters are never resumed: take_pending() hands their
// coroutines over to be destroyed.

#include "lock_service.hpp"
#include "scheduler.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <functional>
#include <set>

namespace baton::sim {

class sim_wait_timer final : public server::lock_service::wait_timer {
 public:
  using to_true_time = std::function<nanos(server::time_point)>;

  /// `live` lists the timers in existence, for a crash; `paused_until` is when a paused batond runs again.
  sim_wait_timer(boost::asio::any_io_executor ex, scheduler& s, to_true_time true_time,
                 const nanos& paused_until, std::set<sim_wait_timer*>& live)
      : ex_(std::move(ex)),
        s_(s),
        true_time_(std::move(true_time)),
        paused_until_(paused_until),
        live_(live),
        alive_(std::make_shared<bool>(true)) {
    live_.insert(this);
  }
  ~sim_wait_timer() override {
    *alive_ = false;
    live_.erase(this);
  }

  boost::asio::any_io_executor get_executor() override { return ex_; }
  void expires_at(server::time_point at) override { at_ = at; }

  // The simulation never cancels a long-poll from outside (its clients do not close connections), so the
  // caller's cancellation slot is not watched.
  boost::asio::awaitable<void> wait() override {
    co_await boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&, void()>(
        [this](auto handler) {
          pending_ = task([h = std::move(handler)]() mutable { std::move(h)(); });
          fire_at(true_time_(at_), ++gen_);
        },
        boost::asio::use_awaitable);
  }

  void cancel() override {
    ++gen_;
    complete();
  }

  /// The waiting coroutine's continuation, taken out (empty when none waits).
  task take_pending() { return std::move(pending_); }

 private:
  void fire_at(nanos when, std::uint64_t gen) {
    s_.at(when, [this, alive = alive_, gen] {
      if (!*alive || gen != gen_) return;
      if (s_.now() < paused_until_) return fire_at(paused_until_, gen);
      complete();
    });
  }

  void complete() {
    if (!pending_) return;
    task h = std::move(pending_);
    pending_ = task();
    ex_.execute(std::move(h));
  }

  boost::asio::any_io_executor ex_;
  scheduler& s_;
  to_true_time true_time_;
  const nanos& paused_until_;
  std::set<sim_wait_timer*>& live_;
  std::shared_ptr<bool> alive_;
  server::time_point at_{};
  std::uint64_t gen_ = 0;
  task pending_;
};

}  // namespace baton::sim
