// SPDX-License-Identifier: Apache-2.0
// baton-faultproc: a process fault injector for baton-agent, loaded with LD_PRELOAD. It makes the calls the
// agent starts and stops jobs with fail as an overloaded or locked-down machine would, so the tests can walk
// the agent's failure paths (tests/integration/test_agent_failures.cpp).
//
//   LD_PRELOAD=<build>/lib/libbaton-faultproc.so
//   BATON_FAULTPROC=<mode>         read once, when the library loads; unset: the library does nothing
//
// Modes:
//   fork-eagain     fork() fails with EAGAIN, as at a pids limit (cgroup pids.max, RLIMIT_NPROC)
//   kill-eperm      kill() of a process group (pid < -1) with a real signal fails with EPERM, as when a
//                   process of the group changed its credentials; kill(-pgid, 0), the probe whether the
//                   group exists, still answers truthfully
//
// Why this shape: an environment variable set at start is all these tests need (the fault holds for the
// agent's whole life), and the wrappers call nothing that is not async-signal-safe, because the agent calls
// fork() and kill() with every signal blocked and from a child between fork and exec.

#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace {

enum class mode : int { unknown = -1, none = 0, fork_eagain, kill_eperm };

std::atomic<int> current{static_cast<int>(mode::unknown)};

mode fault() {
  int m = current.load(std::memory_order_relaxed);
  if (m != static_cast<int>(mode::unknown)) return static_cast<mode>(m);
  const char* v = ::getenv("BATON_FAULTPROC");
  mode found = mode::none;
  if (v && ::strcmp(v, "fork-eagain") == 0) found = mode::fork_eagain;
  if (v && ::strcmp(v, "kill-eperm") == 0) found = mode::kill_eperm;
  current.store(static_cast<int>(found), std::memory_order_relaxed);
  return found;
}

// Resolved when the library loads, so no wrapper ever calls dlsym (which is not async-signal-safe).
pid_t (*real_fork)() = nullptr;
int (*real_kill)(pid_t, int) = nullptr;

__attribute__((constructor)) void resolve() {
  real_fork = reinterpret_cast<pid_t (*)()>(::dlsym(RTLD_NEXT, "fork"));
  real_kill = reinterpret_cast<int (*)(pid_t, int)>(::dlsym(RTLD_NEXT, "kill"));
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

}  // extern "C"
