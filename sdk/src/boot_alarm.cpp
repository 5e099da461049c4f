// SPDX-License-Identifier: Apache-2.0
#include "boot_alarm.hpp"

#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/query.hpp>

#include <sys/timerfd.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <vector>

namespace baton::detail {
namespace asio = boost::asio;

namespace {

using boot_timer = asio::basic_waitable_timer<lease_clock>;

// One per execution context. The instants are kept in a min-heap; one that a timer no longer waits for
// (re-armed, cancelled) costs at most one spurious look of the reactor when it passes.
class boot_alarm final : public asio::execution_context::service {
 public:
  static asio::execution_context::id id;

  explicit boot_alarm(asio::execution_context& ctx) : asio::execution_context::service(ctx) {}

  ~boot_alarm() override {
    if (fd_ >= 0 && !descriptor_) ::close(fd_);
  }

  void wake_at(const asio::any_io_executor& ex, lease_clock::time_point at) {
    std::lock_guard lk(mu_);
    if (stopped_ || failed_) return;
    if (!descriptor_) {
      fd_ = ::timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
      if (fd_ < 0) {
        failed_ = true;
        return;
      }
      ex_ = ex;
      descriptor_.emplace(ex_, fd_);  // owns the fd from here on
    }
    if (at == last_) return;  // renewals on one wake grid step share their instants
    last_ = at;
    instants_.push(at);
    if (instants_.top() == at) arm_locked();
  }

 private:
  void shutdown() override {
    // Before the reactor's own shutdown: the descriptor goes while the services it needs still exist.
    std::lock_guard lk(mu_);
    stopped_ = true;
    descriptor_.reset();
    fd_ = -1;
  }

  // Arms the timerfd at the earliest instant, and waits for it unless a wait is already pending.
  void arm_locked() {
    itimerspec spec{};
    const auto ns = instants_.top().time_since_epoch().count();
    // An instant at or before the epoch would disarm the timer: one nanosecond after it fires at once.
    spec.it_value.tv_sec = ns > 0 ? ns / 1'000'000'000 : 0;
    spec.it_value.tv_nsec = ns > 0 ? ns % 1'000'000'000 : 1;
    if (::timerfd_settime(fd_, TFD_TIMER_ABSTIME, &spec, nullptr) != 0) return;
    if (waiting_) return;
    waiting_ = true;
    descriptor_->async_wait(asio::posix::descriptor_base::wait_read,
                            [this](boost::system::error_code ec) { on_fired(ec); });
  }

  void on_fired(boost::system::error_code ec) {
    std::lock_guard lk(mu_);
    waiting_ = false;
    if (ec || stopped_) return;
    std::uint64_t expirations = 0;
    [[maybe_unused]] auto n = ::read(fd_, &expirations, sizeof expirations);  // clears the readiness
    const auto now = lease_clock::now();
    bool passed = false;
    while (!instants_.empty() && instants_.top() <= now) {
      instants_.pop();
      passed = true;
    }
    if (passed) {
      // A wait on an expired timer is the earliest of its queue: the reactor re-arms its own timerfd from
      // lease_clock::now(), and every lease-clock timer that is due completes.
      auto kick = std::make_shared<boot_timer>(ex_, lease_clock::time_point::min());
      kick->async_wait([kick](boost::system::error_code) {});
    }
    if (!instants_.empty()) arm_locked();
  }

  std::mutex mu_;
  int fd_ = -1;
  bool stopped_ = false;
  bool failed_ = false;
  bool waiting_ = false;
  asio::any_io_executor ex_;
  std::optional<asio::posix::stream_descriptor> descriptor_;
  std::priority_queue<lease_clock::time_point, std::vector<lease_clock::time_point>,
                      std::greater<lease_clock::time_point>>
      instants_;
  lease_clock::time_point last_{};
};

asio::execution_context::id boot_alarm::id;

}  // namespace

void wake_on_boot_clock(const asio::any_io_executor& ex, lease_clock::time_point at) {
  auto& ctx = asio::query(ex, asio::execution::context);
  asio::use_service<boot_alarm>(ctx).wake_at(ex, at);
}

}  // namespace baton::detail
