#include "journal.hpp"

#include "baton/common/log.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <stdexcept>

namespace baton::server {
namespace fs = std::filesystem;
namespace errc = boost::system::errc;

namespace {

std::string errno_text(int err) { return std::strerror(err); }

[[noreturn]] void fail(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + errno_text(err));
}

bool write_all(int fd, const char* data, std::size_t size, int& err) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("open directory " + dir.string(), errno);
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    fail("fsync directory " + dir.string(), err);
  }
  ::close(fd);
}

std::string read_file(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("open " + path.string(), errno);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      fail("read " + path.string(), err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

// Parses "wal-<16 hex>.log"; returns false for any other name.
bool parse_wal_name(const std::string& name, std::uint64_t& generation) {
  if (name.size() != 4 + 16 + 4 || name.rfind("wal-", 0) != 0 || name.substr(20) != ".log") return false;
  generation = 0;
  for (char c : name.substr(4, 16)) {
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else return false;
    generation = generation * 16 + static_cast<std::uint64_t>(v);
  }
  return true;
}

}  // namespace

void replay_record(lock_table& table, const wal_record& r, time_point now) {
  switch (r.type) {
    case record_type::acquire:
      table.restore(r.key, r.owner, r.token, milliseconds(r.ttl_ms), now, r.client);
      break;
    case record_type::release:
    case record_type::expire:
      table.forget(r.key, r.token);
      break;
    case record_type::extend:
      table.raise_restore_ttl(r.key, r.token, milliseconds(r.ttl_ms), now);
      break;
    case record_type::snapshot_header:
    case record_type::snapshot_end:
      break;
  }
}

journal::journal(journal_options options, server_metrics* metrics)
    : options_(std::move(options)), metrics_(metrics) {}

journal::~journal() {
  stop();
  if (wal_fd_ >= 0) ::close(wal_fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

fs::path journal::wal_path(std::uint64_t generation) const {
  char name[32];
  std::snprintf(name, sizeof name, "wal-%016" PRIx64 ".log", generation);
  return options_.dir / name;
}

recovery_stats journal::open(lock_table& table, time_point now) {
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec) throw std::runtime_error("create data directory " + options_.dir.string() + ": " + ec.message());

  // One server per data directory: a second one would hand out the same tokens.
  auto lock_path = options_.dir / "LOCK";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) fail("open " + lock_path.string(), errno);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      throw std::runtime_error("data directory " + options_.dir.string() + " is in use by another batond");
    fail("lock " + lock_path.string(), errno);
  }

  recovery_stats stats;
  auto snapshot_path = options_.dir / "snapshot";
  if (fs::exists(snapshot_path)) {
    // A snapshot is only ever installed by rename after fsync, so any defect in it is real corruption:
    // refuse to start rather than guess which tokens were issued.
    std::string data = read_file(snapshot_path);
    std::string_view in(data);
    std::size_t used = 0;
    auto header = decode_record(in, used);
    if (!header || header->type != record_type::snapshot_header)
      throw std::runtime_error("snapshot " + snapshot_path.string() + " is corrupt (bad header)");
    in.remove_prefix(used);
    stats.generation = header->ttl_ms;
    bool ended = false;
    while (!in.empty()) {
      auto r = decode_record(in, used);
      if (!r) throw std::runtime_error("snapshot " + snapshot_path.string() + " is corrupt (bad record)");
      in.remove_prefix(used);
      if (r->type == record_type::snapshot_end) {
        if (r->token != stats.snapshot_entries)
          throw std::runtime_error("snapshot " + snapshot_path.string() + " is corrupt (entry count)");
        ended = true;
        break;
      }
      if (r->type != record_type::acquire)
        throw std::runtime_error("snapshot " + snapshot_path.string() + " is corrupt (record type)");
      replay_record(table, *r, now);
      ++stats.snapshot_entries;
    }
    if (!ended) throw std::runtime_error("snapshot " + snapshot_path.string() + " is corrupt (no end)");
    table.observe_token(header->token);
  }
  generation_ = stats.generation;

  // Logs of older generations are covered by the snapshot; a newer one cannot exist, since a generation's
  // log is only created after its snapshot is durable.
  for (const auto& entry : fs::directory_iterator(options_.dir)) {
    std::uint64_t g;
    if (!parse_wal_name(entry.path().filename().string(), g)) continue;
    if (g < generation_) {
      fs::remove(entry.path(), ec);
    } else if (g > generation_) {
      throw std::runtime_error("log " + entry.path().string() + " is newer than the snapshot; refusing to guess");
    }
  }

  auto path = wal_path(generation_);
  bool existed = fs::exists(path);
  if (existed) {
    std::string data = read_file(path);
    std::string_view in(data);
    std::size_t offset = 0;
    while (offset < data.size()) {
      std::size_t used = 0;
      auto r = decode_record(in.substr(offset), used);
      if (!r) break;
      replay_record(table, *r, now);
      ++stats.records;
      offset += used;
    }
    if (offset < data.size()) {
      // A torn tail: the write of the last batch was cut by a crash. It was never acknowledged (answers
      // wait for fsync), so cutting it off loses nothing a client was told; it must go before new appends.
      stats.torn_bytes = data.size() - offset;
      log::warn("wal_torn_tail", {{"file", path.string()}, {"offset", offset}, {"bytes", stats.torn_bytes}});
      if (::truncate(path.c_str(), static_cast<off_t>(offset)) != 0) fail("truncate " + path.string(), errno);
    }
    file_size_ = offset;
  }
  wal_fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (wal_fd_ < 0) fail("open " + path.string(), errno);
  if (::fsync(wal_fd_) != 0) fail("fsync " + path.string(), errno);
  if (!existed) fsync_dir(options_.dir);

  stats.restored_leases = table.size();
  stats.last_token = table.last_token();
  return stats;
}

void journal::start(snapshot_source source) {
  snapshot_source_ = std::move(source);
  writer_ = std::thread([this] { run(); });
}

std::uint64_t journal::append(record_type type, std::uint64_t token, std::uint64_t ttl_ms,
                              std::string_view key, std::string_view owner, std::string_view client) {
  std::lock_guard lk(mu_);
  encode_record(type, token, ttl_ms, key, owner, pending_, client);
  ++pending_records_;
  std::uint64_t lsn = ++last_lsn_;
  if (pending_records_ == 1) cv_.notify_one();
  return lsn;
}

void journal::mark_cut() {
  std::lock_guard lk(mu_);
  cut_offset_ = pending_.size();
  cut_lsn_ = last_lsn_;
  cut_marked_ = true;
}

std::uint64_t journal::last_appended() const {
  std::lock_guard lk(mu_);
  return last_lsn_;
}

std::uint64_t journal::durable() const {
  std::lock_guard lk(mu_);
  return durable_lsn_;
}

bool journal::failed() const {
  std::lock_guard lk(mu_);
  return failed_;
}

std::string journal::failure_message() const {
  std::lock_guard lk(mu_);
  return failure_;
}

void journal::enqueue_waiter(std::uint64_t lsn, waiter h) {
  std::vector<waiter> ready;
  boost::system::error_code ec;
  {
    std::lock_guard lk(mu_);
    if (lsn <= durable_lsn_) {
      ready.push_back(std::move(h));
    } else if (failed_ || stopping_) {
      ec = errc::make_error_code(errc::io_error);
      ready.push_back(std::move(h));
    } else {
      waiters_.emplace(lsn, std::move(h));
    }
  }
  complete_waiters(ready, ec);
}

void journal::complete_waiters(std::vector<waiter>& ready, boost::system::error_code ec) {
  for (auto& w : ready)
    boost::asio::post(w.executor, [h = std::move(w.handler), ec]() mutable { std::move(h)(ec); });
  ready.clear();
}

void journal::poison(const std::string& what, int err) {
  std::vector<waiter> ready;
  {
    std::lock_guard lk(mu_);
    if (!failed_) {
      failed_ = true;
      failure_ = what + ": " + errno_text(err);
    }
    for (auto& [lsn, h] : waiters_) ready.push_back(std::move(h));
    waiters_.clear();
  }
  if (metrics_) metrics_->storage_errors.fetch_add(1, std::memory_order_relaxed);
  log::error("wal_failed", {{"what", what}, {"error", errno_text(err)}});
  complete_waiters(ready, errc::make_error_code(errc::io_error));
}

bool journal::write_batch(const std::string& batch, std::uint64_t up_to_lsn, std::size_t records) {
  auto started = clock::now();
  int err = 0;
  if (!write_all(wal_fd_, batch.data(), batch.size(), err)) {
    poison("write " + wal_path(generation_).string(), err);
    return false;
  }
  if (::fdatasync(wal_fd_) != 0) {
    poison("fdatasync " + wal_path(generation_).string(), errno);
    return false;
  }
  file_size_ += batch.size();
  if (metrics_) {
    metrics_->fsync_batch_records.observe(static_cast<double>(records));
    metrics_->fsync_seconds.observe(std::chrono::duration<double>(clock::now() - started).count());
  }
  std::vector<waiter> ready;
  {
    std::lock_guard lk(mu_);
    durable_lsn_ = std::max(durable_lsn_, up_to_lsn);
    auto end = waiters_.upper_bound(durable_lsn_);
    for (auto it = waiters_.begin(); it != end; ++it) ready.push_back(std::move(it->second));
    waiters_.erase(waiters_.begin(), end);
  }
  complete_waiters(ready, {});
  return true;
}

void journal::run() {
  std::string batch;
  for (;;) {
    std::size_t records;
    std::uint64_t up_to;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return !pending_.empty() || stopping_; });
      if (pending_.empty() || failed_) break;  // stopping with nothing left, or poisoned
      batch.clear();
      batch.swap(pending_);  // keeps both buffers' capacity alive across batches
      records = pending_records_;
      pending_records_ = 0;
      up_to = last_lsn_;
    }
    if (!write_batch(batch, up_to, records)) break;
    if (file_size_ > options_.compact_bytes && snapshot_source_) {
      try {
        compact();
      } catch (const std::exception& e) {
        poison(std::string("compaction: ") + e.what(), EIO);
        break;
      }
    }
  }
  // Whatever is still waiting can never become durable through this writer.
  std::vector<waiter> ready;
  {
    std::lock_guard lk(mu_);
    for (auto& [lsn, h] : waiters_) ready.push_back(std::move(h));
    waiters_.clear();
  }
  complete_waiters(ready, errc::make_error_code(errc::io_error));
}

void journal::compact() {
  auto started = clock::now();
  auto [last_token, entries] = snapshot_source_();  // calls mark_cut() atomically with the table snapshot
  std::string head;
  std::uint64_t head_lsn;
  std::size_t head_records = 0;
  {
    std::lock_guard lk(mu_);
    if (!cut_marked_) throw std::runtime_error("snapshot source did not mark the cut");
    head = pending_.substr(0, cut_offset_);
    pending_.erase(0, cut_offset_);
    head_lsn = cut_lsn_;
    cut_marked_ = false;
  }
  // Records up to the cut belong to the old generation: make them durable there first.
  if (!head.empty() && !write_batch(head, head_lsn, head_records)) throw std::runtime_error("write failed");

  std::uint64_t next = generation_ + 1;
  std::string data;
  encode_record(record_type::snapshot_header, last_token, next, {}, {}, data);
  for (const auto& e : entries)
    encode_record(record_type::acquire, e.token, static_cast<std::uint64_t>(e.restore_ttl.count()), e.key,
                  e.owner, data, e.client);
  encode_record(record_type::snapshot_end, entries.size(), 0, {}, {}, data);

  auto tmp = options_.dir / "snapshot.tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("open " + tmp.string(), errno);
  int err = 0;
  if (!write_all(fd, data.data(), data.size(), err) || ::fsync(fd) != 0) {
    if (err == 0) err = errno;
    ::close(fd);
    fail("write " + tmp.string(), err);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), (options_.dir / "snapshot").c_str()) != 0) fail("rename snapshot", errno);
  fsync_dir(options_.dir);

  auto path = wal_path(next);
  int new_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (new_fd < 0) fail("open " + path.string(), errno);
  fsync_dir(options_.dir);
  auto old_path = wal_path(generation_);
  ::close(wal_fd_);
  wal_fd_ = new_fd;
  generation_ = next;
  file_size_ = 0;
  std::error_code ec;
  fs::remove(old_path, ec);
  log::info("wal_compacted", {{"generation", generation_},
                              {"entries", entries.size()},
                              {"snapshot_bytes", data.size()},
                              {"ms", std::chrono::duration_cast<milliseconds>(clock::now() - started).count()}});
}

void journal::stop() {
  {
    std::lock_guard lk(mu_);
    if (stopping_ && !writer_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

}  // namespace baton::server
