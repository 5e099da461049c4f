// SPDX-License-Identifier: Apache-2.0
#pragma once
// The Prometheus text exposition format (version 0.0.4), written one family at a time: `# HELP` and `# TYPE`
// once, then its samples, with label values escaped as the format requires. The daemons' /metrics pages are
// written with it.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace baton {

class prometheus_text {
 public:
  using labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;

  explicit prometheus_text(std::string& out) : out_(out) {}

  /// Starts a family: `type` is counter, gauge, summary or histogram.
  void family(std::string_view name, std::string_view help, std::string_view type);
  /// One sample of the family last started (`name` may carry a suffix: `_sum`, `_count`).
  void sample(std::string_view name, labels l, std::uint64_t value);
  void sample(std::string_view name, labels l, std::int64_t value);
  void sample(std::string_view name, labels l, int value) {
    sample(name, l, static_cast<std::int64_t>(value));
  }
  /// Written as the shortest text that reads back as `value`.
  void sample(std::string_view name, labels l, double value);

 private:
  void begin(std::string_view name, labels l);
  std::string& out_;
};

/// `value` with `\`, `"` and newlines escaped, as a label value must be.
std::string escape_label_value(std::string_view value);

}  // namespace baton
