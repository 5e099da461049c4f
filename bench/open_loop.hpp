// SPDX-License-Identifier: Apache-2.0
#pragma once
// The fixed-rate (open-loop) schedule of baton-loadgen --rate, as arithmetic on time points.
//
// A closed loop sends the next request only when the previous answer has arrived, so a server that stalls
// for 100 ms simply receives fewer requests during the stall, and the stall shows up as one slow sample
// instead of the hundreds of requests a real client population would have seen waiting ("coordinated
// omission"). Here requests have intended send times fixed in advance: R per second over all connections,
// connection i of C taking requests i, i + C, i + 2C, ... of one evenly spaced global sequence. A
// connection still has one request in flight at a time; when an answer comes back after the next intended
// time, the next request goes out at once, and its latency is counted from its intended time, not from
// when it could actually be sent. A stall therefore shows in p99/p99.9 as every request it delayed.
//
// No clock is read here: callers pass `now`, so the unit tests drive it with made-up time points.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace baton::bench {

class open_loop_schedule {
 public:
  using clock = std::chrono::steady_clock;

  /// Connection `index` of `conns`, sending its share of `rate_per_s` requests per second (over all
  /// connections) from `start` on. A request sent more than `late_after` after its intended time counts as
  /// started late.
  open_loop_schedule(clock::time_point start, double rate_per_s, std::size_t conns, std::size_t index,
                     clock::duration late_after = std::chrono::milliseconds(1))
      : start_(start), rate_(rate_per_s), conns_(conns), index_(index), late_after_(late_after) {}

  /// Intended send time of this connection's k-th request (k from 0). Computed from `start` each time, so
  /// rounding does not accumulate over a long phase.
  clock::time_point intended(std::uint64_t k) const {
    const double slot = static_cast<double>(index_) + static_cast<double>(k) * static_cast<double>(conns_);
    return start_ + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(slot / rate_));
  }

  /// Intended time of the next request this connection has not sent yet.
  clock::time_point next_intended() const { return intended(sent_); }

  /// When the next request should go out, the connection being free at `now`: its intended time, or `now`
  /// if that has passed (an overdue request is never skipped; it is sent at once).
  clock::time_point send_at(clock::time_point now) const { return std::max(now, next_intended()); }

  struct sent_request {
    clock::time_point intended;     // latency is measured from here
    clock::duration start_delay{};  // how long after its intended time it actually went out
    bool late = false;              // start_delay > late_after
  };

  /// The next request goes out at `now`.
  sent_request on_send(clock::time_point now) {
    sent_request r;
    r.intended = next_intended();
    r.start_delay = std::max(clock::duration::zero(), now - r.intended);
    r.late = r.start_delay > late_after_;
    ++sent_;
    return r;
  }

  std::uint64_t sent() const { return sent_; }

  /// Requests of this connection whose intended time is before `t`: how many it should have sent by then.
  std::uint64_t due_before(clock::time_point t) const {
    if (t <= intended(0)) return 0;
    const double seconds = std::chrono::duration<double>(t - start_).count();
    // slots index + k*conns < seconds*rate; then correct for floating-point rounding at the boundary.
    const double slots = seconds * rate_ - static_cast<double>(index_);
    auto k = static_cast<std::uint64_t>(std::max(0.0, std::ceil(slots / static_cast<double>(conns_))));
    while (k > 0 && intended(k - 1) >= t)
      --k;
    while (intended(k) < t)
      ++k;
    return k;
  }

 private:
  clock::time_point start_;
  double rate_;
  std::size_t conns_;
  std::size_t index_;
  clock::duration late_after_;
  std::uint64_t sent_ = 0;
};

/// Latency of a request that completed at `done`, counted from its intended send time.
inline std::uint64_t latency_micros(std::chrono::steady_clock::time_point intended,
                                    std::chrono::steady_clock::time_point done) {
  const auto d = std::chrono::duration_cast<std::chrono::microseconds>(done - intended).count();
  return d > 0 ? static_cast<std::uint64_t>(d) : 0;
}

}  // namespace baton::bench
