// SPDX-License-Identifier: Apache-2.0
#pragma once
// A command run under a lease (`baton exec`, baton-agent's jobs): started directly (execvp, no shell) as the
// leader of its own process group, so that one kill(-pgid) reaches everything it started, and reaped from the
// event loop, so that the loop keeps renewing the lease while the command runs.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>

#include <sys/types.h>

#include <chrono>
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

/// How a command's process is set up beyond its arguments and environment.
struct child_setup {
  /// With `error_fd` ≥ 0 the command's stderr goes there, apart from stdout (`output_fd`).
  int error_fd = -1;
  /// The directory it starts in; empty: this process's.
  std::string working_dir;
  /// The user it runs as (set before exec, after the directory is entered); empty: this process's. Only a
  /// process running as root can switch.
  struct credentials {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;  // supplementary groups
    std::string name;           // for messages
  };
  std::optional<credentials> user;
  /// Makes the command the kernel's first choice when memory runs out (oom_score_adj 1000), so that a job
  /// that exhausts its container's memory is killed rather than the agent that supervises it.
  bool oom_first = false;
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
  /// With `guard_fd` ≥ 0 (group_guard::command_fd()), the new process tells the guard its group before it
  /// runs the command, so no process of the group can ever exist unguarded.
  /// `setup`: stderr apart, the working directory, the user (spawn_error when the directory cannot be
  /// entered or the user taken, naming which).
  group_child(const boost::asio::any_io_executor& ex, const std::vector<std::string>& argv,
              const std::vector<std::pair<std::string, std::string>>& env, const std::vector<int>& inherited,
              int output_fd = -1, int guard_fd = -1, const child_setup& setup = {});
  /// When the command has not been reaped: SIGKILL to the group and a short, bounded wait for the command
  /// (a process that does not die, one in uninterruptible sleep, is left behind rather than block the
  /// caller).
  ~group_child();
  group_child(const group_child&) = delete;
  group_child& operator=(const group_child&) = delete;

  pid_t pid() const { return pid_; }

  /// Completes when the command has exited, with its exit status, or 128+N when signal N ended it; at once
  /// if it has already been reaped. Cancellable: throws operation_aborted, and may be awaited again.
  boost::asio::awaitable<int> wait_exit();
  /// Reaps what has exited, without waiting; the exit status once the command has exited.
  std::optional<int> try_wait();

  /// Sends `sig` to every process of the group. Returns 0 when it was sent or the group is empty, else the
  /// errno of kill(2) (EPERM: a process of the group changed its credentials).
  int signal_group(int sig) const;
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

/// The lease limits a guard enforces on its own (see group_guard), as stop_schedule takes them: durations
/// since boot on CLOCK_BOOTTIME.
struct guard_limits {
  std::chrono::nanoseconds term_at;  // the local deadline: SIGTERM to the group
  std::chrono::nanoseconds kill_at;  // kill_by() of that deadline: SIGKILL at the latest
  std::chrono::nanoseconds grace;    // SIGKILL this long after SIGTERM, when that is earlier
};

/// A process that kills a command's process group when this process dies first, SIGKILL included, and,
/// given the lease's limits, stops the group itself when the lease's deadline passes without an extension,
/// even while this process is stopped (SIGSTOP) or starved.
///
/// PR_SET_PDEATHSIG reaches only the command itself; what the command started (`sh -c "sleep 60; ..."`) would
/// be re-parented to init and run on unguarded, with a fencing token nobody renews. And a stopped holder
/// (SIGSTOP, a debugger) neither renews nor stops its command, which runs on past the lease. The guard is a
/// small forked process in a process group of its own (so a kill aimed at this process's group spares it),
/// with every descriptor closed but one end of a socket pair; this process holds the other end. The command
/// writes its group id into the guard before it runs (group_child's `guard_fd`). With limits, the guard holds
/// the deadline on a CLOCK_BOOTTIME timerfd armed at an absolute time (a host suspend counts), hears each new
/// one from extend(), and runs stop_schedule: SIGTERM at the deadline, SIGKILL after the grace but no later
/// than kill_at. When the socket closes without the "done" byte, this process is gone: the guard sends
/// SIGKILL to the group and exits. On disarm() it exits without killing anything.
class group_guard {
 public:
  /// Forks the guard; with `limits`, one that also enforces them. Throws spawn_error when socketpair or fork
  /// fails, or when the guard cannot arm its timer.
  explicit group_guard(const boost::asio::any_io_executor& ex,
                       std::optional<guard_limits> limits = std::nullopt);
  /// Not disarmed: closes this end, so the guard kills the group (if one was registered) and exits; does not
  /// wait for it.
  ~group_guard();
  group_guard(const group_guard&) = delete;
  group_guard& operator=(const group_guard&) = delete;

  /// A confirmed renew moved the lease's deadline: the guard's limits become these (later ones only; once
  /// the guard has sent SIGTERM, nothing changes). Call only once the command has started (group_child's
  /// constructor returned), so that the group id comes first. Never blocks; a guard that is gone or not
  /// reading is ignored (false).
  bool extend(std::chrono::nanoseconds term_at, std::chrono::nanoseconds kill_at);

  /// The errno with which the guard failed to arm its timer for a deadline extend() sent (timerfd_settime),
  /// 0 while it has not. It then keeps the limits its timer holds, the earlier ones, and so stops the command
  /// at that deadline although the lease goes on; a step its timer cannot be armed for at all (SIGKILL after
  /// the grace) it takes at once (docs/design.md). Reads what the guard sent, without blocking; the first
  /// failure stays.
  int timer_failure();

  /// What the guard saw and did, as far as it has told (a guard without limits tells nothing). Instants are
  /// on CLOCK_BOOTTIME since boot (baton::lease_clock), taken by the guard, which runs on while this process
  /// is stopped: a holder that was stopped learns from them when its command really ended, and whether its
  /// lease's deadline had passed by then.
  struct report {
    int timer_errno = 0;  // as timer_failure()
    /// When the guard sent SIGTERM to the group because the lease's deadline passed.
    std::optional<std::chrono::nanoseconds> terminated_at;
    /// When the command (the group's leader) exited; empty when the kernel lacks pidfd_open or the guard
    /// had no time to see it (the holder's own clock then tells).
    std::optional<std::chrono::nanoseconds> exited_at;
  };
  /// Reads what the guard sent, without blocking; each first report stays.
  report reports();

  /// The descriptor to pass as group_child's `guard_fd` (close-on-exec: the command does not keep it).
  int command_fd() const { return fd_; }
  pid_t pid() const { return pid_; }

  /// The group is over: lets the guard exit without killing anything, and reaps it. Bounded: a guard that
  /// has not exited after a second is killed. Call only once the group is empty.
  boost::asio::awaitable<void> disarm();

 private:
  boost::asio::any_io_executor ex_;
  pid_t pid_ = -1;
  int fd_ = -1;
  void read_reports();
  report reports_;
};

}  // namespace baton
