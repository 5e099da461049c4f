// SPDX-License-Identifier: Apache-2.0
// Counts heap allocations in a process (LD_PRELOAD), for batond's allocations per request
// (docs/benchmarks.md, "Allocations and instructions per request"). Every malloc, calloc, realloc,
// aligned allocation and operator new (which calls malloc) is counted, in every thread. On SIGUSR2 the
// totals so far are written to the file named by BATON_ALLOC_COUNT_FILE as "allocations bytes\n"; the
// difference between two snapshots taken around N requests, divided by N, is the figure.
//
// Build: cc -O2 -shared -fPIC -o alloc_count.so alloc_count.c
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void __libc_free(void*);

static atomic_ulong allocations;
static atomic_ulong bytes;
static int out_fd = -1;

static void count(size_t n) {
  atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&bytes, n, memory_order_relaxed);
}

void* malloc(size_t n) {
  count(n);
  return __libc_malloc(n);
}
void* calloc(size_t k, size_t n) {
  count(k * n);
  return __libc_calloc(k, n);
}
void* realloc(void* p, size_t n) {
  count(n);
  return __libc_realloc(p, n);
}
void* memalign(size_t a, size_t n) {
  count(n);
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  count(n);
  return __libc_memalign(a, n);
}
int posix_memalign(void** p, size_t a, size_t n) {
  count(n);
  *p = __libc_memalign(a, n);
  return *p ? 0 : 12; /* ENOMEM */
}
void free(void* p) {
  __libc_free(p);
}

// Async-signal-safe: formats two numbers by hand and writes them with pwrite.
static char* put(char* end, unsigned long v) {
  do {
    *--end = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  return end;
}
static void snapshot(int sig) {
  (void)sig;
  if (out_fd < 0) return;
  char text[64];
  char* end = text + sizeof text;
  *--end = '\n';
  end = put(end, atomic_load(&bytes));
  *--end = ' ';
  end = put(end, atomic_load(&allocations));
  size_t n = (size_t)(text + sizeof text - end);
  if (ftruncate(out_fd, 0) == 0) (void)!pwrite(out_fd, end, n, 0);
}

__attribute__((constructor)) static void start(void) {
  const char* path = getenv("BATON_ALLOC_COUNT_FILE");
  if (!path) return;
  out_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  struct sigaction sa = {0};
  sa.sa_handler = snapshot;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR2, &sa, NULL);
}
