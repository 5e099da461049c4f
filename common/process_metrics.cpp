// SPDX-License-Identifier: Apache-2.0
#include "baton/common/process_metrics.hpp"

#include "baton/common/prometheus_text.hpp"

#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#ifndef BATON_BUILD_VERSION
#define BATON_BUILD_VERSION "unknown"
#endif
#ifndef BATON_BUILD_COMMIT
#define BATON_BUILD_COMMIT "unknown"
#endif

namespace baton {
namespace {

// The fields of a stat line after the command name: [0] is field 3 (state), so field n is at n - 3.
std::optional<std::vector<std::string_view>> fields_after_comm(std::string_view stat) {
  const auto close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::vector<std::string_view> out;
  std::size_t at = close + 1;
  while (at < stat.size()) {
    while (at < stat.size() && (stat[at] == ' ' || stat[at] == '\n'))
      ++at;
    const auto end = stat.find_first_of(" \n", at);
    const auto stop = end == std::string_view::npos ? stat.size() : end;
    if (stop > at) out.push_back(stat.substr(at, stop - at));
    at = stop;
  }
  return out;
}

std::optional<std::uint64_t> number(std::string_view text) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> field(std::string_view stat, std::size_t n) {
  auto fields = fields_after_comm(stat);
  if (!fields || n < 3 || fields->size() <= n - 3) return std::nullopt;
  return number((*fields)[n - 3]);
}

std::string read_whole(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  return text.str();
}

// The shortest text that reads back as `v` (1796159166.6, not 1796159166.5999999).
std::string format_double(double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc{} ? std::string(buf, end) : std::string("NaN");
}

}  // namespace

std::optional<double> cpu_seconds_from_stat(std::string_view stat, long ticks_per_second) {
  const auto utime = field(stat, 14), stime = field(stat, 15);
  if (!utime || !stime || ticks_per_second <= 0) return std::nullopt;
  return static_cast<double>(*utime + *stime) / static_cast<double>(ticks_per_second);
}

std::optional<double> start_time_from_stat(std::string_view stat, long ticks_per_second,
                                           std::uint64_t boot_time_seconds) {
  const auto ticks = field(stat, 22);
  if (!ticks || ticks_per_second <= 0) return std::nullopt;
  return static_cast<double>(boot_time_seconds) +
         static_cast<double>(*ticks) / static_cast<double>(ticks_per_second);
}

std::optional<std::uint64_t> boot_time_from_proc_stat(std::string_view proc_stat) {
  std::size_t at = 0;
  while (at < proc_stat.size()) {
    const auto end = proc_stat.find('\n', at);
    const auto line = proc_stat.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    if (line.rfind("btime ", 0) == 0) return number(line.substr(6));
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> resident_bytes_from_statm(std::string_view statm, long page_size) {
  const auto first = statm.find(' ');
  if (first == std::string_view::npos || page_size <= 0) return std::nullopt;
  const auto rest = statm.substr(first + 1);
  const auto pages = number(rest.substr(0, rest.find_first_of(" \n")));
  if (!pages) return std::nullopt;
  return *pages * static_cast<std::uint64_t>(page_size);
}

std::string render_process_metrics(const process_sample& s) {
  std::string out;
  auto series = [&](const char* name, const char* help, const char* type, const std::string& value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
           value + "\n";
  };
  if (s.cpu_seconds)
    series("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter",
           format_double(*s.cpu_seconds));
  if (s.resident_bytes)
    series("process_resident_memory_bytes", "Resident memory size in bytes.", "gauge",
           std::to_string(*s.resident_bytes));
  if (s.open_fds)
    series("process_open_fds", "Number of open file descriptors.", "gauge", std::to_string(*s.open_fds));
  if (s.start_time_seconds)
    series("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", "gauge",
           format_double(*s.start_time_seconds));
  return out;
}

std::string render_build_info(std::string_view version, std::string_view commit) {
  return "# HELP baton_build_info The version and commit this program was built from (always 1).\n"
         "# TYPE baton_build_info gauge\n"
         "baton_build_info{version=\"" +
         escape_label_value(version) + "\",commit=\"" + escape_label_value(commit) + "\"} 1\n";
}

std::string_view build_version() {
  return BATON_BUILD_VERSION;
}

std::string_view build_commit() {
  return BATON_BUILD_COMMIT;
}

process_sample read_process_sample() {
  process_sample s;
  const long ticks = ::sysconf(_SC_CLK_TCK);
  const auto stat = read_whole("/proc/self/stat");
  s.cpu_seconds = cpu_seconds_from_stat(stat, ticks);
  if (auto boot = boot_time_from_proc_stat(read_whole("/proc/stat")))
    s.start_time_seconds = start_time_from_stat(stat, ticks, *boot);
  s.resident_bytes = resident_bytes_from_statm(read_whole("/proc/self/statm"), ::sysconf(_SC_PAGESIZE));
  std::error_code ec;
  std::uint64_t fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec))
    ++fds;
  // The directory's own descriptor, open while it is listed, is not one of the process's.
  if (!ec && fds > 0) s.open_fds = fds - 1;
  return s;
}

std::string process_metrics_text() {
  return render_build_info(build_version(), build_commit()) + render_process_metrics(read_process_sample());
}

}  // namespace baton
