#include "baton/common/process_group.hpp"

#include <boost/asio/use_awaitable.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cerrno>
#include <charconv>
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

// In the child, between fork and execvp: only async-signal-safe calls, since this process may have other
// threads (Asio resolves names on one) whose locks fork copied in whatever state they were.
[[noreturn]] void become_command(char* const* argv, char** envp, const sigset_t& mask, pid_t parent,
                                 int report_fd, int output_fd) {
  ::setpgid(0, 0);
  if (output_fd >= 0) {
    ::dup2(output_fd, STDOUT_FILENO);
    ::dup2(output_fd, STDERR_FILENO);
  }
#ifdef __linux__
  // If baton dies without stopping the command (SIGKILL, a crash), nobody renews the lease any more: the
  // command must not go on unguarded. This reaches the command only; its children need baton's kill(-pgid).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
#endif
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
  int err = errno;
  [[maybe_unused]] auto n = ::write(report_fd, &err, sizeof err);
  ::_exit(127);
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
                         const std::vector<int>& inherited, int output_fd) {
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
  if (pid == 0) become_command(args.data(), envp.data(), old, parent, report[1], output_fd);
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
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    int raw;
    while (::waitpid(pid, &raw, 0) < 0 && errno == EINTR) {
    }
    throw spawn_error(exec_errno, true, "cannot run \"" + argv[0] + "\": " + errno_text(exec_errno));
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
  int raw;
  while (::waitpid(pid_, &raw, 0) < 0 && errno == EINTR) {
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

void group_child::signal_group(int sig) const {
  ::kill(-pid_, sig);
}

bool group_child::group_alive() {
  reap();
  return ::kill(-pid_, 0) == 0 || errno == EPERM;
}

}  // namespace baton
