// SPDX-License-Identifier: Apache-2.0
// baton-faultclock: what a host suspend does to a process's clocks, for one process (and its children),
// loaded with LD_PRELOAD.
//
//   LD_PRELOAD=<build>/lib/libbaton-faultclock.so
//   BATON_FAULTCLOCK_CONTROL=/path/to/control   the suspended time so far, in milliseconds (one integer);
//                                              unset: the library does nothing
//
// While the host sleeps, CLOCK_BOOTTIME runs on and CLOCK_MONOTONIC does not; on resume, a timer armed at
// an absolute CLOCK_BOOTTIME instant that passed fires at once, and a relative CLOCK_MONOTONIC timer (the
// kind Asio's reactor arms) fires only when its remaining wait, which the suspend did not count, runs out.
// Writing a larger number to the control file is such a resume: from then on clock_gettime(CLOCK_BOOTTIME)
// reads that much later, and every CLOCK_BOOTTIME timerfd armed at an absolute instant is armed again, so
// one whose instant is now past fires at once. CLOCK_MONOTONIC, CLOCK_REALTIME and every other timer are
// left alone, as a resume leaves them (CLOCK_REALTIME is stepped by NTP later, if at all).
//
// A thread polls the control file every 5 ms (a fork's child gets its own). Replace the file atomically
// (write a temporary, rename it over). Not covered: CLOCK_BOOTTIME_ALARM, relative CLOCK_BOOTTIME timerfds,
// clock_nanosleep and POSIX timers (timer_create).

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "../preload/next_symbol.hpp"

namespace {

using clock_gettime_fn = int (*)(clockid_t, timespec*);
using timerfd_create_fn = int (*)(int, int);
using timerfd_settime_fn = int (*)(int, int, const itimerspec*, itimerspec*);
using timerfd_gettime_fn = int (*)(int, itimerspec*);
using close_fn = int (*)(int);

using baton::preload::next;
std::atomic<clock_gettime_fn> next_clock_gettime{nullptr};
std::atomic<timerfd_create_fn> next_timerfd_create{nullptr};
std::atomic<timerfd_settime_fn> next_timerfd_settime{nullptr};
std::atomic<timerfd_gettime_fn> next_timerfd_gettime{nullptr};
std::atomic<close_fn> next_close{nullptr};

char control_path[4096];
bool active = false;
std::atomic<std::int64_t> offset_ns{0};  // suspended time so far

constexpr std::int64_t billion = 1'000'000'000;
std::int64_t to_ns(const timespec& t) {
  return std::int64_t{t.tv_sec} * billion + t.tv_nsec;
}
timespec from_ns(std::int64_t ns) {
  if (ns < 0) ns = 0;
  return timespec{static_cast<time_t>(ns / billion), static_cast<long>(ns % billion)};
}

// The CLOCK_BOOTTIME timerfds of the process, with the absolute instant each was armed at (as the process
// reads the clock; 0: disarmed or relative).
constexpr int max_timers = 256;
struct boot_timer {
  std::atomic<int> fd{-1};
  std::int64_t at_ns = 0;
  std::int64_t interval_ns = 0;
};
boot_timer timers[max_timers];
pthread_mutex_t timers_mu = PTHREAD_MUTEX_INITIALIZER;

boot_timer* find(int fd) {
  for (auto& t : timers)
    if (t.fd.load(std::memory_order_relaxed) == fd) return &t;
  return nullptr;
}

// Arms `t` at its instant on the real clock: the process's instant less the suspended time. An instant
// already passed becomes one nanosecond after the epoch, which fires at once (0 would disarm).
int arm(boot_timer& t, itimerspec* old) {
  itimerspec spec{};
  if (t.at_ns != 0) {
    const std::int64_t real = t.at_ns - offset_ns.load();
    spec.it_value = real > 0 ? from_ns(real) : timespec{0, 1};
    spec.it_interval = from_ns(t.interval_ns);
  }
  return next(next_timerfd_settime, "timerfd_settime")(t.fd.load(), TFD_TIMER_ABSTIME, &spec, old);
}

void read_control() {
  int fd = ::open(control_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char text[64];
  ssize_t n = ::read(fd, text, sizeof text - 1);
  next(next_close, "close")(fd);
  if (n <= 0) return;
  text[n] = '\0';
  char* end = nullptr;
  long long ms = strtoll(text, &end, 10);
  if (end == text || ms < 0) return;
  const std::int64_t ns = static_cast<std::int64_t>(ms) * 1'000'000;
  if (ns == offset_ns.load()) return;
  offset_ns.store(ns);
  pthread_mutex_lock(&timers_mu);
  for (auto& t : timers)
    if (t.fd.load() >= 0 && t.at_ns != 0) arm(t, nullptr);
  pthread_mutex_unlock(&timers_mu);
}

void* poll_control(void*) {
  struct stat last {};
  const timespec tick{0, 5'000'000};
  for (;;) {
    struct stat st {};
    if (::stat(control_path, &st) == 0 &&
        (st.st_ino != last.st_ino || st.st_mtim.tv_nsec != last.st_mtim.tv_nsec ||
         st.st_mtim.tv_sec != last.st_mtim.tv_sec || st.st_size != last.st_size)) {
      last = st;
      read_control();
    }
    ::nanosleep(&tick, nullptr);
  }
  return nullptr;
}

void start_poller() {
  pthread_t th;
  if (pthread_create(&th, nullptr, poll_control, nullptr) == 0) pthread_detach(th);
}

__attribute__((constructor)) void load() {
  const char* control = ::getenv("BATON_FAULTCLOCK_CONTROL");
  if (!control || !*control || strlen(control) >= sizeof control_path) return;
  strcpy(control_path, control);
  active = true;
  read_control();
  start_poller();
  pthread_atfork(nullptr, nullptr, [] { start_poller(); });
}

}  // namespace

extern "C" {

int clock_gettime(clockid_t id, timespec* ts) {
  int r = next(next_clock_gettime, "clock_gettime")(id, ts);
  if (r == 0 && active && id == CLOCK_BOOTTIME) *ts = from_ns(to_ns(*ts) + offset_ns.load());
  return r;
}

int timerfd_create(int id, int flags) {
  int fd = next(next_timerfd_create, "timerfd_create")(id, flags);
  if (fd >= 0 && active && id == CLOCK_BOOTTIME) {
    pthread_mutex_lock(&timers_mu);
    for (auto& t : timers) {
      int free_slot = -1;
      if (t.fd.compare_exchange_strong(free_slot, fd)) {
        t.at_ns = 0;
        t.interval_ns = 0;
        break;
      }
    }
    pthread_mutex_unlock(&timers_mu);
  }
  return fd;
}

int timerfd_settime(int fd, int flags, const itimerspec* value, itimerspec* old) {
  if (!active) return next(next_timerfd_settime, "timerfd_settime")(fd, flags, value, old);
  pthread_mutex_lock(&timers_mu);
  boot_timer* t = find(fd);
  int r;
  if (!t || !(flags & TFD_TIMER_ABSTIME) || !value) {
    if (t) t->at_ns = 0;
    r = next(next_timerfd_settime, "timerfd_settime")(fd, flags, value, old);
  } else {
    t->at_ns = value->it_value.tv_sec == 0 && value->it_value.tv_nsec == 0 ? 0 : to_ns(value->it_value);
    t->interval_ns = to_ns(value->it_interval);
    r = arm(*t, old);
  }
  pthread_mutex_unlock(&timers_mu);
  return r;
}

int close(int fd) {
  if (active) {
    pthread_mutex_lock(&timers_mu);
    if (boot_timer* t = find(fd)) {
      t->at_ns = 0;
      t->fd.store(-1);
    }
    pthread_mutex_unlock(&timers_mu);
  }
  return next(next_close, "close")(fd);
}

}  // extern "C"
