// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: checks the series every Baton daemon's /metrics ends with (common/process_metrics.cpp) are
// there and plausible for a process started moments ago. Include after <boost/test/unit_test.hpp>.

#include <chrono>
#include <optional>
#include <sstream>
#include <string>

namespace baton::test {

/// The value of the line `series VALUE` in a Prometheus text, or nullopt.
inline std::optional<double> metric_value(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ')
      return std::stod(line.substr(series.size() + 1));
  return std::nullopt;
}

/// baton_build_info names `version` and some commit, with value 1; the process_* series are those of a live
/// process that started within the last hour.
inline void check_process_metrics(const std::string& text, const std::string& version) {
  const std::string build = "baton_build_info{version=\"" + version + "\",commit=\"";
  const auto at = text.find("\n" + build);
  BOOST_TEST_REQUIRE(at != std::string::npos, "no " << build << "...} line in:\n" << text);
  const auto line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  const auto commit = line.substr(build.size(), line.find('"', build.size()) - build.size());
  BOOST_TEST(!commit.empty(), line);
  BOOST_TEST(line.ends_with("\"} 1"), line);

  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto rss = metric_value(text, "process_resident_memory_bytes");
  const auto fds = metric_value(text, "process_open_fds");
  const auto cpu = metric_value(text, "process_cpu_seconds_total");
  const auto start = metric_value(text, "process_start_time_seconds");
  BOOST_TEST_REQUIRE((rss && fds && cpu && start), text);
  BOOST_TEST(*rss > 1 << 20);  // a running C++ program holds more than a MiB
  BOOST_TEST(*fds >= 3);       // at least its listening socket and the standard streams
  BOOST_TEST(*fds < 10'000);
  BOOST_TEST(*cpu >= 0);
  BOOST_TEST(*cpu < 3600);
  // /proc/stat's boot time is whole seconds: allow a few either side of now.
  BOOST_TEST(*start > now - 3600);
  BOOST_TEST(*start < now + 5);
}

}  // namespace baton::test
