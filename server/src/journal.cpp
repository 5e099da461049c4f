// SPDX-License-Identifier: Apache-2.0
#include "journal.hpp"

#include "baton/common/log.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>

namespace baton::server {
namespace fs = std::filesystem;
namespace errc = boost::system::errc;

namespace {

// The smallest encoded record: framing, type, token, ttl and two empty strings. A damaged stretch of N
// bytes can have held at most N / min_record_bytes records, hence at most that many grants.
constexpr std::uint64_t min_record_bytes = record_header_size + 1 + 8 + 8 + 4 + 4;

std::string errno_text(int err) {
  return std::strerror(err);
}

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

// Creates `dir` and any missing parent, making each new entry durable in its parent: a data directory
// that vanishes in a power cut would take the whole log with it.
void create_data_dir(const fs::path& dir) {
  std::vector<fs::path> missing;
  for (fs::path p = fs::absolute(dir); !p.empty() && !fs::exists(p); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("create data directory " + dir.string() + ": " + ec.message());
  for (auto it = missing.rbegin(); it != missing.rend(); ++it)
    fsync_dir(it->parent_path());
}

// Makes the data directory's own name durable in its parent, and the parent's in its own, up to the root,
// at every start: a batond that created them and died before their fsync (or whose fsync failed) left
// names that a power cut can still take away, and the next start sees them as existing. The parent must
// succeed; above it, a directory this user may not open, or a file system that cannot fsync a directory,
// is passed over (the data directory's own entries do not depend on it).
void fsync_ancestors(const fs::path& dir) {
  const fs::path abs = fs::absolute(dir);
  fsync_dir(abs.parent_path());
  for (fs::path p = abs.parent_path(); p != p.parent_path();) {
    p = p.parent_path();
    int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0 && err != EINVAL && err != EROFS && err != EACCES) fail("fsync directory " + p.string(), err);
  }
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
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else
      return false;
    generation = generation * 16 + static_cast<std::uint64_t>(v);
  }
  return true;
}

fs::path wal_path_in(const fs::path& dir, std::uint64_t generation) {
  char name[32];
  std::snprintf(name, sizeof name, "wal-%016" PRIx64 ".log", generation);
  return dir / name;
}

// The logs in `dir`, oldest first.
std::vector<std::pair<std::uint64_t, fs::path>> list_logs(const fs::path& dir) {
  std::vector<std::pair<std::uint64_t, fs::path>> logs;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::uint64_t g;
    if (parse_wal_name(entry.path().filename().string(), g)) logs.emplace_back(g, entry.path());
  }
  std::sort(logs.begin(), logs.end());
  return logs;
}

// Reads the snapshot, if any, into `table`; returns its generation (0 without one). A snapshot is only
// ever installed by rename after fsync, so any defect in it is real damage: refuse rather than guess which
// tokens were issued.
std::uint64_t load_snapshot(const fs::path& dir, lock_table& table, time_point now, std::uint64_t& entries) {
  auto path = dir / "snapshot";
  entries = 0;
  if (!fs::exists(path)) return 0;
  std::string data = read_file(path);
  std::string_view in(data);
  std::size_t used = 0;
  auto damaged = [&](const char* why) { return journal_damaged(path, data.size() - in.size(), why); };
  auto header = decode_record(in, used);
  if (!header || header->type != record_type::snapshot_header) throw damaged("bad snapshot header");
  in.remove_prefix(used);
  for (;;) {
    auto r = decode_record(in, used);
    if (!r) throw damaged(in.empty() ? "snapshot has no end record" : "bad snapshot record");
    if (r->type == record_type::snapshot_end) {
      if (r->token != entries) throw damaged("snapshot entry count does not match");
      break;
    }
    if (r->type != record_type::acquire) throw damaged("unexpected record type in snapshot");
    in.remove_prefix(used);
    replay_record(table, *r, now);
    ++entries;
  }
  table.observe_token(header->token);
  return header->ttl_ms;
}

// What replaying the front of a log found.
struct log_scan {
  std::size_t valid = 0;  // bytes of whole batches (and bare records) from the start
  bool framed = false;    // a batch frame was among them: from there on, only whole batches count
};

// Decodes the unit at the front of `data`: a whole batch (its frame and the body the frame describes) or,
// in a log written before frames, a bare record. Appends its records to `out` and returns its size, or 0
// when `data` does not start with a whole valid unit (`out` then holds nothing new).
std::size_t decode_unit(std::string_view data, std::vector<wal_record>& out, bool& is_batch) {
  std::size_t used = 0;
  auto r = decode_record(data, used);
  if (!r) return 0;
  is_batch = r->type == record_type::batch;
  if (!is_batch) {
    out.push_back(std::move(*r));
    return used;
  }
  const std::size_t before = out.size();
  if (data.size() - used < r->token || !decode_batch(*r, data.substr(used, r->token), out)) {
    out.resize(before);
    return 0;
  }
  return used + r->token;
}

// Replays whole units from the front of `data`; `valid` is how many bytes they span (the rest, if any,
// starts with a unit that does not decode). `records` counts the records replayed, frames not included.
log_scan replay_valid_prefix(std::string_view data, lock_table& table, time_point now,
                             std::uint64_t& records) {
  log_scan scan;
  std::vector<wal_record> unit;
  while (scan.valid < data.size()) {
    unit.clear();
    bool is_batch = false;
    std::size_t used = decode_unit(data.substr(scan.valid), unit, is_batch);
    if (used == 0) break;
    for (const auto& r : unit)
      replay_record(table, r, now);
    records += unit.size();
    scan.framed = scan.framed || is_batch;
    scan.valid += used;
  }
  return scan;
}

// The first offset at or after `from` where a whole valid unit starts that could only be there if the
// damaged stretch before it was acknowledged. In a framed log that is a whole batch: the records inside
// an incomplete last batch decode too, but none of them was acknowledged. Before frames, any record.
std::optional<std::size_t> next_acknowledged(std::string_view data, std::size_t from, bool framed) {
  std::vector<wal_record> unit;
  for (std::size_t at = from; at + min_record_bytes <= data.size(); ++at) {
    unit.clear();
    bool is_batch = false;
    if (decode_unit(data.substr(at), unit, is_batch) != 0 && (is_batch || !framed)) return at;
  }
  return std::nullopt;
}

// A batch written outside group commit: its frame, then `records` (encoded, `count` of them; none: the empty
// frame that starts a log's framed part).
std::string framed_batch(std::string_view records = {}, std::size_t count = 0) {
  std::string batch(batch_frame_size, '\0');
  batch.append(records);
  encode_batch_frame(records, count, batch.data());
  return batch;
}

// The most grants a stretch of `bytes` lost bytes can have held: each took a record of at least
// min_record_bytes.
std::uint64_t grants_bound(std::uint64_t bytes) {
  return (bytes + min_record_bytes - 1) / min_record_bytes;
}

std::string encode_snapshot(std::uint64_t generation, std::uint64_t last_token,
                            const std::vector<snapshot_entry>& entries) {
  std::string data;
  encode_record(record_type::snapshot_header, last_token, generation, {}, {}, data);
  for (const auto& e : entries)
    encode_record(record_type::acquire, e.token, static_cast<std::uint64_t>(e.restore_ttl.count()), e.key,
                  e.owner, data, e.client, e.value);
  encode_record(record_type::snapshot_end, entries.size(), 0, {}, {}, data);
  return data;
}

// Writes `data` to `path` and fsyncs it (not yet durable in the directory). The data goes out a MiB at a
// time, each forced to disk before the next: a snapshot of many MiB written at once would queue ahead of the
// log's own fdatasync in the device and delay every durable answer behind it.
void write_durably(const fs::path& path, const std::string& data) {
  constexpr std::size_t chunk = 1 << 20;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("open " + path.string(), errno);
  int err = 0;
  std::size_t at = 0;
  do {
    const std::size_t n = std::min(chunk, data.size() - at);
    if (!write_all(fd, data.data() + at, n, err)) {
      ::close(fd);
      fail("write " + path.string(), err);
    }
    if (::fdatasync(fd) != 0) {
      err = errno;
      ::close(fd);
      fail("fdatasync " + path.string(), err);
    }
    at += n;
  } while (at < data.size());
  if (::fsync(fd) != 0) {
    err = errno;
    ::close(fd);
    fail("fsync " + path.string(), err);
  }
  ::close(fd);
}

void rename_durably(const fs::path& from, const fs::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) fail("rename " + from.string() + " to " + to.string(), errno);
  fsync_dir(to.parent_path());
}

int lock_data_dir(const fs::path& dir) {
  // One server per data directory: a second one would hand out the same tokens.
  auto lock_path = dir / "LOCK";
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail("open " + lock_path.string(), errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK)
      throw std::runtime_error("data directory " + dir.string() + " is in use by another batond");
    fail("lock " + lock_path.string(), err);
  }
  return fd;
}

// Checks that the logs form one unbroken run starting at the snapshot's generation (logs older than the
// snapshot are covered by it and dropped from the list; the caller deletes them).
void check_log_sequence(const fs::path& dir, std::uint64_t snapshot_generation,
                        std::vector<std::pair<std::uint64_t, fs::path>>& logs,
                        std::vector<fs::path>* covered) {
  auto first_kept =
      std::find_if(logs.begin(), logs.end(), [&](const auto& l) { return l.first >= snapshot_generation; });
  if (covered)
    for (auto it = logs.begin(); it != first_kept; ++it)
      covered->push_back(it->second);
  logs.erase(logs.begin(), first_kept);
  std::uint64_t expect = snapshot_generation;
  for (const auto& [g, path] : logs) {
    // The snapshot of generation S is installed only once log S exists, log G + 1 is created only once
    // log G is complete, and no log but the first one (0) exists without a snapshot: a gap means a file
    // was removed by hand.
    if (g != expect)
      throw std::runtime_error("log " + wal_path_in(dir, expect).string() + " is missing (found " +
                               path.filename().string() + "); refusing to guess what it held");
    expect = g + 1;
  }
}

}  // namespace

journal_damaged::journal_damaged(fs::path f, std::uint64_t at, std::string why)
    : std::runtime_error(f.string() + " is damaged at byte offset " + std::to_string(at) + " (" + why + ")"),
      file(std::move(f)),
      offset(at) {}

void replay_record(lock_table& table, const wal_record& r, time_point now) {
  switch (r.type) {
    case record_type::acquire:
      table.restore(r.key, r.owner, r.token, milliseconds(r.ttl_ms), now, r.client, r.value);
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
    case record_type::batch:  // a frame: its records are replayed one by one
      break;
    case record_type::token_floor:
      table.observe_token(r.token);
      break;
  }
}

// Where the waiters of one executor complete. A group commit posts one handler per executor that
// completes all that executor's waiters of the batch in LSN order, instead of one handler per waiter (each
// an allocation, the scheduler's lock and perhaps a wake-up). The handler owns its waiters, so an executor
// that never runs it destroys them with it, as it destroyed the single handlers before. Completed vectors
// come back here and are filled again, so a batch allocates nothing once the vectors are large enough.
class journal::completion_queue : public std::enable_shared_from_this<completion_queue> {
 public:
  struct entry {
    handler_type handler;
    boost::system::error_code ec;
  };
  using batch = std::vector<entry>;

  explicit completion_queue(boost::asio::any_io_executor ex) : executor_(std::move(ex)) {}

  const boost::asio::any_io_executor& executor() const { return executor_; }

  /// An empty vector, with the capacity of one that completed before when there is one.
  batch take_spare() {
    std::lock_guard lk(mu_);
    if (spares_.empty()) return {};
    batch b = std::move(spares_.back());
    spares_.pop_back();
    return b;
  }

  /// Completes `b`'s entries, in order, in one handler on the executor.
  void post(batch b) {
    boost::asio::post(executor_, [q = shared_from_this(), b = std::move(b)]() mutable {
      for (auto& e : b)
        std::move(e.handler)(e.ec);
      b.clear();
      q->give_back(std::move(b));
    });
  }

  batch filling;  // guarded by the journal's mu_: this executor's waiters of the batch being completed

 private:
  void give_back(batch b) {
    std::lock_guard lk(mu_);
    if (spares_.size() < max_spares) spares_.push_back(std::move(b));
  }

  static constexpr std::size_t max_spares = 2;
  boost::asio::any_io_executor executor_;
  std::mutex mu_;
  std::vector<batch> spares_;  // guarded by mu_
};

struct journal::ready_batch {
  completion_queue* queue;
  completion_queue::batch entries;
};

journal::journal(journal_options options, server_metrics* metrics)
    : options_(std::move(options)), metrics_(metrics) {}

journal::~journal() {
  stop();
  if (wal_fd_ >= 0) ::close(wal_fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

fs::path journal::wal_path(std::uint64_t generation) const {
  return wal_path_in(options_.dir, generation);
}

recovery_stats journal::open(lock_table& table, time_point now) {
  create_data_dir(options_.dir);
  lock_fd_ = lock_data_dir(options_.dir);
  std::error_code ec;
  fs::remove(options_.dir / "snapshot.tmp", ec);  // a compaction cut short by a crash

  recovery_stats stats;
  stats.generation = load_snapshot(options_.dir, table, now, stats.snapshot_entries);

  auto logs = list_logs(options_.dir);
  std::vector<fs::path> covered;
  check_log_sequence(options_.dir, stats.generation, logs, &covered);
  for (const auto& p : covered)
    fs::remove(p, ec);  // a crash between snapshot install and their removal

  bool last_framed = false, floor_raised = false;
  for (std::size_t i = 0; i < logs.size(); ++i) {
    const auto& path = logs[i].second;
    std::string data = read_file(path);
    const auto scan = replay_valid_prefix(data, table, now, stats.records);
    const std::size_t valid = scan.valid;
    bool last = i + 1 == logs.size();
    if (valid < data.size()) {
      // Only the last batch of the last log may be incomplete: it was never acknowledged (answers wait for
      // its fdatasync), so cutting it loses nothing a client was told, even when a power cut kept some of
      // its sectors and lost others. Anything else (a bad record in an older, complete log, or a whole
      // batch after the bad one) is damage to acknowledged data.
      if (!last) throw journal_damaged(path, valid, "a record does not decode in a complete log");
      if (auto next = next_acknowledged(data, valid + 1, scan.framed && !options_.defects.ignore_batch_frames);
          next && !options_.defects.cut_at_damaged_record)
        throw journal_damaged(
            path, valid, "a record does not decode and a valid one follows at byte " + std::to_string(*next));
      stats.torn_bytes = data.size() - valid;
      // Damage to the last batch reads the same as a torn write, so the cut part may have been an
      // acknowledged batch that the disk lost: no token it could have held is issued again.
      table.observe_token(table.last_token() + grants_bound(stats.torn_bytes));
      floor_raised = true;
      log::warn("wal_torn_tail", {{"file", path.string()}, {"offset", valid}, {"bytes", stats.torn_bytes}});
      if (::truncate(path.c_str(), static_cast<off_t>(valid)) != 0) fail("truncate " + path.string(), errno);
    }
    if (last) {
      generation_ = logs[i].first;
      file_size_ = valid;
      last_framed = scan.framed;
    }
  }
  stats.log_files = logs.size();

  bool existed = !logs.empty();
  if (!existed) generation_ = stats.generation;
  auto path = wal_path(generation_);
  wal_fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (wal_fd_ < 0) fail("open " + path.string(), errno);
  // A log that holds no frame yet (new, or written before frames) gets one first, so that a batch torn by
  // a power cut is always read as a framed one: an empty one, or the batch of the token floor. The floor
  // a cut tail raised is logged before any answer, or a second restart before the next grant would go back
  // to the counter the cut left and could issue a token the lost bytes held.
  if (!last_framed || floor_raised) {
    std::string floor;
    if (floor_raised) encode_record(record_type::token_floor, table.last_token(), 0, {}, {}, floor);
    const std::string head = framed_batch(floor, floor_raised ? 1 : 0);
    if (int err = write_log(head)) fail("write " + path.string(), err);
    file_size_ += head.size();
  }
  // Everything replayed becomes durable before the first answer that depends on it: the last log's bytes
  // (a batch written before a failed fdatasync is still in the page cache, and was just replayed), the
  // truncation of its torn tail, and every name in the directory (a log created just before a crash or a
  // failed directory fsync, the snapshot's rename, the removal of covered logs), then the directory's own
  // name in its parents.
  if (options_.device)
    if (int err = sync_log()) fail("sync the log device", err);
  if (::fsync(wal_fd_) != 0) fail("fsync " + path.string(), errno);  // fsync: the truncation's size too
  fsync_dir(options_.dir);
  fsync_ancestors(options_.dir);

  stats.restored_leases = table.size();
  stats.last_token = table.last_token();
  if (metrics_) {
    metrics_->wal_bytes.store(file_size_, std::memory_order_relaxed);
    metrics_->last_token.store(stats.last_token, std::memory_order_relaxed);
  }
  return stats;
}

void journal::start() {
  writer_ = std::thread([this] { run_writer(); });
  compactor_ = std::thread([this] { run_compactor(); });
}

std::uint64_t journal::append(record_type type, std::uint64_t token, std::uint64_t ttl_ms,
                              std::string_view key, std::string_view owner, std::string_view client,
                              std::string_view value) {
  std::uint64_t lsn;
  bool first;
  {
    std::lock_guard lk(mu_);
    if (pending_.empty()) pending_.append(batch_frame_size, '\0');  // the frame, written at the batch's end
    encode_record(type, token, ttl_ms, key, owner, pending_, client, value);
    first = ++pending_records_ == 1;
    lsn = ++last_lsn_;
  }
  // Woken after the unlock, the writer takes mu_ at once instead of blocking on it again (two futex calls
  // per batch less). No wake-up is lost: the writer checks pending_ under mu_ before it waits.
  if (first) cv_.notify_one();
  return lsn;
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

std::uint64_t journal::compactions() const {
  std::lock_guard lk(mu_);
  return compactions_;
}

std::string journal::failure_message() const {
  std::lock_guard lk(mu_);
  return failure_;
}

journal::completion_queue* journal::queue_for_locked(const boost::asio::any_io_executor& ex) {
  for (auto& q : queues_)
    if (q->executor() == ex) return q.get();
  return queues_.emplace_back(std::make_shared<completion_queue>(ex)).get();
}

void journal::enqueue_waiter(std::uint64_t lsn, boost::asio::any_io_executor ex, handler_type handler) {
  boost::system::error_code ec;
  {
    std::lock_guard lk(mu_);
    if (lsn > durable_lsn_) {
      if (!failed_ && !writer_done_) {
        waiters_.emplace_back(lsn, queue_for_locked(ex), std::move(handler));
        return;
      }
      ec = errc::make_error_code(errc::io_error);
    }
  }
  boost::asio::post(ex, [h = std::move(handler), ec]() mutable { std::move(h)(ec); });
}

// Takes every waiter for a record up to `up_to` and groups them by executor, each group in LSN order;
// `to_post` gets the groups, to be posted outside mu_ (a post takes the executor's own lock).
void journal::take_waiters_locked(std::uint64_t up_to, boost::system::error_code ec,
                                  std::vector<ready_batch>& to_post) {
  std::sort(waiters_.begin(), waiters_.end(), [](const waiter& a, const waiter& b) { return a.lsn < b.lsn; });
  auto end =
      std::partition_point(waiters_.begin(), waiters_.end(), [&](const waiter& w) { return w.lsn <= up_to; });
  std::size_t first = to_post.size();
  for (auto it = waiters_.begin(); it != end; ++it) {
    auto& filling = it->queue->filling;
    if (filling.empty()) {
      if (filling.capacity() == 0) filling = it->queue->take_spare();
      to_post.push_back({it->queue, {}});
    }
    filling.push_back({std::move(it->handler), ec});
  }
  waiters_.erase(waiters_.begin(), end);
  for (std::size_t i = first; i < to_post.size(); ++i)
    to_post[i].entries = std::move(to_post[i].queue->filling);
}

void journal::post_queues(std::vector<ready_batch>& to_post) {
  for (auto& b : to_post)
    b.queue->post(std::move(b.entries));
  to_post.clear();
}

void journal::poison(const std::string& message) {
  std::vector<ready_batch> to_post;
  bool first = false;
  {
    std::lock_guard lk(mu_);
    if (!failed_) {
      failed_ = true;
      first = true;
      failure_ = message;
    }
    take_waiters_locked(UINT64_MAX, errc::make_error_code(errc::io_error), to_post);
  }
  cv_.notify_all();
  compact_cv_.notify_all();
  if (metrics_) {
    metrics_->storage_errors.fetch_add(1, std::memory_order_relaxed);
    metrics_->storage_healthy.store(0, std::memory_order_relaxed);
  }
  post_queues(to_post);
  if (first && on_failure_) on_failure_(message);
}

int journal::write_log(const std::string& batch) {
  if (options_.device) return options_.device->write(batch);
  int err = 0;
  return write_all(wal_fd_, batch.data(), batch.size(), err) ? 0 : err;
}

int journal::sync_log() {
  if (options_.device) return options_.device->sync();
  return ::fdatasync(wal_fd_) == 0 ? 0 : errno;
}

bool journal::write_batch(std::string& batch, std::uint64_t up_to_lsn, std::size_t records) {
  auto started = clock::now();
  encode_batch_frame(std::string_view(batch).substr(batch_frame_size), records, batch.data());
  if (int err = write_log(batch)) {
    poison("write " + wal_path(generation_).string() + ": " + errno_text(err));
    return false;
  }
  if (int err = sync_log()) {
    poison("fdatasync " + wal_path(generation_).string() + ": " + errno_text(err));
    return false;
  }
  file_size_ += batch.size();
  if (metrics_) {
    metrics_->wal_bytes.store(file_size_, std::memory_order_relaxed);
    metrics_->fsync_batch_records.observe(static_cast<double>(records));
    metrics_->fsync_seconds.observe(std::chrono::duration<double>(clock::now() - started).count());
  }
  {
    std::lock_guard lk(mu_);
    durable_lsn_ = std::max(durable_lsn_, up_to_lsn);
    take_waiters_locked(durable_lsn_, {}, batch_to_post_);
  }
  post_queues(batch_to_post_);
  return true;
}

void journal::run_writer() {
  std::string batch;
  for (;;) {
    std::size_t records;
    std::uint64_t up_to;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return !pending_.empty() || stopping_ || failed_; });
      if (pending_.empty() || failed_) break;  // stopping with nothing left, or poisoned
      take_batch_locked(batch, records, up_to);
    }
    if (!write_batch(batch, up_to, records)) break;
    if (!options_.device && file_size_ > options_.compact_bytes && !cut()) break;
  }
  end_writing();
}

void journal::take_batch_locked(std::string& batch, std::size_t& records, std::uint64_t& up_to) {
  batch.clear();
  batch.swap(pending_);  // keeps both buffers' capacity alive across batches
  records = pending_records_;
  pending_records_ = 0;
  up_to = last_lsn_;
}

bool journal::flush() {
  std::string batch;
  std::size_t records;
  std::uint64_t up_to;
  {
    std::lock_guard lk(mu_);
    if (failed_) return false;
    if (pending_.empty()) return true;
    take_batch_locked(batch, records, up_to);
  }
  return write_batch(batch, up_to, records);
}

void journal::end_writing() {
  // Whatever is still waiting can never become durable: no writer will run again.
  std::vector<ready_batch> to_post;
  {
    std::lock_guard lk(mu_);
    writer_done_ = true;
    take_waiters_locked(UINT64_MAX, errc::make_error_code(errc::io_error), to_post);
  }
  compact_cv_.notify_all();
  post_queues(to_post);
}

bool journal::cut() {
  {
    std::lock_guard lk(mu_);
    if (compacting_) return true;  // the previous cut is still being compacted; this log just grows
  }
  // Everything written so far to the current log is durable (write_batch fsynced it): it is complete, and
  // the compactor may read it while appends go to the next generation.
  std::uint64_t next = generation_ + 1;
  auto path = wal_path(next);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    poison("open " + path.string() + ": " + errno_text(errno));
    return false;
  }
  // The new log starts with an empty frame, durable before any batch follows it, so that its first batch
  // torn by a power cut reads as a framed one.
  const std::string marker = framed_batch();
  int err = 0;
  if (!write_all(fd, marker.data(), marker.size(), err) || ::fdatasync(fd) != 0) {
    if (err == 0) err = errno;
    ::close(fd);
    poison("write " + path.string() + ": " + errno_text(err));
    return false;
  }
  try {
    fsync_dir(options_.dir);
  } catch (const std::exception& e) {
    ::close(fd);
    poison(e.what());
    return false;
  }
  ::close(wal_fd_);
  wal_fd_ = fd;
  generation_ = next;
  file_size_ = marker.size();
  if (metrics_) metrics_->wal_bytes.store(file_size_, std::memory_order_relaxed);
  {
    std::lock_guard lk(mu_);
    compacting_ = true;
    compact_up_to_ = next;
  }
  compact_cv_.notify_one();
  return true;
}

void journal::run_compactor() {
  for (;;) {
    std::uint64_t up_to;
    {
      std::unique_lock lk(mu_);
      compact_cv_.wait(lk, [&] { return compact_up_to_ != 0 || writer_done_ || failed_; });
      if (compact_up_to_ == 0 || failed_) return;
      up_to = compact_up_to_;
      compact_up_to_ = 0;
    }
    try {
      compact(up_to);
    } catch (const std::exception& e) {
      poison(std::string("compaction: ") + e.what());
      return;
    }
    std::lock_guard lk(mu_);
    compacting_ = false;
    ++compactions_;
  }
}

void journal::compact(std::uint64_t up_to_generation) {
  auto started = clock::now();
  // Rebuild the table as of the cut from the files alone: they are complete and no longer written.
  lock_table table;
  std::uint64_t entries = 0, records = 0;
  const time_point now{};  // expiry instants do not matter here, only tokens and restore TTLs
  std::uint64_t from = load_snapshot(options_.dir, table, now, entries);
  for (std::uint64_t g = from; g < up_to_generation; ++g) {
    auto path = wal_path(g);
    std::string data = read_file(path);
    if (replay_valid_prefix(data, table, now, records).valid != data.size())
      throw std::runtime_error(path.string() + " no longer decodes after it was written and fsynced");
  }
  std::string data = encode_snapshot(up_to_generation, table.last_token(), table.snapshot());
  auto tmp = options_.dir / "snapshot.tmp";
  write_durably(tmp, data);
  rename_durably(tmp, options_.dir / "snapshot");
  for (std::uint64_t g = from; g < up_to_generation; ++g) {
    std::error_code ec;
    fs::remove(wal_path(g), ec);
  }
  log::info("wal_compacted",
            {{"generation", up_to_generation},
             {"entries", table.size()},
             {"records", records},
             {"snapshot_bytes", data.size()},
             {"ms", std::chrono::duration_cast<milliseconds>(clock::now() - started).count()}});
}

void journal::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  end_writing();  // also when the writer never started
  if (compactor_.joinable()) compactor_.join();
}

repair_report repair_data_dir(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw std::runtime_error("data directory " + dir.string() + " does not exist");
  int lock_fd = lock_data_dir(dir);
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } lock_guard{lock_fd};
  std::error_code ec;
  fs::remove(dir / "snapshot.tmp", ec);

  repair_report report;
  lock_table table;
  const time_point now{};
  std::uint64_t entries = 0, records = 0;
  std::uint64_t from = load_snapshot(dir, table, now, entries);  // a damaged snapshot is not repaired here
  auto logs = list_logs(dir);
  check_log_sequence(dir, from, logs, nullptr);

  // Replay every valid record, resynchronising after each damaged stretch (on any valid record, so that the
  // intact records of a damaged batch are kept too). Grants are logged in token order, so the tokens a
  // lost stretch held lie above every token before it; each lost grant took at least min_record_bytes.
  std::uint64_t lost_grants_bound = 0;
  for (std::size_t i = 0; i < logs.size(); ++i) {
    const auto& path = logs[i].second;
    std::string data = read_file(path);
    std::string_view in(data);
    const auto scan = replay_valid_prefix(in, table, now, records);
    std::size_t offset = scan.valid;
    bool last = i + 1 == logs.size();
    if (offset == data.size()) continue;
    // A torn tail (as journal::open reads it): the next start cuts it, nothing acknowledged was there.
    if (last && !next_acknowledged(in, offset + 1, scan.framed)) continue;
    auto next = next_acknowledged(in, offset + 1, false);
    repair_report::damage d{path, offset, 0, 0};
    while (offset < data.size()) {
      std::size_t resume = next ? *next : data.size();
      d.lost_bytes += resume - offset;
      std::uint64_t before = records;
      offset = resume + replay_valid_prefix(in.substr(resume), table, now, records).valid;
      d.records_after += records - before;
      if (offset < data.size()) next = next_acknowledged(in, offset + 1, false);
    }
    lost_grants_bound += grants_bound(d.lost_bytes);
    report.damaged.push_back(d);
  }
  report.last_token_seen = table.last_token();
  report.restored_leases = table.size();
  if (report.damaged.empty()) {
    report.token_floor = table.last_token();
    return report;
  }
  report.token_floor = report.last_token_seen + lost_grants_bound;
  table.observe_token(report.token_floor);

  // Install a snapshot of everything recovered as a new generation with an empty log. The damaged logs are
  // first kept under another name (a hard link, so a crash before the snapshot's rename leaves the
  // directory as it was); the rename then makes every older log obsolete.
  report.generation = (logs.empty() ? from : logs.back().first) + 1;
  write_durably(dir / "snapshot.tmp",
                encode_snapshot(report.generation, table.last_token(), table.snapshot()));
  write_durably(wal_path_in(dir, report.generation), {});
  for (const auto& d : report.damaged) {
    auto kept = d.file;
    kept += ".damaged";
    fs::remove(kept, ec);
    if (::link(d.file.c_str(), kept.c_str()) != 0)
      fail("link " + d.file.string() + " to " + kept.string(), errno);
  }
  fsync_dir(dir);
  rename_durably(dir / "snapshot.tmp", dir / "snapshot");
  for (const auto& [g, path] : logs)
    fs::remove(path, ec);
  fsync_dir(dir);
  return report;
}

}  // namespace baton::server
