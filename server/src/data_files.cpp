// SPDX-License-Identifier: Apache-2.0
#include "data_files.hpp"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace baton::server {

journal_damaged::journal_damaged(std::filesystem::path f, std::uint64_t at, std::string why)
    : std::runtime_error(f.string() + " is damaged at byte offset " + std::to_string(at) + " (" + why + ")"),
      file(std::move(f)),
      offset(at) {}

namespace {
// Recovery grows the table to a million leases and more: growing it by rehashing as it goes cost 8.5 % of
// a recovery's CPU at a million (docs/benchmarks.md, "A million held leases"). A file of `bytes` holds at
// most about bytes / 48 acquires (an acquire of a short key and owner takes 50-60 bytes); reserving that
// many at worst over-reserves buckets, 8 bytes each, for a file of other records.
void reserve_for(lock_table& table, std::size_t bytes) {
  table.reserve(table.size() + bytes / 48);
}
}  // namespace

void replay_record(lock_table& table, const wal_record& r, time_point now) {
  switch (r.type) {
    case record_type::acquire:
      table.restore(r.key, r.owner, r.token, milliseconds(r.ttl_ms), now, r.client, r.value);
      break;
    case record_type::release:
      table.forget(r.key, r.token);
      break;
    case record_type::expire:
      table.forget(r.key, r.token, /*expired=*/true, now);
      break;
    case record_type::lock_delay:
      table.restore_lock_delay(r.key, r.token, milliseconds(r.ttl_ms), now);
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
    case record_type::lock_record:
      table.restore_record(r.key, lock_record{r.value, r.owner, r.client, r.token, r.ttl_ms});
      break;
  }
}

namespace data_files {
namespace {

// The smallest encoded record: framing, type, token, ttl and two empty strings. A damaged stretch of N
// bytes can have held at most N / min_record_bytes records, hence at most that many grants.
constexpr std::uint64_t min_record_bytes = record_header_size + 1 + 8 + 8 + 4 + 4;

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

}  // namespace

void fail(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + std::strerror(err));
}

std::string wal_name(std::uint64_t generation) {
  char name[32];
  std::snprintf(name, sizeof name, "wal-%016" PRIx64 ".log", generation);
  return name;
}

std::vector<std::pair<std::uint64_t, std::string>> list_logs(storage& fs) {
  std::vector<std::string> names;
  if (int err = fs.list(names)) fail("list " + fs.path().string(), err);
  std::vector<std::pair<std::uint64_t, std::string>> logs;
  for (auto& name : names) {
    std::uint64_t g;
    if (parse_wal_name(name, g)) logs.emplace_back(g, std::move(name));
  }
  std::sort(logs.begin(), logs.end());
  return logs;
}

std::string read_all(storage& fs, const std::string& name) {
  std::string out;
  if (int err = fs.read(name, out)) fail("read " + (fs.path() / name).string(), err);
  return out;
}

std::uint64_t load_snapshot(storage& fs, lock_table& table, time_point now, std::uint64_t& entries) {
  entries = 0;
  std::string data;
  if (int err = fs.read(snapshot_name, data)) {
    if (err == ENOENT) return 0;
    fail("read " + (fs.path() / snapshot_name).string(), err);
  }
  std::string_view in(data);
  std::size_t used = 0;
  auto damaged = [&](const char* why) {
    return journal_damaged(fs.path() / snapshot_name, data.size() - in.size(), why);
  };
  auto header = decode_record(in, used);
  if (!header || header->type != record_type::snapshot_header) throw damaged("bad snapshot header");
  reserve_for(table, data.size());
  in.remove_prefix(used);
  for (;;) {
    auto r = decode_record(in, used);
    if (!r) throw damaged(in.empty() ? "snapshot has no end record" : "bad snapshot record");
    if (r->type == record_type::snapshot_end) {
      if (r->token != entries) throw damaged("snapshot entry count does not match");
      break;
    }
    if (r->type != record_type::acquire && r->type != record_type::lock_record &&
        r->type != record_type::lock_delay)
      throw damaged("unexpected record type in snapshot");
    in.remove_prefix(used);
    replay_record(table, *r, now);
    ++entries;
  }
  table.observe_token(header->token);
  return header->ttl_ms;
}

void check_log_sequence(storage& fs, std::uint64_t snapshot_generation,
                        std::vector<std::pair<std::uint64_t, std::string>>& logs,
                        std::vector<std::string>* covered) {
  auto first_kept =
      std::find_if(logs.begin(), logs.end(), [&](const auto& l) { return l.first >= snapshot_generation; });
  if (covered)
    for (auto it = logs.begin(); it != first_kept; ++it)
      covered->push_back(it->second);
  logs.erase(logs.begin(), first_kept);
  std::uint64_t expect = snapshot_generation;
  for (const auto& [g, name] : logs) {
    // The snapshot of generation S is installed only once log S exists, log G + 1 is created only once
    // log G is complete, and no log but the first one (0) exists without a snapshot: a gap means a file
    // was removed by hand.
    if (g != expect)
      throw std::runtime_error("log " + (fs.path() / wal_name(expect)).string() + " is missing (found " +
                               name + "); refusing to guess what it held");
    expect = g + 1;
  }
}

log_scan replay_valid_prefix(std::string_view data, lock_table& table, time_point now,
                             std::uint64_t& records) {
  reserve_for(table, data.size());
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

std::optional<std::size_t> next_acknowledged(std::string_view data, std::size_t from, bool framed) {
  std::vector<wal_record> unit;
  for (std::size_t at = from; at + min_record_bytes <= data.size(); ++at) {
    unit.clear();
    bool is_batch = false;
    // A guard batch is written with the batch before it, in one write: it proves nothing about that batch
    // (wal_record.hpp), so a power cut that tore the batch and kept the guard is a torn tail still.
    if (decode_unit(data.substr(at), unit, is_batch) != 0 && (is_batch || !framed) &&
        !(unit.size() == 1 && is_guard(unit.front())))
      return at;
  }
  return std::nullopt;
}

std::string framed_batch(std::string_view records, std::size_t count) {
  std::string batch(batch_frame_size, '\0');
  batch.append(records);
  encode_batch_frame(records, count, batch.data());
  return batch;
}

std::string guard_batch() {
  std::string floor;
  encode_record(record_type::token_floor, 0, guard_marker, {}, {}, floor);
  return framed_batch(floor, 1);
}

std::uint64_t grants_bound(std::uint64_t bytes) {
  return (bytes + min_record_bytes - 1) / min_record_bytes;
}

std::string encode_snapshot(std::uint64_t generation, const lock_table& table) {
  std::string data;
  encode_record(record_type::snapshot_header, table.last_token(), generation, {}, {}, data);
  std::uint64_t entries = 0;
  table.for_each_lease([&](const std::string& key, const lease_record& r) {
    encode_record(record_type::acquire, r.token, static_cast<std::uint64_t>(r.restore_ttl.count()), key,
                  r.owner, data, r.client(), r.value());
    ++entries;
    if (r.lock_delay() > milliseconds{0}) {
      encode_record(record_type::lock_delay, r.token, static_cast<std::uint64_t>(r.lock_delay().count()), key,
                    {}, data);
      ++entries;
    }
  });
  // A key in lock-delay has no lease left: its delay alone, begun again in full at recovery.
  table.for_each_delay([&](const std::string& key, const key_delay& d) {
    encode_record(record_type::lock_delay, d.token, static_cast<std::uint64_t>(d.delay.count()), key, {},
                  data);
    ++entries;
  });
  for (const auto& [key, r] : table.records_snapshot()) {
    encode_record(record_type::lock_record, r.token, r.version, key, r.owner, data, r.client, r.value);
    ++entries;
  }
  encode_record(record_type::snapshot_end, entries, 0, {}, {}, data);
  return data;
}

// The data goes out a MiB at a time, each forced to disk before the next: a snapshot of many MiB written at
// once would queue ahead of the log's own fdatasync in the device and delay every durable answer behind it.
void write_durably(storage& fs, const std::string& name, const std::string& data) {
  constexpr std::size_t chunk = 1 << 20;
  const auto path = (fs.path() / name).string();
  int fd = fs.open(name, /*truncate=*/true);
  if (fd < 0) fail("open " + path, -fd);
  std::size_t at = 0;
  do {
    const std::size_t n = std::min(chunk, data.size() - at);
    if (int err = fs.write(fd, std::string_view(data).substr(at, n))) {
      fs.close(fd);
      fail("write " + path, err);
    }
    if (int err = fs.sync_data(fd)) {
      fs.close(fd);
      fail("fdatasync " + path, err);
    }
    at += n;
  } while (at < data.size());
  if (int err = fs.sync(fd)) {
    fs.close(fd);
    fail("fsync " + path, err);
  }
  fs.close(fd);
}

void rename_durably(storage& fs, const std::string& from, const std::string& to) {
  if (int err = fs.rename(from, to))
    fail("rename " + (fs.path() / from).string() + " to " + (fs.path() / to).string(), err);
  if (int err = fs.sync_dir()) fail("fsync directory " + fs.path().string(), err);
}

}  // namespace data_files
}  // namespace baton::server
