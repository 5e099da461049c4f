// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: a child process with its stdout captured, always killed when the handle goes away.

#include <chrono>
#include <string>
#include <vector>

namespace baton::test {

class child_process {
 public:
  /// Starts argv[0] with the given arguments; stdout is a pipe readable through read_line(), stderr is
  /// inherited (or sent to `stderr_path` when given). The environment is this process's, with each
  /// `NAME=value` of `extra_env` added or replacing the variable of that name. Throws on failure.
  explicit child_process(std::vector<std::string> argv, std::string stderr_path = {},
                         std::vector<std::string> extra_env = {});
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// Reads one line of stdout, waiting at most `timeout`. Throws on timeout or end of output.
  std::string read_line(std::chrono::milliseconds timeout);

  int pid() const { return pid_; }
  void signal(int sig);
  /// Waits for exit up to `timeout`; returns the exit status (or 128+signal), or -1 on timeout.
  int wait(std::chrono::milliseconds timeout);
  bool running();

 private:
  int pid_ = -1;
  int stdout_fd_ = -1;
  int status_ = -1;
  bool reaped_ = false;
  std::string buffered_;
};

/// What a process that ran to its end wrote and returned.
struct finished_process {
  int code = -1;    // exit status (128+signal), -1 when it did not end within the bound
  std::string out;  // all of stdout
  std::string err;  // all of stderr
};

/// Runs argv to its end (at most `bound`), with stderr kept in the file `stderr_path`.
finished_process run_to_end(std::vector<std::string> argv, const std::string& stderr_path,
                            std::chrono::milliseconds bound = std::chrono::seconds(60));

}  // namespace baton::test
