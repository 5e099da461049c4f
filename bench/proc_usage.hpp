// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a process and the machine have spent, from /proc and getrusage, for the benchmarks' CPU figures.

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>

namespace baton::bench {

// CPU time (user + system) of a process, from /proc/PID/stat, in microseconds.
inline std::optional<double> process_cpu_micros(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto paren = text.rfind(')');  // the command name may itself contain spaces and parentheses
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(paren + 1));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  // Fields after the name start at number 3 (state); utime and stime are numbers 14 and 15.
  for (int number = 3; number <= 15 && (fields >> field); ++number) {
    if (number == 14) utime = std::stoull(field);
    if (number == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) * 1e6 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Busy CPU time of the whole machine (every column of /proc/stat's "cpu" line but idle and iowait), in
// microseconds. Compared with the server's and our own CPU it shows how much else ran during a phase:
// other engineers' builds on a shared machine, but also kernel work charged to no process (softirqs,
// block I/O threads).
inline std::optional<double> machine_busy_micros() {
  std::ifstream in("/proc/stat");
  std::string label;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> label >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || label != "cpu")
    return std::nullopt;
  return static_cast<double>(user + nice + system + irq + softirq + steal) * 1e6 /
         static_cast<double>(::sysconf(_SC_CLK_TCK));
}

inline double self_cpu_micros() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto us = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec);
  };
  return us(u.ru_utime) + us(u.ru_stime);
}

}  // namespace baton::bench
