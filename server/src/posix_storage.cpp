// SPDX-License-Identifier: Apache-2.0
// batond's data directory on the real file system (storage.hpp).
#include "storage.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace baton::server {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + std::strerror(err));
}

int fsync_dir_at(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  int rc = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return rc;
}

class posix_storage final : public storage {
 public:
  explicit posix_storage(fs::path dir) : dir_(std::move(dir)) {}
  ~posix_storage() override {
    if (lock_fd_ >= 0) ::close(lock_fd_);
  }

  const fs::path& path() const override { return dir_; }

  void take(bool create) override {
    if (lock_fd_ >= 0) return;  // taken already, by an earlier journal on this storage
    if (create)
      create_dir();
    else if (!fs::is_directory(dir_))
      throw std::runtime_error("data directory " + dir_.string() + " does not exist");
    // One server per data directory: a second one would hand out the same tokens.
    auto lock_path = dir_ / "LOCK";
    int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) fail("open " + lock_path.string(), errno);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK)
        throw std::runtime_error("data directory " + dir_.string() + " is in use by another batond");
      fail("lock " + lock_path.string(), err);
    }
    lock_fd_ = fd;
  }

  // A batond that created the directories and died before their fsync (or whose fsync failed) left names
  // that a power cut can still take away, and the next start sees them as existing. The parent must
  // succeed; above it, a directory this user may not open, or a file system that cannot fsync a directory,
  // is passed over (the data directory's own entries do not depend on it).
  int sync_parents() override {
    const fs::path abs = fs::absolute(dir_);
    if (int err = fsync_dir_at(abs.parent_path())) return err;
    for (fs::path p = abs.parent_path(); p != p.parent_path();) {
      p = p.parent_path();
      int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) continue;
      int err = ::fsync(fd) == 0 ? 0 : errno;
      ::close(fd);
      if (err != 0 && err != EINVAL && err != EROFS && err != EACCES) return err;
    }
    return 0;
  }

  int list(std::vector<std::string>& names) override {
    std::error_code ec;
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec))
      names.push_back(it->path().filename().string());
    return ec ? ec.value() : 0;
  }

  int read(const std::string& name, std::string& out) override {
    int fd = ::open((dir_ / name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    char buf[1 << 16];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::close(fd);
        return err;
      }
      if (n == 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return 0;
  }

  int open(const std::string& name, bool truncate) override {
    int fd = ::open((dir_ / name).c_str(),
                    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644);
    return fd >= 0 ? fd : -errno;
  }

  int write(int fd, std::string_view data) override {
    while (!data.empty()) {
      ssize_t n = ::write(fd, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return 0;
  }

  int sync_data(int fd) override { return ::fdatasync(fd) == 0 ? 0 : errno; }
  int sync(int fd) override { return ::fsync(fd) == 0 ? 0 : errno; }
  void close(int fd) override { ::close(fd); }

  int truncate(const std::string& name, std::uint64_t size) override {
    return ::truncate((dir_ / name).c_str(), static_cast<off_t>(size)) == 0 ? 0 : errno;
  }
  int rename(const std::string& from, const std::string& to) override {
    return ::rename((dir_ / from).c_str(), (dir_ / to).c_str()) == 0 ? 0 : errno;
  }
  int link(const std::string& from, const std::string& to) override {
    return ::link((dir_ / from).c_str(), (dir_ / to).c_str()) == 0 ? 0 : errno;
  }
  int remove(const std::string& name) override { return ::unlink((dir_ / name).c_str()) == 0 ? 0 : errno; }
  int sync_dir() override { return fsync_dir_at(dir_); }

 private:
  // Creates the directory and any missing parent, making each new entry durable in its parent: a data
  // directory that vanishes in a power cut would take the whole log with it.
  void create_dir() {
    std::vector<fs::path> missing;
    for (fs::path p = fs::absolute(dir_); !p.empty() && !fs::exists(p); p = p.parent_path()) {
      missing.push_back(p);
      if (p == p.parent_path()) break;
    }
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) throw std::runtime_error("create data directory " + dir_.string() + ": " + ec.message());
    for (auto it = missing.rbegin(); it != missing.rend(); ++it)
      if (int err = fsync_dir_at(it->parent_path()))
        fail("fsync directory " + it->parent_path().string(), err);
  }

  fs::path dir_;
  int lock_fd_ = -1;
};

}  // namespace

std::unique_ptr<storage> make_posix_storage(fs::path dir) {
  return std::make_unique<posix_storage>(std::move(dir));
}

}  // namespace baton::server
