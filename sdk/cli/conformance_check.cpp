// SPDX-License-Identifier: Apache-2.0
// What both ways of running `baton conformance` share (conformance_check.hpp): the run's key prefix, the
// tally of bounded wake-ups, and the restart command.

#include "conformance_check.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

namespace baton::cli {

using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string run_prefix() {
  std::random_device rd;
  std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return std::string("conformance/") + buf;
}

void on_time_tally::add(const wake_try& t) {
  took_ += (took_.empty() ? "answered after " : ", ") + (t.late ? std::string("late") : ms(t.took));
  if (t.late) {
    ++late_;
    why_ = *t.late;
  } else {
    ++on_time_;
  }
}

std::string on_time_tally::result() const {
  if (late_ == 2)
    throw check_failed(why_ + " (late in 2 of " + std::to_string(on_time_ + late_) + " tries; the bound is " +
                       ms(wake_bound) + ")");
  return took_;
}

std::string twice_on_time(const std::function<wake_try()>& attempt) {
  on_time_tally tally;
  while (!tally.done())
    tally.add(attempt());
  return tally.result();
}

std::optional<std::string> run_restart_command(const std::string& command) {
  const pid_t pid = ::fork();
  if (pid < 0) return "--restart-command: fork: " + std::string(std::strerror(errno));
  if (pid == 0) {  // only async-signal-safe calls until exec
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(2, 1);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto until = steady::now() + restart_command_bound;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return std::nullopt;
      return "--restart-command " + (WIFEXITED(status)
                                         ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                         : "was ended by signal " + std::to_string(WTERMSIG(status)));
    }
    if (r < 0 && errno != EINTR) return "--restart-command: waitpid: " + std::string(std::strerror(errno));
    if (steady::now() >= until) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return "--restart-command did not finish within " + std::to_string(restart_command_bound / 1s) +
             " s (it must return once the server is restarting, e.g. start it in the background)";
    }
    std::this_thread::sleep_for(20ms);
  }
}

}  // namespace baton::cli
