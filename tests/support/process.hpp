#pragma once
// Test helper: a child process with its stdout captured, always killed when the handle goes away.

#include <chrono>
#include <string>
#include <vector>

namespace baton::test {

class child_process {
 public:
  /// Starts argv[0] with the given arguments; stdout is a pipe readable through read_line(), stderr is
  /// inherited (or sent to `stderr_path` when given). Throws on failure.
  explicit child_process(std::vector<std::string> argv, std::string stderr_path = {});
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

}  // namespace baton::test
