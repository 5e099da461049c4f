// SPDX-License-Identifier: Apache-2.0
#pragma once
// A simulated process's own clock: it runs at `rate` seconds per second of the scheduler's true time, from
// its own origin. batond decides expiry on its clock and each client's lease_fsm on the client's, so the
// distance between the two rates is what the SDK's safety margin must cover (docs/design.md, "The local
// deadline is counted from the send time").

#include "scheduler.hpp"

#include <cmath>

namespace baton::sim {

class sim_clock {
 public:
  sim_clock() = default;
  sim_clock(double rate, nanos origin) : rate_(rate), origin_(origin) {}

  /// A rate drawn uniformly from [1 - drift, 1 + drift] and an origin up to 10 s away from the others'.
  static sim_clock drawn(rng& r, double drift) {
    const double u = static_cast<double>(r.next() >> 11) * 0x1.0p-53;
    return sim_clock(1 + drift * (2 * u - 1), r.between(nanos(0), std::chrono::seconds(10)));
  }

  double rate() const { return rate_; }

  /// This clock's reading at true time `t`; never decreasing in `t`.
  nanos local(nanos t) const { return origin_ + nanos(std::llround(static_cast<double>(t.count()) * rate_)); }

  /// The first true time at which this clock reads `l` or later (its timers fire then).
  nanos true_at(nanos l) const {
    if (l <= local(nanos(0))) return nanos(0);
    auto t = nanos(std::llround(static_cast<double>((l - origin_).count()) / rate_));
    while (local(t) < l)
      ++t;
    while (t > nanos(0) && local(t - nanos(1)) >= l)
      --t;
    return t;
  }

 private:
  double rate_ = 1;
  nanos origin_{0};
};

}  // namespace baton::sim
