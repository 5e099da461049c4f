#pragma once
// A command run under a lease (`baton exec`, baton-agent's jobs): started directly (execvp, no shell) as the
// leader of its own process group, so that one kill(-pgid) reaches everything it started, and reaped from the
// event loop, so that the loop keeps renewing the lease while the command runs.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>

#include <sys/types.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace baton {

/// Makes this process the reaper of its orphaned descendants (Linux PR_SET_CHILD_SUBREAPER); a no-op
/// elsewhere.
void become_subreaper();

/// The file descriptors open now, from 3 up. Taken before baton opens any socket, these are the ones its
/// caller passed on, for the command to inherit too; see group_child.
std::vector<int> open_descriptors();

/// Why a command could not be started.
class spawn_error : public std::runtime_error {
 public:
  spawn_error(int err, bool exec_failed, const std::string& message)
      : std::runtime_error(message), errno_(err), exec_failed_(exec_failed) {}
  /// The errno of the failed call.
  int error_number() const noexcept { return errno_; }
  /// True when the process started but execvp failed (not found, not executable); false when fork or
  /// pipe failed.
  bool exec_failed() const noexcept { return exec_failed_; }

 private:
  int errno_;
  bool exec_failed_;
};

/// A command in its own process group. This process should be a child subreaper (become_subreaper()), so
/// that processes the command leaves behind are re-parented here, reaped here and not counted as alive
/// once they are zombies.
class group_child {
 public:
  /// Starts argv[0] (searched in PATH) with argv, in a new process group whose id is its pid, with the
  /// environment of this process plus `env` (replacing variables of the same name). Signals this process
  /// catches are reset to their default in the child and its signal mask is this process's; signals this
  /// process ignores stay ignored (as `nohup` expects). Of the descriptors ≥ 3, the child inherits only
  /// `inherited` (from open_descriptors()): Asio opens its sockets without FD_CLOEXEC, and the command has no
  /// business with baton's connections to the lock server. Returns once execvp succeeded.
  /// Throws spawn_error when fork or execvp fails.
  /// With `output_fd` ≥ 0, the command's stdout and stderr go to that descriptor (e.g. a pipe the caller
  /// reads to log the output); otherwise it shares this process's.
  group_child(const boost::asio::any_io_executor& ex, const std::vector<std::string>& argv,
              const std::vector<std::pair<std::string, std::string>>& env, const std::vector<int>& inherited,
              int output_fd = -1);
  ~group_child();
  group_child(const group_child&) = delete;
  group_child& operator=(const group_child&) = delete;

  pid_t pid() const { return pid_; }

  /// Completes when the command has exited, with its exit status, or 128+N when signal N ended it; at once
  /// if it has already been reaped. Cancellable: throws operation_aborted, and may be awaited again.
  boost::asio::awaitable<int> wait_exit();
  /// Reaps what has exited, without waiting; the exit status once the command has exited.
  std::optional<int> try_wait();

  /// Sends `sig` to every process of the group. Quiet when the group is empty.
  void signal_group(int sig) const;
  /// Reaps what has exited, then tells whether any process of the group remains (processes the command
  /// started and left behind included).
  bool group_alive();

 private:
  void reap();

  pid_t pid_ = -1;
  std::optional<int> status_;
  // Linux 5.3+: a pidfd turns readable when the process exits. Otherwise SIGCHLD wakes the loop.
  std::optional<boost::asio::posix::stream_descriptor> pidfd_;
  std::optional<boost::asio::signal_set> sigchld_;
};

}  // namespace baton
