// SPDX-License-Identifier: Apache-2.0
#pragma once
// The simulation's one thread of time: a virtual clock, a queue of events ordered by (time, arrival), a
// seeded random source, and an Asio executor that queues onto it, so batond's coroutines (lock_service)
// run here without an io_context, a real clock or a second thread. Nothing here reads the real time; the
// same seed therefore replays the same run, step for step.

#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <utility>
#include <vector>

namespace baton::sim {

using nanos = std::chrono::nanoseconds;
using std::chrono::milliseconds;

/// A move-only callable (Asio's handlers are move-only; std::function needs a copy).
class task {
 public:
  task() = default;
  template <class F>
  task(F f) : p_(std::make_unique<impl<F>>(std::move(f))) {}
  void operator()() { p_->run(); }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  struct base {
    virtual ~base() = default;
    virtual void run() = 0;
  };
  template <class F>
  struct impl : base {
    F f;
    explicit impl(F g) : f(std::move(g)) {}
    void run() override { std::move(f)(); }
  };
  std::unique_ptr<base> p_;
};

/// splitmix64, with the few draws the simulation needs. Its own code so a seed means the same run with any
/// standard library (std::uniform_*_distribution is not specified bit for bit).
class rng {
 public:
  explicit rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n); 0 when n is 0.
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }
  /// True with probability `p`.
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
  /// Uniform in [lo, hi].
  nanos between(nanos lo, nanos hi) {
    return lo + nanos(static_cast<nanos::rep>(below(static_cast<std::uint64_t>((hi - lo).count()) + 1)));
  }

 private:
  std::uint64_t state_;
};

class scheduler {
 public:
  nanos now() const { return now_; }

  /// Runs `t` at `when` (not before now), after everything already queued for that instant.
  void at(nanos when, task t) { queue_.push(entry{std::max(when, now_), seq_++, std::move(t)}); }
  void after(nanos delay, task t) { at(now_ + delay, std::move(t)); }

  /// Runs the next event; false when none is left or the next one lies past `until`.
  bool step(nanos until) {
    if (queue_.empty() || queue_.top().when > until) return false;
    // priority_queue::top() is const; the entry is moved out before pop (its order fields stay intact).
    auto& top = const_cast<entry&>(queue_.top());
    task t = std::move(top.t);
    now_ = top.when;
    queue_.pop();
    t();
    return true;
  }

 private:
  struct entry {
    nanos when;
    std::uint64_t seq;
    task t;
    bool operator>(const entry& o) const { return when != o.when ? when > o.when : seq > o.seq; }
  };
  nanos now_{0};
  std::uint64_t seq_ = 0;
  std::priority_queue<entry, std::vector<entry>, std::greater<>> queue_;
};

/// What a simulated process's coroutines run on. Work posted to it is queued in order and run by scheduler
/// events; when the process crashes, kill() destroys what is queued (and what that destruction queues) and
/// nothing of it ever runs, as if the process had vanished.
class process_context : public boost::asio::execution_context {
 public:
  explicit process_context(scheduler& s) : s_(s), alive_(std::make_shared<bool>(true)) {}
  ~process_context() { kill(); }

  void post(task t) {
    ready_.push_back(std::move(t));
    if (!*alive_) return;
    s_.after(nanos(0), [this, alive = alive_] {
      if (!*alive) return;
      task next = std::move(ready_.front());
      ready_.pop_front();
      next();
      if (after_each_) after_each_();
    });
  }

  /// Called after each task run: the owner looks at what the step changed (a record to flush).
  void after_each(std::function<void()> f) { after_each_ = std::move(f); }

  void kill() {
    *alive_ = false;
    while (!ready_.empty()) {
      task t = std::move(ready_.front());
      ready_.pop_front();
    }
  }

 private:
  scheduler& s_;
  std::shared_ptr<bool> alive_;
  std::deque<task> ready_;
  std::function<void()> after_each_;
};

/// An Asio executor (never blocking) over a process_context.
class executor {
 public:
  explicit executor(process_context& c) : c_(&c) {}

  boost::asio::execution_context& query(boost::asio::execution::context_t) const noexcept { return *c_; }
  static constexpr boost::asio::execution::blocking_t query(boost::asio::execution::blocking_t) noexcept {
    return boost::asio::execution::blocking.never;
  }
  executor require(boost::asio::execution::blocking_t::never_t) const noexcept { return *this; }

  template <class F>
  void execute(F&& f) const {
    c_->post(task(std::forward<F>(f)));
  }

  friend bool operator==(const executor& a, const executor& b) noexcept { return a.c_ == b.c_; }
  friend bool operator!=(const executor& a, const executor& b) noexcept { return a.c_ != b.c_; }

 private:
  process_context* c_;
};

}  // namespace baton::sim
