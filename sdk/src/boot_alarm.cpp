// SPDX-License-Identifier: Apache-2.0
#include "boot_alarm.hpp"

#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/query.hpp>

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace baton::detail {
namespace asio = boost::asio;

using boot_timer = asio::basic_waitable_timer<lease_clock>;

// The alarm of one execution context. Shared with the boot_wakes, which may outlive the context.
struct boot_alarm_state : std::enable_shared_from_this<boot_alarm_state> {
  std::mutex mu;
  int fd = -1;
  bool stopped = false;
  bool failed = false;
  bool waiting = false;
  asio::any_io_executor ex;
  std::optional<asio::posix::stream_descriptor> descriptor;
  // Each instant a timer is set to, with how many boot_wakes keep it.
  std::map<lease_clock::time_point, std::size_t> instants;
  // When the timerfd last fired: the instants up to it have been passed on to the reactor.
  lease_clock::time_point fired_through{};

  void add(const asio::any_io_executor& e, lease_clock::time_point at) {
    std::lock_guard lk(mu);
    if (stopped || failed) return;
    if (!descriptor) {
      fd = ::timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
      if (fd < 0) {
        failed = true;
        return;
      }
      ex = e;
      descriptor.emplace(ex, fd);  // owns the fd from here on
    }
    const bool earliest = instants.upper_bound(at) == instants.upper_bound(fired_through);
    ++instants[at];
    if (earliest || !waiting) arm_locked();
  }

  void remove(lease_clock::time_point at) noexcept {
    std::lock_guard lk(mu);
    auto it = instants.find(at);
    if (it == instants.end()) return;
    if (--it->second == 0) instants.erase(it);
    // The last instant still ahead is gone: stop waiting, so the context can run out of work. (One that is
    // not the last stays armed: passing it costs one spurious look.)
    if (waiting && !stopped && instants.upper_bound(fired_through) == instants.end()) disarm_locked();
  }

  // Arms the timerfd at the earliest instant not yet passed on, and waits for it unless a wait is pending;
  // with none, waits for nothing.
  void arm_locked() {
    auto next = instants.upper_bound(fired_through);
    if (next == instants.end()) {
      if (waiting) disarm_locked();
      return;
    }
    itimerspec spec{};
    const auto ns = next->first.time_since_epoch().count();
    // An instant at or before the epoch would disarm the timer: one nanosecond after it fires at once.
    spec.it_value.tv_sec = ns > 0 ? ns / 1'000'000'000 : 0;
    spec.it_value.tv_nsec = ns > 0 ? ns % 1'000'000'000 : 1;
    if (::timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, nullptr) != 0) return;
    if (waiting) return;
    waiting = true;
    descriptor->async_wait(asio::posix::descriptor_base::wait_read,
                           [self = shared_from_this()](boost::system::error_code ec) { self->on_fired(ec); });
  }

  void disarm_locked() noexcept {
    itimerspec off{};
    ::timerfd_settime(fd, TFD_TIMER_ABSTIME, &off, nullptr);
    boost::system::error_code ignored;
    descriptor->cancel(ignored);  // the wait ends with operation_aborted; on_fired re-arms if needed
  }

  void on_fired(boost::system::error_code ec) {
    std::lock_guard lk(mu);
    waiting = false;
    if (stopped) return;
    if (ec && ec != asio::error::operation_aborted) {
      failed = true;  // the reactor's own wait still ends the timers, only not across a suspend
      return;
    }
    if (!ec) {
      std::uint64_t expirations = 0;
      [[maybe_unused]] auto n = ::read(fd, &expirations, sizeof expirations);  // clears the readiness
      const auto now = lease_clock::now();
      if (instants.upper_bound(fired_through) != instants.upper_bound(now)) {
        // A wait on an expired timer is the earliest of its queue: the reactor re-arms its own timerfd from
        // lease_clock::now(), and every lease-clock timer that is due completes.
        auto kick = std::make_shared<boot_timer>(ex, lease_clock::time_point::min());
        kick->async_wait([kick](boost::system::error_code) {});
      }
      fired_through = std::max(fired_through, now);
    }
    arm_locked();
  }
};

namespace {

// One per execution context; the state it owns outlives it while a boot_wake holds it.
class boot_alarm final : public asio::execution_context::service {
 public:
  static asio::execution_context::id id;

  explicit boot_alarm(asio::execution_context& ctx)
      : asio::execution_context::service(ctx), state_(std::make_shared<boot_alarm_state>()) {}

  ~boot_alarm() override {
    std::lock_guard lk(state_->mu);
    state_->stopped = true;
    if (state_->fd >= 0 && !state_->descriptor) ::close(state_->fd);
    state_->fd = -1;
  }

  const std::shared_ptr<boot_alarm_state>& state() const { return state_; }

 private:
  void shutdown() override {
    // Before the reactor's own shutdown: the descriptor goes while the services it needs still exist.
    std::lock_guard lk(state_->mu);
    state_->stopped = true;
    state_->descriptor.reset();
    state_->fd = -1;
  }

  std::shared_ptr<boot_alarm_state> state_;
};

asio::execution_context::id boot_alarm::id;

}  // namespace

boot_wake::boot_wake(boot_wake&& o) noexcept : state_(std::move(o.state_)), at_(o.at_) {}

boot_wake& boot_wake::operator=(boot_wake&& o) noexcept {
  if (this != &o) {
    reset();
    state_ = std::move(o.state_);
    at_ = o.at_;
  }
  return *this;
}

void boot_wake::reset() noexcept {
  if (auto s = std::move(state_)) s->remove(at_);
}

boot_wake wake_on_boot_clock(const asio::any_io_executor& ex, lease_clock::time_point at) {
  auto& ctx = asio::query(ex, asio::execution::context);
  boot_wake w;
  w.state_ = asio::use_service<boot_alarm>(ctx).state();
  w.at_ = at;
  w.state_->add(ex, at);
  return w;
}

}  // namespace baton::detail
