// SPDX-License-Identifier: Apache-2.0
// baton-faultproc: a process fault injector for baton-agent and baton exec, loaded with LD_PRELOAD. It makes
// the calls they start and stop commands with fail as an overloaded or locked-down machine would, so the
// tests can walk their failure paths (tests/integration/test_agent_failures.cpp, test_cli.cpp).
//
//   LD_PRELOAD=<build>/lib/libbaton-faultproc.so
//   BATON_FAULTPROC=<mode>         read once, when the library loads; unset: the library does nothing
//
// Modes:
//   fork-eagain     fork() fails with EAGAIN, as at a pids limit (cgroup pids.max, RLIMIT_NPROC)
//   kill-eperm      kill() of a process group (pid < -1) with a real signal fails with EPERM, as when a
//                   process of the group changed its credentials; kill(-pgid, 0), the probe whether the
//                   group exists, still answers truthfully
//   timerfd-emfile  timerfd_create() fails with EMFILE, as in a process out of descriptors: the guard of a
//                   command under a lease cannot arm its deadline timer
//   guard-rearm-einval
//                   in the guard of a command (the process named baton-guard) timerfd_settime() succeeds
//                   once and then fails with EINVAL: the guard arms the lease's first deadline and cannot
//                   re-arm its timer after that. Other processes are spared: Asio's reactor and the SDK's
//                   lease timers use timerfd_settime too, and the holder must go on renewing
//
// Why this shape: an environment variable set at start is all these tests need (the fault holds for the
// agent's whole life), and the wrappers call nothing that is not async-signal-safe, because the agent calls
// fork() and kill() with every signal blocked and from a child between fork and exec.

#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace {

enum class mode : int { unknown = -1, none = 0, fork_eagain, kill_eperm, timerfd_emfile, guard_rearm_einval };

std::atomic<int> current{static_cast<int>(mode::unknown)};

mode fault() {
  int m = current.load(std::memory_order_relaxed);
  if (m != static_cast<int>(mode::unknown)) return static_cast<mode>(m);
  const char* v = ::getenv("BATON_FAULTPROC");
  mode found = mode::none;
  if (v && ::strcmp(v, "fork-eagain") == 0) found = mode::fork_eagain;
  if (v && ::strcmp(v, "kill-eperm") == 0) found = mode::kill_eperm;
  if (v && ::strcmp(v, "timerfd-emfile") == 0) found = mode::timerfd_emfile;
  if (v && ::strcmp(v, "guard-rearm-einval") == 0) found = mode::guard_rearm_einval;
  current.store(static_cast<int>(found), std::memory_order_relaxed);
  return found;
}

// Resolved when the library loads, so no wrapper ever calls dlsym (which is not async-signal-safe).
pid_t (*real_fork)() = nullptr;
int (*real_kill)(pid_t, int) = nullptr;
int (*real_timerfd_create)(int, int) = nullptr;
int (*real_timerfd_settime)(int, int, const struct itimerspec*, struct itimerspec*) = nullptr;

// timerfd_settime() calls made in the guard; the guard is forked, and its parent never counts here.
std::atomic<int> guard_settime_calls{0};

bool in_guard() {
  char name[17] = {};
  return ::prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && ::strcmp(name, "baton-guard") == 0;
}

__attribute__((constructor)) void resolve() {
  real_fork = reinterpret_cast<pid_t (*)()>(::dlsym(RTLD_NEXT, "fork"));
  real_kill = reinterpret_cast<int (*)(pid_t, int)>(::dlsym(RTLD_NEXT, "kill"));
  real_timerfd_create = reinterpret_cast<int (*)(int, int)>(::dlsym(RTLD_NEXT, "timerfd_create"));
  real_timerfd_settime = reinterpret_cast<int (*)(int, int, const struct itimerspec*, struct itimerspec*)>(
      ::dlsym(RTLD_NEXT, "timerfd_settime"));
  fault();
}

}  // namespace

extern "C" {

pid_t fork() {
  if (fault() == mode::fork_eagain) {
    errno = EAGAIN;
    return -1;
  }
  return real_fork();
}

int kill(pid_t pid, int sig) {
  if (fault() == mode::kill_eperm && pid < -1 && sig != 0) {
    errno = EPERM;
    return -1;
  }
  return real_kill(pid, sig);
}

int timerfd_create(int clockid, int flags) {
  if (fault() == mode::timerfd_emfile) {
    errno = EMFILE;
    return -1;
  }
  return real_timerfd_create(clockid, flags);
}

int timerfd_settime(int fd, int flags, const struct itimerspec* new_value, struct itimerspec* old_value) {
  if (fault() == mode::guard_rearm_einval && in_guard() && guard_settime_calls.fetch_add(1) >= 1) {
    errno = EINVAL;
    return -1;
  }
  return real_timerfd_settime(fd, flags, new_value, old_value);
}

}  // extern "C"
