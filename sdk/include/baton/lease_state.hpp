// SPDX-License-Identifier: Apache-2.0
#pragma once
// A lease's states, and the clock its local deadline is kept on.

#include <chrono>
#include <ctime>
#include <iosfwd>
#include <string_view>

namespace baton {

/// active: renewing, the holder may act. lost: the lease ended without a release (deadline passed without a
/// confirmed renew, or the server refused a renew). released: the holder released it. lost and released are
/// final: a lease never becomes active again.
enum class lease_state { active, lost, released };

/// "active", "lost" or "released"; operator<< writes the same ("lease_state(<number>)" for a value outside
/// the enum, to_string "unknown").
std::string_view to_string(lease_state s) noexcept;
std::ostream& operator<<(std::ostream& os, lease_state s);

/// The clock of a lease's local deadline: Linux's CLOCK_BOOTTIME, a monotonic clock that, unlike
/// std::chrono::steady_clock (CLOCK_MONOTONIC), keeps counting while the host is suspended. The lock
/// server's clock runs on during a laptop's sleep or a VM's pause, so after a resume the client must see
/// that its lease's time has passed, not believe it still holds a lease that expired meanwhile.
struct lease_clock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<lease_clock>;
  static constexpr bool is_steady = true;

  static time_point now() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_BOOTTIME, &ts);
    return time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
  }
};

}  // namespace baton
