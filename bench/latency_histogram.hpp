// SPDX-License-Identifier: Apache-2.0
#pragma once
// Latency histogram of the load generator: log-linear buckets at microsecond resolution.
//
// Values below 64 µs get one bucket each; above that every power of two is split into 32 equal buckets,
// so a reported percentile is within ~1.6% of the true value while the whole table stays a few kilobytes
// (the same idea as HdrHistogram). Recording is an index computation and an increment: cheap enough to do
// for every request on the load generator's single thread. Not thread-safe: one per connection, merged
// at the end of a phase.

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

namespace baton::bench {

class latency_histogram {
 public:
  void record(std::uint64_t micros) {
    ++buckets_[index_of(micros)];
    ++count_;
    max_ = std::max(max_, micros);
  }

  void merge(const latency_histogram& other) {
    for (std::size_t i = 0; i < buckets_.size(); ++i)
      buckets_[i] += other.buckets_[i];
    count_ += other.count_;
    max_ = std::max(max_, other.max_);
  }

  std::uint64_t count() const { return count_; }
  std::uint64_t max_micros() const { return max_; }

  /// The value at quantile q (0 < q <= 1) in microseconds: the midpoint of the bucket holding the
  /// ceil(q * count)-th smallest sample, capped at the largest sample seen. 0 when empty.
  double quantile_micros(double q) const {
    if (count_ == 0) return 0;
    auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_)));
    rank = std::clamp<std::uint64_t>(rank, 1, count_);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < buckets_.size(); ++i) {
      seen += buckets_[i];
      if (seen >= rank) return std::min(midpoint_of(i), static_cast<double>(max_));
    }
    return static_cast<double>(max_);
  }

  static constexpr std::size_t index_of(std::uint64_t v) {
    if (v < linear_buckets) return static_cast<std::size_t>(v);
    const int msb = std::bit_width(v) - 1;  // >= 6 here
    const int shift = msb - sub_bits;
    const std::size_t sub = static_cast<std::size_t>(v >> shift) - sub_buckets;  // 0..31
    return std::min(linear_buckets + static_cast<std::size_t>(msb - 6) * sub_buckets + sub, bucket_count - 1);
  }

  static constexpr double midpoint_of(std::size_t i) {
    if (i < linear_buckets) return static_cast<double>(i);
    const std::size_t octave = (i - linear_buckets) / sub_buckets;
    const std::uint64_t sub = (i - linear_buckets) % sub_buckets + sub_buckets;
    const int shift = static_cast<int>(octave) + 1;
    const std::uint64_t low = sub << shift;
    const std::uint64_t width = std::uint64_t{1} << shift;
    return static_cast<double>(low) + static_cast<double>(width - 1) / 2;
  }

 private:
  static constexpr int sub_bits = 5;
  static constexpr std::size_t sub_buckets = std::size_t{1} << sub_bits;  // 32
  static constexpr std::size_t linear_buckets = 2 * sub_buckets;          // 0..63 µs exact
  static constexpr std::size_t octaves = 36;                              // up to ~2^42 µs (48 days)
  static constexpr std::size_t bucket_count = linear_buckets + octaves * sub_buckets;

  std::array<std::uint64_t, bucket_count> buckets_{};
  std::uint64_t count_ = 0;
  std::uint64_t max_ = 0;
};

}  // namespace baton::bench
