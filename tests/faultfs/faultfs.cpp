// SPDX-License-Identifier: Apache-2.0
// baton-faultfs: a storage fault injector for batond, loaded with LD_PRELOAD (docs/reliability.md,
// "Storage faults"). It wraps the calls that make data durable and, for files under one directory only,
// makes them stall or fail as a sick disk would, or kills the process around the snapshot's rename.
//
//   LD_PRELOAD=<build>/lib/libbaton-faultfs.so
//   BATON_FAULTFS_DIR=/path/to/data-dir        only files under it (and the directory itself) are affected;
//                                              unset: the library does nothing
//   BATON_FAULTFS_CONTROL=/path/to/control     the mode, re-read whenever the file changes
//
// The control file holds one line, `<mode> [once]`. A missing or empty file means `none`. Modes:
//
//   none                 every call goes through
//   stall                write, pwrite, writev, pwritev, fsync and fdatasync block until the mode changes
//                        (polled every 10 ms); nothing reaches the file meanwhile, so a kill -9 during a
//                        stall loses exactly what was stalled
//   eio-write            the write family fails with EIO
//   eio-fsync            fsync and fdatasync fail with EIO (the write before them succeeded)
//   enospc               the write family fails with ENOSPC
//   eio-rename           rename/renameat/renameat2 onto a path in the directory fail with EIO
//   kill-before-rename   the process sends itself SIGKILL instead of renaming a file onto `snapshot`
//   kill-after-rename    the process renames a file onto `snapshot`, then sends itself SIGKILL
//   eio-dirsync          fsync and fdatasync of a directory fail with EIO (files' syncs pass)
//   stall-sync           fsync and fdatasync block until the mode changes; writes go through, so the page
//                        cache holds data that a power cut (see the recorder below) would lose
//
// `once` (failing modes only) makes the fault apply to the first matching call and let later ones pass,
// until the control file changes again. Replace the file atomically (write a temporary, rename it over):
// the library notices a change by its inode, size and times, and a rename always gives a new inode.
//
// The power-cut recorder (BATON_FAULTFS_RECORD=/path/to/record, an existing directory outside the data
// directory) notes what each successful sync made durable, whatever the mode: an fsync or fdatasync of a
// file keeps a copy of its content as record/ino-<inode> (only the new bytes, when it grew), an fsync of the
// data directory keeps its listing (inode and name of each entry) as record/dir.list. A later process with
// the same record directory goes on from there; the first one takes the directory as it finds it as durable.
// The test then builds what a power cut would have left (storage_faults::power_cut_image): the names of the
// last durable listing, each with the content of its last sync.
//
// Why this shape: the mode is looked up on every wrapped call (one stat(2); no allocation, and no lock a
// caller could wait on), so a test or the chaos runner can change it while batond runs and the next call
// obeys. The fd's path (readlink of /proc/self/fd/N) is only resolved when a mode is set, so
// with `none` the socket and eventfd writes of a busy server pay one stat each and nothing else.
//
// Not covered: writes that bypass the PLT (stdio's internal writes, io_uring, mmap), fallocate,
// sync_file_range, and O_SYNC files (their writes are wrapped, but there is no separate fsync to fail).

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>

#include "../preload/next_symbol.hpp"

namespace {

enum class mode : int {
  none,
  stall,
  eio_write,
  eio_fsync,
  enospc,
  eio_rename,
  kill_before_rename,
  kill_after_rename,
  eio_dirsync,
  stall_sync,
};

struct mode_name {
  const char* text;
  mode value;
};
constexpr mode_name mode_names[] = {
    {"none", mode::none},
    {"stall", mode::stall},
    {"eio-write", mode::eio_write},
    {"eio-fsync", mode::eio_fsync},
    {"enospc", mode::enospc},
    {"eio-rename", mode::eio_rename},
    {"kill-before-rename", mode::kill_before_rename},
    {"kill-after-rename", mode::kill_after_rename},
    {"eio-dirsync", mode::eio_dirsync},
    {"stall-sync", mode::stall_sync},
};

const char* name_of(mode m) {
  for (const auto& n : mode_names)
    if (n.value == m) return n.text;
  return "?";
}

// Configuration, fixed once the library is loaded.
char data_dir[PATH_MAX];
std::size_t data_dir_len = 0;  // 0: inert
char control_path[PATH_MAX];

// The current mode. `once` and `fired` implement the one-shot variant; `logged` keeps the note on stderr
// to one per control file version.
std::atomic<int> current{static_cast<int>(mode::none)};
std::atomic<bool> once{false};
std::atomic<bool> fired{false};
std::atomic<bool> logged{false};

// The control file version last parsed, guarded by `reloading` (a try-lock: a thread that finds it taken
// goes on with the mode as it is, microseconds old at worst).
std::atomic_flag reloading = ATOMIC_FLAG_INIT;
struct version {
  bool present = false;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  timespec mtime{}, ctime{};

  bool operator==(const version& o) const {
    return present == o.present && dev == o.dev && ino == o.ino && size == o.size &&
           mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec &&
           ctime.tv_sec == o.ctime.tv_sec && ctime.tv_nsec == o.ctime.tv_nsec;
  }
};
version loaded;
bool ever_loaded = false;

// The next definitions of the wrapped functions (libc's, or a sanitizer's interceptors in front of them).
using write_fn = ssize_t (*)(int, const void*, size_t);
using pwrite_fn = ssize_t (*)(int, const void*, size_t, off_t);
using writev_fn = ssize_t (*)(int, const iovec*, int);
using pwritev_fn = ssize_t (*)(int, const iovec*, int, off_t);
using pwritev2_fn = ssize_t (*)(int, const iovec*, int, off_t, int);
using sync_fn = int (*)(int);
using rename_fn = int (*)(const char*, const char*);
using renameat_fn = int (*)(int, const char*, int, const char*);
using renameat2_fn = int (*)(int, const char*, int, const char*, unsigned);

using baton::preload::next;
std::atomic<write_fn> next_write{nullptr};
std::atomic<pwrite_fn> next_pwrite{nullptr}, next_pwrite64{nullptr};
std::atomic<writev_fn> next_writev{nullptr};
std::atomic<pwritev_fn> next_pwritev{nullptr}, next_pwritev64{nullptr};
std::atomic<pwritev2_fn> next_pwritev2{nullptr};
std::atomic<sync_fn> next_fsync{nullptr}, next_fdatasync{nullptr};
std::atomic<rename_fn> next_rename{nullptr};
std::atomic<renameat_fn> next_renameat{nullptr};
std::atomic<renameat2_fn> next_renameat2{nullptr};

void say(const char* text) {
  // Straight to the next write: a message about a fault must not be subject to one.
  if (auto w = next(next_write, "write")) {
    ssize_t ignored = w(STDERR_FILENO, text, strlen(text));
    (void)ignored;
  }
}

void parse(const char* text, std::size_t len) {
  // First word: the mode; second word, if any: `once`.
  std::size_t i = 0;
  auto skip_space = [&] {
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r'))
      ++i;
  };
  auto word_end = [&] {
    std::size_t j = i;
    while (j < len && text[j] != ' ' && text[j] != '\t' && text[j] != '\r' && text[j] != '\n')
      ++j;
    return j;
  };
  skip_space();
  std::size_t end = word_end();
  mode m = mode::none;
  bool known = end == i;  // empty: none
  for (const auto& n : mode_names)
    if (strlen(n.text) == end - i && memcmp(n.text, text + i, end - i) == 0) {
      m = n.value;
      known = true;
    }
  if (!known) {
    char msg[PATH_MAX + 128];
    snprintf(msg, sizeof msg, "baton-faultfs: unknown mode '%.*s' in %s: no faults\n",
             static_cast<int>(end - i), text + i, control_path);
    say(msg);
  }
  i = end;
  skip_space();
  end = word_end();
  bool one_shot = end - i == 4 && memcmp(text + i, "once", 4) == 0;
  once.store(one_shot, std::memory_order_relaxed);
  fired.store(false, std::memory_order_relaxed);
  logged.store(false, std::memory_order_relaxed);
  current.store(static_cast<int>(m), std::memory_order_release);
}

// The mode in force now: the control file is stat'ed on every call and read again when it changed.
mode current_mode() {
  if (data_dir_len == 0) return mode::none;
  struct stat st;
  version v;
  if (::stat(control_path, &st) == 0) {
    v.present = true;
    v.dev = st.st_dev;
    v.ino = st.st_ino;
    v.size = st.st_size;
    v.mtime = st.st_mtim;
    v.ctime = st.st_ctim;
  }
  if (!reloading.test_and_set(std::memory_order_acquire)) {
    if (!ever_loaded || !(v == loaded)) {
      char text[128];
      std::size_t len = 0;
      if (v.present) {
        int fd = ::open(control_path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
          ssize_t n;
          while ((n = ::read(fd, text + len, sizeof text - 1 - len)) > 0)
            len += static_cast<std::size_t>(n);
          ::close(fd);
        }
      }
      text[len] = '\0';
      parse(text, len);
      loaded = v;
      ever_loaded = true;
    }
    reloading.clear(std::memory_order_release);
  }
  return static_cast<mode>(current.load(std::memory_order_acquire));
}

bool under_data_dir(const char* path, std::size_t len) {
  return len >= data_dir_len && memcmp(path, data_dir, data_dir_len) == 0 &&
         (len == data_dir_len || path[data_dir_len] == '/');
}

// Whether `fd` names the data directory or a file in it; its path goes to `path` (for the note).
bool fd_in_data_dir(int fd, char (&path)[PATH_MAX]) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = ::readlink(link, path, sizeof path - 1);
  if (n <= 0) return false;
  path[n] = '\0';
  return under_data_dir(path, static_cast<std::size_t>(n));
}

// One-shot modes fault only once per control file version.
bool take_fault() {
  return !once.load(std::memory_order_relaxed) || !fired.exchange(true);
}

void note(mode m, const char* call, const char* path, const char* outcome) {
  if (logged.exchange(true)) return;
  char msg[PATH_MAX + 160];
  snprintf(msg, sizeof msg, "baton-faultfs: mode %s: %s(%s) %s\n", name_of(m), call, path, outcome);
  say(msg);
}

void wait_out(mode stalled) {
  const timespec tick{0, 10'000'000};
  while (current_mode() == stalled)
    ::nanosleep(&tick, nullptr);
}

bool is_directory(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
}

// The fault for a write or sync call on `fd`: 0 to go ahead (after a stall, if one was in force), or the
// errno to fail with.
int fault_for(int fd, bool is_sync, const char* call) {
  mode m = current_mode();
  if (m == mode::none || m == mode::eio_rename || m == mode::kill_before_rename ||
      m == mode::kill_after_rename)
    return 0;
  char path[PATH_MAX];
  if (!fd_in_data_dir(fd, path)) return 0;
  switch (m) {
    case mode::stall:
      note(m, call, path, "stalled");
      wait_out(mode::stall);
      return 0;
    case mode::stall_sync:
      if (!is_sync) return 0;
      note(m, call, path, "stalled");
      wait_out(mode::stall_sync);
      return 0;
    case mode::eio_dirsync:
      if (!is_sync || !is_directory(fd) || !take_fault()) return 0;
      note(m, call, path, "failed with EIO");
      return EIO;
    case mode::eio_write:
      if (is_sync || !take_fault()) return 0;
      note(m, call, path, "failed with EIO");
      return EIO;
    case mode::enospc:
      if (is_sync || !take_fault()) return 0;
      note(m, call, path, "failed with ENOSPC");
      return ENOSPC;
    case mode::eio_fsync:
      if (!is_sync || !take_fault()) return 0;
      note(m, call, path, "failed with EIO");
      return EIO;
    default:
      return 0;
  }
}

// Appends `n` bytes of `text` to the string of length `len` in `buf`; false when it does not fit.
bool append(char (&buf)[PATH_MAX], std::size_t& len, const char* text, std::size_t n) {
  if (n >= sizeof buf - len) return false;
  memcpy(buf + len, text, n);
  len += n;
  buf[len] = '\0';
  return true;
}

// Resolves the directory part of `path` (relative to `dirfd`) to a canonical path in `out`, and says
// whether the last component is `snapshot`. Returns false when the directory cannot be resolved.
bool resolve_target(int dirfd, const char* path, char (&out)[PATH_MAX], bool& is_snapshot) {
  const char* slash = strrchr(path, '/');
  is_snapshot = strcmp(slash ? slash + 1 : path, "snapshot") == 0;
  char joined[PATH_MAX];
  std::size_t len = 0;
  joined[0] = '\0';
  if (path[0] != '/') {
    char origin[PATH_MAX];
    if (dirfd == AT_FDCWD) {
      if (!::getcwd(origin, sizeof origin)) return false;
    } else {
      char link[64];
      snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
      ssize_t n = ::readlink(link, origin, sizeof origin - 1);
      if (n <= 0) return false;
      origin[n] = '\0';
    }
    if (!append(joined, len, origin, strlen(origin)) || !append(joined, len, "/", 1)) return false;
  }
  if (slash && !append(joined, len, path, static_cast<std::size_t>(slash - path) + 1)) return false;
  if (len == 0 && !append(joined, len, ".", 1)) return false;
  return ::realpath(joined, out) != nullptr;
}

// Runs one rename through the fault modes; `go` performs the real rename.
template <class Go>
int renaming(int dirfd, const char* to, const char* call, Go go) {
  mode m = current_mode();
  if (m != mode::eio_rename && m != mode::kill_before_rename && m != mode::kill_after_rename) return go();
  char dir[PATH_MAX];
  bool is_snapshot = false;
  if (!resolve_target(dirfd, to, dir, is_snapshot) || !under_data_dir(dir, strlen(dir))) return go();
  if (m == mode::eio_rename) {
    if (!take_fault()) return go();
    note(m, call, to, "failed with EIO");
    errno = EIO;
    return -1;
  }
  if (!is_snapshot) return go();
  if (m == mode::kill_before_rename) {
    note(m, call, to, "killed the process before the rename");
    ::kill(::getpid(), SIGKILL);
    for (;;)
      ::pause();  // SIGKILL to oneself is delivered before kill() returns; this is a backstop
  }
  int r = go();
  if (r == 0) {
    note(m, call, to, "killed the process after the rename");
    ::kill(::getpid(), SIGKILL);
  }
  return r;
}

// ---- the power-cut recorder ---------------------------------------------------------------------------
char record_dir[PATH_MAX];
std::size_t record_dir_len = 0;  // 0: not recording
pthread_mutex_t record_mu = PTHREAD_MUTEX_INITIALIZER;

bool write_whole(int fd, const char* data, std::size_t n) {
  auto w = next(next_write, "write");
  while (n > 0) {
    ssize_t k = w(fd, data, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    data += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

// Writes what `fill` produces to record/<name> through a temporary and a rename, so that a test reading the
// record while the process runs (or after it was killed) sees a whole file.
template <class Fill>
void record_file_as(const char* name, Fill fill) {
  char tmp[2 * PATH_MAX], final_path[2 * PATH_MAX];  // record_dir plus a short name
  snprintf(tmp, sizeof tmp, "%s/%s.tmp", record_dir, name);
  snprintf(final_path, sizeof final_path, "%s/%s", record_dir, name);
  int out = ::open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return;
  bool ok = fill(out);
  ::close(out);
  if (ok) next(next_rename, "rename")(tmp, final_path);
}

// The data directory's listing as it is now, made the durable one.
void record_listing() {
  record_file_as("dir.list", [](int out) {
    DIR* d = ::opendir(data_dir);
    if (!d) return true;  // not created yet: nothing in it is durable
    bool ok = true;
    while (dirent* e = ::readdir(d)) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      char line[PATH_MAX + 32];
      int n = snprintf(line, sizeof line, "%llu %s\n", static_cast<unsigned long long>(e->d_ino), e->d_name);
      ok = ok && write_whole(out, line, static_cast<std::size_t>(n));
    }
    ::closedir(d);
    return ok;
  });
}

// Copies `in` from `from` to its end onto `out`.
bool copy_from(int in, off_t from, int out) {
  if (::lseek(in, from, SEEK_SET) != from) return false;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0;
    if (!write_whole(out, buf, static_cast<std::size_t>(n))) return false;
  }
}

// Whether the last bytes (up to 4 KiB) of the record `rec` of `size` bytes are those of `in` at the same
// offset: the file only grew since (an inode number reused by a new file almost never passes).
bool only_grew(int in, int rec, off_t size) {
  char a[4096], b[4096];
  const off_t n = size < off_t{sizeof a} ? size : off_t{sizeof a};
  return ::pread(in, a, static_cast<std::size_t>(n), size - n) == n &&
         ::pread(rec, b, static_cast<std::size_t>(n), size - n) == n &&
         memcmp(a, b, static_cast<std::size_t>(n)) == 0;
}

// The whole content of the file at `path` (inode `ino`), made its durable content. A file that only grew
// since its last record (a log: batond only appends to it) has just the new bytes appended to the record;
// anything else is copied whole.
void record_content(const char* path, ino_t ino) {
  char name[64], recorded[2 * PATH_MAX];
  snprintf(name, sizeof name, "ino-%llu", static_cast<unsigned long long>(ino));
  snprintf(recorded, sizeof recorded, "%s/%s", record_dir, name);
  int in = ::open(path, O_RDONLY | O_CLOEXEC);
  if (in < 0) return;
  struct stat now, before;
  if (::fstat(in, &now) == 0 && ::stat(recorded, &before) == 0 && before.st_size <= now.st_size) {
    int out = ::open(recorded, O_RDWR | O_APPEND | O_CLOEXEC);
    if (out >= 0 && !only_grew(in, out, before.st_size)) {
      ::close(out);
      out = -1;
    }
    if (out >= 0) {
      copy_from(in, before.st_size, out);
      ::close(out);
      ::close(in);
      return;
    }
  }
  record_file_as(name, [in](int out) { return copy_from(in, 0, out); });
  ::close(in);
}

// After a successful sync of `fd`: what it made durable.
void record_sync(int fd) {
  if (record_dir_len == 0) return;
  char path[PATH_MAX];
  if (!fd_in_data_dir(fd, path)) return;
  struct stat st;
  if (::fstat(fd, &st) != 0) return;
  pthread_mutex_lock(&record_mu);
  if (S_ISDIR(st.st_mode)) {
    if (strcmp(path, data_dir) == 0) record_listing();
  } else if (S_ISREG(st.st_mode)) {
    // Through /proc, which opens the file for reading whatever the fd's own mode.
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    record_content(link, st.st_ino);
  }
  pthread_mutex_unlock(&record_mu);
}

// The first recording process takes the directory as it finds it as durable.
void record_start() {
  char list[2 * PATH_MAX];
  snprintf(list, sizeof list, "%s/dir.list", record_dir);
  struct stat st;
  if (::stat(list, &st) == 0) return;
  record_listing();
  DIR* d = ::opendir(data_dir);
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    char path[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", data_dir, e->d_name);
    if (::stat(path, &st) == 0 && S_ISREG(st.st_mode)) record_content(path, st.st_ino);
  }
  ::closedir(d);
}

__attribute__((constructor)) void load() {
  const char* dir = ::getenv("BATON_FAULTFS_DIR");
  const char* control = ::getenv("BATON_FAULTFS_CONTROL");
  if (!dir || !*dir || !control || !*control) return;
  if (strlen(control) >= sizeof control_path || strlen(dir) >= sizeof data_dir) return;
  strcpy(control_path, control);
  // Paths from /proc/self/fd are canonical: compare with the canonical directory (or, if it does not exist
  // yet, the name as given).
  if (!::realpath(dir, data_dir)) strcpy(data_dir, dir);
  data_dir_len = strlen(data_dir);
  while (data_dir_len > 1 && data_dir[data_dir_len - 1] == '/')
    data_dir[--data_dir_len] = '\0';
  const char* record = ::getenv("BATON_FAULTFS_RECORD");
  if (record && *record && strlen(record) < sizeof record_dir - 64) {
    strcpy(record_dir, record);
    record_dir_len = strlen(record_dir);
    record_start();
  }
}

int fail(int err) {
  errno = err;
  return -1;
}

}  // namespace

extern "C" {

ssize_t write(int fd, const void* buf, size_t n) {
  if (int err = fault_for(fd, false, "write")) return fail(err);
  return next(next_write, "write")(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t at) {
  if (int err = fault_for(fd, false, "pwrite")) return fail(err);
  return next(next_pwrite, "pwrite")(fd, buf, n, at);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off_t at) {
  if (int err = fault_for(fd, false, "pwrite64")) return fail(err);
  return next(next_pwrite64, "pwrite64")(fd, buf, n, at);
}

ssize_t writev(int fd, const iovec* iov, int count) {
  if (int err = fault_for(fd, false, "writev")) return fail(err);
  return next(next_writev, "writev")(fd, iov, count);
}

ssize_t pwritev(int fd, const iovec* iov, int count, off_t at) {
  if (int err = fault_for(fd, false, "pwritev")) return fail(err);
  return next(next_pwritev, "pwritev")(fd, iov, count, at);
}

ssize_t pwritev64(int fd, const iovec* iov, int count, off_t at) {
  if (int err = fault_for(fd, false, "pwritev64")) return fail(err);
  return next(next_pwritev64, "pwritev64")(fd, iov, count, at);
}

ssize_t pwritev2(int fd, const iovec* iov, int count, off_t at, int flags) {
  if (int err = fault_for(fd, false, "pwritev2")) return fail(err);
  return next(next_pwritev2, "pwritev2")(fd, iov, count, at, flags);
}

int fsync(int fd) {
  if (int err = fault_for(fd, true, "fsync")) return fail(err);
  int r = next(next_fsync, "fsync")(fd);
  if (r == 0) record_sync(fd);
  return r;
}

int fdatasync(int fd) {
  if (int err = fault_for(fd, true, "fdatasync")) return fail(err);
  int r = next(next_fdatasync, "fdatasync")(fd);
  if (r == 0) record_sync(fd);
  return r;
}

int rename(const char* from, const char* to) noexcept {
  return renaming(AT_FDCWD, to, "rename", [&] { return next(next_rename, "rename")(from, to); });
}

int renameat(int from_dir, const char* from, int to_dir, const char* to) noexcept {
  return renaming(to_dir, to, "renameat",
                  [&] { return next(next_renameat, "renameat")(from_dir, from, to_dir, to); });
}

int renameat2(int from_dir, const char* from, int to_dir, const char* to, unsigned flags) noexcept {
  return renaming(to_dir, to, "renameat2",
                  [&] { return next(next_renameat2, "renameat2")(from_dir, from, to_dir, to, flags); });
}

}  // extern "C"
