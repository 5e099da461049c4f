// SPDX-License-Identifier: Apache-2.0
#include "baton/common/process_group.hpp"

#include "baton/common/stop_schedule.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string_view>

extern char** environ;

namespace baton {
namespace {

namespace asio = boost::asio;

int status_code(int raw) {
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
}

std::string errno_text(int err) {
  return std::strerror(err);
}

// What the child reports through its report pipe when it cannot run the command: the step and its errno.
enum class child_step : int { exec = 0, guard = 1, working_dir = 2, user = 3 };
struct child_report {
  child_step step;
  int err;
};

// What this process tells a guard after the group id (each one record of the guard's SOCK_SEQPACKET socket,
// so a message is never split): `done`, or `extend` with the new limits.
constexpr char guard_done = 'd';
constexpr char guard_extend = 'x';
struct guard_extension {
  char kind = guard_extend;
  std::int64_t term_at_ns = 0;
  std::int64_t kill_at_ns = 0;
};
// What a guard with limits answers once it is ready: its timer is armed, or it could not be (and why). Later,
// `guard_failed` again for each new deadline its timer could not be armed for (group_guard::timer_failure()),
// `guard_terminated` when it sends SIGTERM to the group at the lease's deadline, and `guard_exited` when it
// sees the command exit (group_guard::reports()), each with the instant on CLOCK_BOOTTIME.
constexpr char guard_ready = 'r';
constexpr char guard_failed = 'f';
constexpr char guard_terminated = 't';
constexpr char guard_exited = 'e';
struct guard_answer {
  char kind = guard_ready;
  int err = 0;
  std::int64_t at_ns = 0;
};

// Writes all of [data, data + size) to a socket, without SIGPIPE; false on failure (errno says why).
// Async-signal-safe.
bool send_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Arms the guard's `timer` (CLOCK_BOOTTIME) at the absolute time `wake`. False, errno set, when
// timerfd_settime fails, which leaves the timer as it was. Async-signal-safe.
bool arm_timer(int timer, std::chrono::nanoseconds wake) {
  struct itimerspec at {};
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(wake);
  at.it_value.tv_sec = s.count();
  at.it_value.tv_nsec = static_cast<long>((wake - s).count());
  if (at.it_value.tv_sec == 0 && at.it_value.tv_nsec == 0) at.it_value.tv_nsec = 1;  // 0 would disarm
  return ::timerfd_settime(timer, TFD_TIMER_ABSTIME, &at, nullptr) == 0;
}

// In the child, between fork and execvp: only async-signal-safe calls, since this process may have other
// threads (Asio resolves names on one) whose locks fork copied in whatever state they were.
[[noreturn]] void become_command(char* const* argv, char** envp, const sigset_t& mask, pid_t parent,
                                 int report_fd, int output_fd, int guard_fd, const child_setup& setup) {
  ::setpgid(0, 0);
  if (output_fd >= 0) {
    ::dup2(output_fd, STDOUT_FILENO);
    ::dup2(setup.error_fd >= 0 ? setup.error_fd : output_fd, STDERR_FILENO);
  }
  auto fail = [report_fd](child_step step) {
    child_report r{step, errno};
    [[maybe_unused]] auto n = ::write(report_fd, &r, sizeof r);
    ::_exit(127);
  };
  if (!setup.working_dir.empty() && ::chdir(setup.working_dir.c_str()) != 0) fail(child_step::working_dir);
#ifdef __linux__
  if (setup.oom_first) {
    // Raising it needs no privilege; a kernel without the file leaves the score as it was.
    const int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      [[maybe_unused]] auto n = ::write(fd, "1000", 4);
      ::close(fd);
    }
  }
#endif
  if (setup.user) {
    // Groups first: once the uid is not root's, they cannot be changed any more.
    const auto& u = *setup.user;
    if (::setgroups(u.groups.size(), u.groups.data()) != 0 || ::setgid(u.gid) != 0 || ::setuid(u.uid) != 0)
      fail(child_step::user);
  }
#ifdef __linux__
  // If baton dies without stopping the command (SIGKILL, a crash), nobody renews the lease any more: the
  // command must not go on unguarded. This reaches the command only; its children need baton's kill(-pgid).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
#endif
  if (guard_fd >= 0) {
    // The guard learns the group before anything of it runs (the command could fork at once); a failure to
    // tell it is a failure to start, not a command running unguarded.
    const pid_t group = ::getpid();
    if (!send_all(guard_fd, &group, sizeof group)) {
      child_report r{child_step::guard, errno};
      [[maybe_unused]] auto n = ::write(report_fd, &r, sizeof r);
      ::_exit(127);
    }
  }
  // Our handlers must not run here (Asio's would write into the parent's signal pipe), and execvp resets
  // caught signals anyway; ignored ones stay ignored, as the command's caller arranged.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa;
    if (::sigaction(sig, nullptr, &sa) != 0) continue;
    if ((sa.sa_flags & SA_SIGINFO) || (sa.sa_handler != SIG_IGN && sa.sa_handler != SIG_DFL)) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(sig, &dfl, nullptr);
    }
  }
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  environ = envp;
  ::execvp(argv[0], argv);
  child_report r{child_step::exec, errno};
  [[maybe_unused]] auto n = ::write(report_fd, &r, sizeof r);
  ::_exit(127);
}

// The guard process (see group_guard), between fork and _exit: async-signal-safe calls only, as above.
[[noreturn]] void become_guard(int guard_end, int agent_end, int max_fd, std::optional<guard_limits> limits) {
  ::close(agent_end);
  // Its own process group: a kill aimed at the agent's group (a terminal's ^C, `kill -- -pgid`) spares it.
  ::setpgid(0, 0);
#ifdef __linux__
  ::prctl(PR_SET_NAME, "baton-guard");
#endif
  // Default dispositions (the parent's handlers must not run here), then ignore what a terminal or a service
  // manager sends to stop the agent: the guard ends when the agent does, and not before.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa;
    if (::sigaction(sig, nullptr, &sa) != 0) continue;
    if ((sa.sa_flags & SA_SIGINFO) || sa.sa_handler != SIG_DFL) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(sig, &dfl, nullptr);
    }
  }
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE}) {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    ::sigaction(sig, &ign, nullptr);
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Keep nothing of the agent open (its listening socket, its connections, a job's output pipe): a copy here
  // would keep them open after the agent closed them.
  if (guard_end != STDIN_FILENO) {
    ::dup2(guard_end, STDIN_FILENO);
  }
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 1u, ~0u, 0u) != 0)
#endif
    for (int fd = 1; fd < max_fd; ++fd)
      ::close(fd);

  auto read_some = [](void* into, std::size_t size) {
    ssize_t n;
    do {
      n = ::recv(STDIN_FILENO, into, size, MSG_WAITALL);
    } while (n < 0 && errno == EINTR);
    return n;
  };
  // The timer of the lease's deadline, on CLOCK_BOOTTIME and armed at absolute times: a relative
  // CLOCK_MONOTONIC timer would not count a host suspend, while the server's clock does. Armed for the first
  // deadline before the command may start: a guard that cannot time it guards nothing.
  int timer = -1;
  stop_schedule schedule(stop_schedule::never, stop_schedule::never, std::chrono::nanoseconds(0));
  // The time the timer is armed for; `unarmed` once it has fired (or before it is armed).
  constexpr auto unarmed = stop_schedule::time_point::min();
  auto armed = unarmed;
  if (limits) {
    schedule = stop_schedule(limits->term_at, limits->kill_at, limits->grace);
    timer = ::timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC);
    guard_answer answer;
    if (timer < 0 || !arm_timer(timer, schedule.wake_at())) answer = {guard_failed, errno};
    armed = schedule.wake_at();
    send_all(STDIN_FILENO, &answer, sizeof answer);
    if (answer.kind != guard_ready) ::_exit(0);
  }
  pid_t group = 0;
  // The agent gave up on the command before it ran, or is gone already: nothing of the group can exist.
  if (read_some(&group, sizeof group) != static_cast<ssize_t>(sizeof group) || group <= 1) ::_exit(0);
  // Repeats SIGKILL briefly, in case a process of the group was forking while the first signal was sent.
  auto kill_group = [group] {
    for (int i = 0; i < 10 && ::kill(-group, SIGKILL) == 0; ++i) {
      struct timespec pause {
        0, 10'000'000
      };
      ::nanosleep(&pause, nullptr);
    }
  };
  if (!limits) {
    char done = 0;
    if (read_some(&done, 1) == 1) ::_exit(0);  // disarmed: the group is over
    // End of stream without "done": the agent died. Kill the group.
    kill_group();
    ::_exit(0);
  }
  auto boot_now = [] {
    struct timespec ts {};
    ::clock_gettime(CLOCK_BOOTTIME, &ts);
    return std::chrono::nanoseconds(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
  };
  // Tells the holder a step and when it happened; never blocks (a full socket loses a report, and the holder
  // then knows less, never something false).
  auto report = [](char kind, std::chrono::nanoseconds at) {
    guard_answer a{kind, 0, at.count()};
    [[maybe_unused]] auto n = ::send(STDIN_FILENO, &a, sizeof a, MSG_NOSIGNAL | MSG_DONTWAIT);
  };
  auto carry_out = [&](stop_schedule::actions act) {
    if (act.term) {
      ::kill(-group, SIGTERM);
      report(guard_terminated, boot_now());
    }
    if (act.kill) kill_group();
  };
  // The command's exit as it happens: the holder may be stopped (SIGSTOP) and reap it much later, and a
  // run's duration and whether it ended before its lease did are the guard's to tell then. A kernel without
  // pidfd_open (before 5.3), or a command that is already gone, leaves it to the holder's own clock.
  int exit_fd = -1;
#ifdef SYS_pidfd_open
  exit_fd = static_cast<int>(::syscall(SYS_pidfd_open, group, 0));
#endif
  // Tells the holder (group_guard::timer_failure()); never blocks: one report is enough, a full socket loses
  // nothing it needs.
  auto report_timer_failure = [](int err) {
    guard_answer failed{guard_failed, err};
    [[maybe_unused]] auto n = ::send(STDIN_FILENO, &failed, sizeof failed, MSG_NOSIGNAL | MSG_DONTWAIT);
  };
  for (;;) {
    // Looked at after every wake, whatever woke it: a late wake-up still acts at once.
    carry_out(schedule.poll(boot_now()));
    // The next step needs the timer. A step it cannot be armed for is taken now, ahead of its time: without
    // a timer the guard could not take it at all (docs/design.md, "A command's stop under a lease").
    for (auto wake = schedule.wake_at(); wake != stop_schedule::never && wake != armed;
         wake = schedule.wake_at()) {
      if (arm_timer(timer, wake)) {
        armed = wake;
        break;
      }
      report_timer_failure(errno);
      carry_out(schedule.poll(wake));
    }
    struct pollfd watch[3] = {{STDIN_FILENO, POLLIN, 0}, {timer, POLLIN, 0}, {exit_fd, POLLIN, 0}};
    if (::poll(watch, exit_fd >= 0 ? 3 : 2, -1) < 0) continue;  // EINTR
    if (watch[1].revents & POLLIN) {
      std::uint64_t expirations;
      [[maybe_unused]] auto n = ::read(timer, &expirations, sizeof expirations);
      armed = unarmed;
    }
    if (exit_fd >= 0 && watch[2].revents != 0) {
      report(guard_exited, boot_now());
      ::close(exit_fd);
      exit_fd = -1;
    }
    if (watch[0].revents == 0) continue;
    guard_extension message;
    ssize_t n;
    do {
      n = ::recv(STDIN_FILENO, &message, sizeof message, 0);
    } while (n < 0 && errno == EINTR);
    if (n == 1 && message.kind == guard_done) ::_exit(0);  // disarmed: the group is over
    if (n == static_cast<ssize_t>(sizeof message) && message.kind == guard_extend) {
      // Taken only once the timer holds its new time. A timer that cannot be re-armed still holds the
      // earlier one, and so the guard keeps the limits it holds: the command stops at that deadline, before
      // the lease's, rather than at none.
      auto extended = schedule;
      extended.extend(std::chrono::nanoseconds(message.term_at_ns),
                      std::chrono::nanoseconds(message.kill_at_ns));
      const auto wake = extended.wake_at();
      if (wake == armed || wake == stop_schedule::never || arm_timer(timer, wake)) {
        schedule = extended;
        armed = wake;
      } else {
        report_timer_failure(errno);
      }
      continue;
    }
    if (n < 0 && errno == EAGAIN) continue;
    // End of stream without "done" (or a message no version of this program sends): the holder died.
    kill_group();
    ::_exit(0);
  }
}

}  // namespace

void become_subreaper() {
#ifdef __linux__
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
}

std::vector<int> open_descriptors() {
  std::vector<int> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return fds;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name(entry->d_name);
    int fd = -1;
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), fd);
    if (ec == std::errc{} && end == name.data() + name.size() && fd >= 3 && fd != ::dirfd(dir))
      fds.push_back(fd);
  }
  ::closedir(dir);
  std::sort(fds.begin(), fds.end());
  return fds;
}

group_child::group_child(const asio::any_io_executor& ex, const std::vector<std::string>& argv,
                         const std::vector<std::pair<std::string, std::string>>& env,
                         const std::vector<int>& inherited, int output_fd, int guard_fd,
                         const child_setup& setup) {
  // Everything the child needs is built before fork (see become_command).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string_view entry(*e);
    auto name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : env)
      replaced = replaced || name == k;
    if (!replaced) env_strings.emplace_back(entry);
  }
  for (const auto& [k, v] : env)
    env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings)
    envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> arg_strings(argv);
  std::vector<char*> args;
  for (auto& s : arg_strings)
    args.push_back(s.data());
  args.push_back(nullptr);

  for (int fd : open_descriptors())
    if (!std::binary_search(inherited.begin(), inherited.end(), fd)) ::fcntl(fd, F_SETFD, FD_CLOEXEC);

  // execvp's failure comes back through this pipe; a successful exec closes it (O_CLOEXEC) unwritten.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw spawn_error(errno, false, "pipe: " + errno_text(errno));
  // No signal may be handled in the child before it has reset the handlers.
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) become_command(args.data(), envp.data(), old, parent, report[1], output_fd, guard_fd, setup);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    throw spawn_error(fork_errno, false, "fork: " + errno_text(fork_errno));
  }
  pid_ = pid;
  // Also from this side, so the group exists before anyone signals it, whichever process runs first.
  ::setpgid(pid, pid);
  child_report report_read{};
  ssize_t n;
  do {
    n = ::read(report[0], &report_read, sizeof report_read);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof report_read)) {
    int raw;
    while (::waitpid(pid, &raw, 0) < 0 && errno == EINTR) {
    }
    const int err = report_read.err;
    if (report_read.step == child_step::guard)
      throw spawn_error(err, false, "cannot start \"" + argv[0] + "\" under its guard: " + errno_text(err));
    if (report_read.step == child_step::working_dir)
      throw spawn_error(err, true,
                        "cannot enter working_dir \"" + setup.working_dir + "\": " + errno_text(err));
    if (report_read.step == child_step::user)
      throw spawn_error(err, true,
                        "cannot run as user \"" + (setup.user ? setup.user->name : std::string()) +
                            "\": " + errno_text(err));
    throw spawn_error(err, true, "cannot run \"" + argv[0] + "\": " + errno_text(err));
  }

#ifdef SYS_pidfd_open
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) {
    pidfd_.emplace(ex, fd);
    return;
  }
#endif
  // Kernels before 5.3, or a seccomp filter that refuses pidfd_open. Registered before the first waitpid in
  // wait_exit(), so no SIGCHLD can slip between that check and the wait.
  sigchld_.emplace(ex, SIGCHLD);
}

group_child::~group_child() {
  if (status_) return;
  // Only reached when the supervisor itself failed: leave nothing behind that would run without the lease.
  signal_group(SIGKILL);
  ::kill(pid_, SIGKILL);
  // A killed process is reaped within microseconds; one that cannot die (uninterruptible sleep) must not
  // hold this thread, and with it the event loop, forever.
  for (int i = 0; i < 100; ++i) {
    int raw;
    pid_t p = ::waitpid(pid_, &raw, WNOHANG);
    if (p == pid_ || (p < 0 && errno != EINTR)) return;
    ::usleep(2'000);
  }
}

void group_child::reap() {
  // The whole group: as subreaper this process also inherits the processes the command left behind.
  for (;;) {
    int raw;
    pid_t p = ::waitpid(-pid_, &raw, WNOHANG);
    if (p < 0 && errno == EINTR) continue;
    if (p <= 0) break;
    if (p == pid_) status_ = status_code(raw);
  }
  // The leader itself, in case it already left the group, which waitpid(-pgid) would not reap.
  if (!status_) {
    int raw;
    if (::waitpid(pid_, &raw, WNOHANG) == pid_) status_ = status_code(raw);
  }
}

std::optional<int> group_child::try_wait() {
  reap();
  return status_;
}

asio::awaitable<int> group_child::wait_exit() {
  for (;;) {
    reap();
    if (status_) co_return *status_;
    if (pidfd_)
      co_await pidfd_->async_wait(asio::posix::descriptor_base::wait_read, asio::use_awaitable);
    else
      co_await sigchld_->async_wait(asio::use_awaitable);
  }
}

int group_child::signal_group(int sig) const {
  if (::kill(-pid_, sig) == 0 || errno == ESRCH) return 0;
  return errno;
}

bool group_child::group_alive() {
  reap();
  return ::kill(-pid_, 0) == 0 || errno == EPERM;
}

group_guard::group_guard(const asio::any_io_executor& ex, std::optional<guard_limits> limits) : ex_(ex) {
  int ends[2];
  // Records, not a byte stream: extend() never blocks, and a message either goes whole or not at all.
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0)
    throw spawn_error(errno, false, "guard: socketpair: " + errno_text(errno));
  // Taken before fork: the guard closes every descriptor below it without calling anything unsafe.
  struct rlimit files {};
  int max_fd = 1 << 16;
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY)
    max_fd = static_cast<int>(std::min<rlim_t>(files.rlim_cur, 1 << 20));
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = ::fork();
  if (pid == 0) become_guard(ends[0], ends[1], max_fd, limits);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::close(ends[0]);
  if (pid < 0) {
    ::close(ends[1]);
    throw spawn_error(fork_errno, false, "guard: fork: " + errno_text(fork_errno));
  }
  pid_ = pid;
  fd_ = ends[1];
  if (!limits) return;
  // No command may start under a guard that cannot keep its deadline.
  guard_answer answer{guard_failed, 0};
  ssize_t n;
  do {
    n = ::recv(fd_, &answer, sizeof answer, 0);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof answer) || answer.kind != guard_ready) {
    const int err = n == static_cast<ssize_t>(sizeof answer) ? answer.err : (n == 0 ? EPIPE : errno);
    ::close(fd_);
    fd_ = -1;
    int raw;
    while (::waitpid(pid_, &raw, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    throw spawn_error(err, false, "guard: cannot arm its CLOCK_BOOTTIME timer: " + errno_text(err));
  }
}

void group_guard::read_reports() {
  while (fd_ >= 0) {
    guard_answer answer{};
    const ssize_t n = ::recv(fd_, &answer, sizeof answer, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof answer)) break;  // nothing more (EAGAIN), or the guard is gone
    const auto at = std::chrono::nanoseconds(answer.at_ns);
    if (answer.kind == guard_failed && reports_.timer_errno == 0)
      reports_.timer_errno = answer.err != 0 ? answer.err : EIO;
    if (answer.kind == guard_terminated && !reports_.terminated_at) reports_.terminated_at = at;
    if (answer.kind == guard_exited && !reports_.exited_at) reports_.exited_at = at;
  }
}

int group_guard::timer_failure() {
  read_reports();
  return reports_.timer_errno;
}

group_guard::report group_guard::reports() {
  read_reports();
  return reports_;
}

bool group_guard::extend(std::chrono::nanoseconds term_at, std::chrono::nanoseconds kill_at) {
  if (fd_ < 0) return false;
  guard_extension message;
  message.term_at_ns = term_at.count();
  message.kill_at_ns = kill_at.count();
  return ::send(fd_, &message, sizeof message, MSG_NOSIGNAL | MSG_DONTWAIT) ==
         static_cast<ssize_t>(sizeof message);
}

group_guard::~group_guard() {
  if (fd_ >= 0) ::close(fd_);
  // Reaped if it is already gone; otherwise it ends on its own, and is reaped by whoever inherits it.
  if (pid_ > 0) {
    int raw;
    ::waitpid(pid_, &raw, WNOHANG);
  }
}

asio::awaitable<void> group_guard::disarm() {
  if (fd_ < 0) co_return;
  send_all(fd_, &guard_done, 1);
  ::close(fd_);
  fd_ = -1;
  // The guard exits as soon as it reads the byte; poll for it with growing pauses, then kill it.
  auto wait = std::chrono::milliseconds(1);
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (bool killed = false;;) {
    int raw;
    pid_t p = ::waitpid(pid_, &raw, WNOHANG);
    if (p == pid_ || (p < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= give_up) {
      if (killed) break;  // not even SIGKILL ended it: leave it to whoever inherits it
      ::kill(pid_, SIGKILL);
      killed = true;
      give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    asio::steady_timer pause(ex_, wait);
    co_await pause.async_wait(asio::use_awaitable);
    wait = std::min(wait * 2, std::chrono::milliseconds(50));
  }
  pid_ = -1;
}

}  // namespace baton
