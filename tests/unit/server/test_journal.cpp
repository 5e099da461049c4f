// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE journal
#include <boost/test/unit_test.hpp>

#include "forwarding_storage.hpp"
#include "journal.hpp"
#include "repair.hpp"
#include "temp_dir.hpp"
#include "wal_record.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <mutex>
#include <thread>

using namespace baton::server;
using baton::test::temp_dir;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {
const time_point t0 = time_point{} + 1000s;

std::string wal_file(const fs::path& dir, int generation = 0) {
  char name[32];
  std::snprintf(name, sizeof name, "wal-%016x.log", generation);
  return (dir / name).string();
}

// Writes the first log as a batond from before batch frames did: bare records, back to back. (Logs the
// journal writes itself frame each batch; the cases below that damage records at known offsets use this
// layout, which recovery still reads.)
void write_records(const fs::path& dir, const std::vector<wal_record>& records) {
  std::string bytes;
  for (const auto& r : records)
    encode_record(r, bytes);
  fs::create_directories(dir);
  std::ofstream f(wal_file(dir), std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  BOOST_REQUIRE(f.flush());
}
// Appends `v` as `bytes` little-endian bytes, as wal_record.cpp writes integers.
void le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A record's frame around a payload written by hand: length, checksum, payload.
std::string framed(const std::string& payload) {
  std::string r;
  le(r, payload.size(), 4);
  le(r, crc32c(payload), 4);
  return r + payload;
}

// Reopens `dir` with a tiny compaction size and acquires and releases one key until the log has been
// compacted: what was held before is then in the snapshot. The churning lease is bound to `client` and
// carries `value`. Returns the compactions made.
std::uint64_t compact_by_churn(const fs::path& dir, std::string_view client = {},
                               std::string_view value = {}) {
  lock_table table;
  std::mutex mu;
  journal j(journal_options{dir, /*compact_bytes=*/256});
  j.open(table, t0);
  j.start();
  for (int i = 0; i < 40; ++i) {
    std::lock_guard lk(mu);
    auto g = std::get<acquire_granted>(table.acquire("churn", "x", 1s, t0, client, value));
    j.append(record_type::acquire, g.token, 1000, "churn", "x", client, value);
    table.release("churn", "x", g.token, t0, client);
    j.append(record_type::release, g.token, 0, "churn");
  }
  j.stop();
  return j.compactions();
}

}  // namespace

BOOST_AUTO_TEST_CASE(record_round_trips_through_encode_and_decode) {
  wal_record r{record_type::acquire, 123456789012345ull, 30000, "jobs/nightly", "host:1#abc"};
  std::string buf;
  encode_record(r, buf);
  std::size_t used = 0;
  auto back = decode_record(buf, used);
  BOOST_REQUIRE(back.has_value());
  BOOST_TEST((*back == r));
  BOOST_TEST(used == buf.size());
}

BOOST_AUTO_TEST_CASE(decode_refuses_truncated_corrupt_and_unknown_records) {
  std::string buf;
  encode_record(wal_record{record_type::release, 5, 0, "k", ""}, buf);
  std::size_t used = 0;
  for (std::size_t n = 0; n < buf.size(); ++n)
    BOOST_TEST(!decode_record(std::string_view(buf).substr(0, n), used));
  std::string flipped = buf;
  flipped.back() ^= 0x01;
  BOOST_TEST(!decode_record(flipped, used));
  std::string huge = buf;
  huge[3] = 0x7f;  // absurd length
  BOOST_TEST(!decode_record(huge, used));
}

BOOST_AUTO_TEST_CASE(recovery_restores_held_leases_and_the_token_counter) {
  temp_dir dir;
  write_records(dir.path(), {
                                {record_type::acquire, 1, 1000, "a", "owner-a"},
                                {record_type::acquire, 2, 1000, "b", "owner-b"},
                                {record_type::release, 1, 0, "a", ""},
                                {record_type::acquire, 3, 2000, "c", "owner-c"},
                                {record_type::expire, 3, 0, "c", ""},
                                {record_type::extend, 2, 9000, "b", ""},
                            });
  lock_table table;
  journal j(journal_options{dir.path()});
  const time_point restart = t0 + 3600s;  // the server was down for an hour
  auto stats = j.open(table, restart);
  BOOST_TEST(stats.records == 6u);
  BOOST_TEST(stats.torn_bytes == 0u);
  BOOST_TEST(stats.last_token == 3u);
  BOOST_TEST(stats.restored_leases == 1u);
  auto b = table.get("b", restart + 8999ms);  // valid for its largest TTL, counted from the restart
  BOOST_REQUIRE(b.has_value());
  BOOST_TEST(b->owner == "owner-b");
  BOOST_TEST(!table.get("a", restart).has_value());
  BOOST_TEST(!table.get("c", restart).has_value());
  auto g = table.acquire("a", "x", 1000ms, restart);
  BOOST_TEST(std::get<acquire_granted>(g).token == 4u);
}

BOOST_AUTO_TEST_CASE(torn_last_record_is_cut_off_and_the_counter_recovers_from_the_rest) {
  temp_dir dir;
  write_records(dir.path(),
                {{record_type::acquire, 1, 1000, "a", "o"}, {record_type::acquire, 2, 1000, "b", "o"}});
  // A crash in the middle of writing the next batch leaves half a record behind.
  std::string partial;
  encode_record(wal_record{record_type::acquire, 3, 1000, "c", "o"}, partial);
  const auto good_size = fs::file_size(wal_file(dir.path()));
  {
    std::ofstream f(wal_file(dir.path()), std::ios::binary | std::ios::app);
    f.write(partial.data(), static_cast<std::streamsize>(partial.size() / 2));
  }
  std::uint64_t d_token = 0;
  {
    lock_table table;
    journal j(journal_options{dir.path()});
    auto stats = j.open(table, t0);
    BOOST_TEST(stats.records == 2u);
    BOOST_TEST(stats.torn_bytes == partial.size() / 2);
    // The counter passes any token the cut bytes could have held (a damaged last batch reads as torn).
    BOOST_TEST(stats.last_token > 2u);
    // The tail is cut, and a batch of one record follows the old log's records: the token floor, logged
    // (batches are framed from there on).
    BOOST_TEST(fs::file_size(wal_file(dir.path())) > good_size + batch_frame_size);
    // New appends after recovery land after the last good record and are readable next time.
    j.start();
    d_token = table.last_token() + 1;
    j.append(record_type::acquire, d_token, 1000, "d", "o");
    j.stop();
  }
  lock_table table;
  journal j(journal_options{dir.path()});
  auto stats = j.open(table, t0);
  BOOST_TEST(stats.records == 4u);  // a, b, the token floor the cut logged, d
  BOOST_TEST(stats.torn_bytes == 0u);
  BOOST_TEST(stats.last_token == d_token);
  BOOST_TEST(table.get("d", t0).has_value());
}

namespace {
// Five acquires of keys k0..k4 (tokens 1..5); returns the byte offset where each record starts.
std::vector<std::uint64_t> write_five(const fs::path& dir) {
  std::vector<wal_record> records;
  std::vector<std::uint64_t> offsets;
  std::string encoded;
  for (std::uint64_t i = 0; i < 5; ++i) {
    records.push_back({record_type::acquire, i + 1, 60000, "k" + std::to_string(i), "o"});
    offsets.push_back(encoded.size());
    encode_record(records.back(), encoded);
  }
  write_records(dir, records);
  return offsets;
}

void flip_bit(const std::string& path, std::uint64_t offset) {
  int fd = ::open(path.c_str(), O_RDWR);
  BOOST_REQUIRE(fd >= 0);
  char c;
  BOOST_REQUIRE(::pread(fd, &c, 1, static_cast<off_t>(offset)) == 1);
  c ^= 0x10;
  BOOST_REQUIRE(::pwrite(fd, &c, 1, static_cast<off_t>(offset)) == 1);
  ::close(fd);
}

std::string contents(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
}  // namespace

// A damaged record with valid ones after it is not a torn write: the records after it were acknowledged.
// Recovery refuses, names the file and offset, and leaves the file exactly as it was.
BOOST_AUTO_TEST_CASE(a_damaged_record_in_the_middle_refuses_to_start_and_keeps_the_file) {
  temp_dir dir;
  auto offsets = write_five(dir.path());
  flip_bit(wal_file(dir.path()), offsets[1] + record_header_size + 3);  // inside record 1's token
  const auto before = contents(wal_file(dir.path()));
  lock_table table;
  journal j(journal_options{dir.path()});
  try {
    j.open(table, t0);
    BOOST_FAIL("open() accepted a log with a damaged record in the middle");
  } catch (const journal_damaged& e) {
    BOOST_TEST(e.offset == offsets[1]);
    BOOST_TEST(e.file == fs::path(wal_file(dir.path())));
    BOOST_TEST(std::string(e.what()).find(std::to_string(offsets[1])) != std::string::npos);
  }
  BOOST_TEST((contents(wal_file(dir.path())) == before));
}

BOOST_AUTO_TEST_CASE(a_damaged_last_record_is_a_torn_tail_and_is_cut) {
  temp_dir dir;
  auto offsets = write_five(dir.path());
  flip_bit(wal_file(dir.path()), offsets[4] + record_header_size + 3);
  lock_table table;
  journal j(journal_options{dir.path()});
  auto stats = j.open(table, t0);
  BOOST_TEST(stats.records == 4u);
  BOOST_TEST(stats.torn_bytes > 0u);
  BOOST_TEST(stats.last_token > 5u);  // past token 5, which the damaged record held
  BOOST_TEST(fs::file_size(wal_file(dir.path())) > offsets[4] + batch_frame_size);  // the floor, logged
}

namespace {

// A log the journal writes itself: three small batches, then one large one (`large_keys` keys of 150
// bytes). Returns where each batch starts; the log ends where the last one does.
std::vector<std::uint64_t> write_batches(const fs::path& dir, int large_keys,
                                         std::uint64_t& last_small_token) {
  std::vector<std::uint64_t> starts;
  lock_table table;
  journal j(journal_options{dir});
  j.open(table, t0);
  std::uint64_t token = 0;
  for (int b = 0; b < 4; ++b) {
    starts.push_back(fs::file_size(wal_file(dir)));
    const int n = b < 3 ? 2 : large_keys;
    for (int i = 0; i < n; ++i) {
      const std::string key = (b < 3 ? "small-" : std::string(150, 'q')) + std::to_string(b * 100 + i);
      j.append(record_type::acquire, ++token, 60000, key, "o");
    }
    BOOST_REQUIRE(j.flush());  // one write, one sync: one batch
    if (b == 2) last_small_token = token;
  }
  j.stop();
  return starts;
}

void zero_bytes(const std::string& path, std::uint64_t offset, std::size_t n) {
  int fd = ::open(path.c_str(), O_RDWR);
  BOOST_REQUIRE(fd >= 0);
  const std::string zeros(n, '\0');
  BOOST_REQUIRE(::pwrite(fd, zeros.data(), n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n));
  ::close(fd);
}

}  // namespace

// Issue 24, defect 5: a power cut inside the last (unacknowledged) batch lost one sector and kept later
// ones, which hold whole valid records. That is a torn write, not damage: the whole batch is cut and the
// counter passes its tokens. Before batches were framed, the valid record after the hole made recovery
// refuse to start.
BOOST_AUTO_TEST_CASE(a_lost_sector_inside_the_last_batch_is_a_torn_tail) {
  temp_dir dir;
  std::uint64_t last_small = 0;
  const auto starts = write_batches(dir.path(), 40, last_small);
  const auto size = fs::file_size(wal_file(dir.path()));
  BOOST_REQUIRE(size - starts[3] > 4 * 512u);
  zero_bytes(wal_file(dir.path()), starts[3] + 512, 512);  // the batch's second sector
  lock_table table;
  auto j = std::make_unique<journal>(journal_options{dir.path()});
  recovery_stats stats;
  BOOST_REQUIRE_NO_THROW(stats = j->open(table, t0));
  BOOST_TEST(stats.records == 6u);  // the three small batches
  BOOST_TEST(stats.torn_bytes == size - starts[3]);
  BOOST_TEST(stats.last_token >= last_small + 40);  // no token of the cut batch comes back
  BOOST_TEST(table.get("small-201", t0).has_value());
  BOOST_TEST(!table.get(std::string(150, 'q') + "339", t0).has_value());
  // The cut batch is gone; in its place one batch holds the raised floor, before any answer.
  const auto after = contents(wal_file(dir.path()));
  std::size_t used = 0;
  auto frame = decode_record(std::string_view(after).substr(starts[3]), used);
  BOOST_TEST_REQUIRE(frame.has_value());
  BOOST_TEST((frame->type == record_type::batch));
  BOOST_TEST(starts[3] + used + frame->token == after.size());
  auto floor = decode_record(std::string_view(after).substr(starts[3] + used), used);
  BOOST_TEST_REQUIRE(floor.has_value());
  BOOST_TEST((floor->type == record_type::token_floor));
  BOOST_TEST(floor->token == stats.last_token);
  j.reset();
  // A second restart, with no grant in between, keeps the floor: the lost batch's tokens stay unissued.
  lock_table again;
  journal k(journal_options{dir.path()});
  BOOST_TEST(k.open(again, t0).last_token == stats.last_token);
}

// The same lost sector in an acknowledged batch, one with a whole batch after it, is damage: recovery
// refuses, naming the damaged batch's offset, and leaves the file as it was.
BOOST_AUTO_TEST_CASE(a_lost_sector_inside_an_acknowledged_batch_refuses_to_start) {
  temp_dir dir;
  std::uint64_t last_small = 0;
  const auto starts = write_batches(dir.path(), 40, last_small);
  zero_bytes(wal_file(dir.path()), starts[2] + 4, 4);  // batch 2's frame's checksum
  const auto before = contents(wal_file(dir.path()));
  lock_table table;
  journal j(journal_options{dir.path()});
  try {
    j.open(table, t0);
    BOOST_FAIL("open() accepted a log whose acknowledged batch is damaged");
  } catch (const journal_damaged& e) {
    BOOST_TEST(e.offset == starts[2]);
  }
  BOOST_TEST((contents(wal_file(dir.path())) == before));
}

// Every change to a batch shows: its frame's or a record's bytes, a record taken out or put in.
BOOST_AUTO_TEST_CASE(a_batch_frame_covers_every_byte_and_record_of_its_batch) {
  std::string body;
  for (int i = 0; i < 3; ++i)
    encode_record(wal_record{record_type::acquire, std::uint64_t(i + 1), 1000, "k" + std::to_string(i), "o"},
                  body);
  std::string unit(batch_frame_size, '\0');
  encode_batch_frame(body, 3, unit.data());
  unit += body;
  auto decode = [](std::string_view u) {
    std::size_t used = 0;
    auto frame = decode_record(u, used);
    std::vector<wal_record> out;
    return frame && frame->type == record_type::batch && u.size() - used >= frame->token &&
           decode_batch(*frame, u.substr(used, frame->token), out) && out.size() == 3 && out[2].key == "k2";
  };
  BOOST_TEST(decode(unit));
  for (std::size_t at = 0; at < unit.size(); ++at) {
    std::string damaged = unit;
    damaged[at] ^= 0x04;
    BOOST_TEST(!decode(damaged), "a flipped bit at byte " << at << " went unnoticed");
  }
  BOOST_TEST(!decode(std::string_view(unit).substr(0, unit.size() - 1)));
  // The frame of three records over a body of two, however well formed, is not that batch.
  std::string two;
  encode_record(wal_record{record_type::acquire, 1, 1000, "k0", "o"}, two);
  encode_record(wal_record{record_type::acquire, 2, 1000, "k1", "o"}, two);
  wal_record frame;
  std::size_t used = 0;
  frame = *decode_record(unit, used);
  frame.token = two.size();
  std::vector<wal_record> out;
  BOOST_TEST(!decode_batch(frame, two, out));
  // An empty frame is a whole (empty) batch.
  std::string empty(batch_frame_size, '\0');
  encode_batch_frame({}, 0, empty.data());
  auto e = decode_record(empty, used);
  BOOST_TEST_REQUIRE(e.has_value());
  BOOST_TEST(decode_batch(*e, {}, out));
}

// Repair cuts the damage out, keeps the evidence, replays the valid records after it, and raises the
// counter above any token the lost bytes could have held: no token is ever issued twice.
BOOST_AUTO_TEST_CASE(repair_cuts_the_damage_keeps_it_and_raises_the_token_floor) {
  temp_dir dir;
  auto offsets = write_five(dir.path());
  flip_bit(wal_file(dir.path()), offsets[1] + record_header_size + 3);
  const auto damaged = contents(wal_file(dir.path()));

  auto report = repair_data_dir(dir.path());
  BOOST_REQUIRE(report.damaged.size() == 1u);
  BOOST_TEST(report.damaged[0].offset == offsets[1]);
  BOOST_TEST(report.damaged[0].lost_bytes == offsets[2] - offsets[1]);
  BOOST_TEST(report.damaged[0].records_after == 3u);
  BOOST_TEST(report.last_token_seen == 5u);
  BOOST_TEST(report.token_floor >= 5u + 1u);  // record 1 may have been a grant
  BOOST_TEST(report.restored_leases == 4u);   // k0, k2, k3, k4
  BOOST_TEST((contents(wal_file(dir.path()) + ".damaged") == damaged));

  {
    lock_table table;
    journal j(journal_options{dir.path()});
    auto stats = j.open(table, t0);
    BOOST_TEST(stats.last_token == report.token_floor);
    for (const char* k : {"k0", "k2", "k3", "k4"})
      BOOST_TEST(table.get(k, t0).has_value());
    auto g = std::get<acquire_granted>(table.acquire("k1", "new", 1s, t0));
    BOOST_TEST(g.token > report.token_floor);
  }
  BOOST_TEST(repair_data_dir(dir.path()).damaged.empty());  // a second repair finds nothing
}

BOOST_AUTO_TEST_CASE(repair_refuses_a_directory_in_use) {
  temp_dir dir;
  lock_table table;
  journal j(journal_options{dir.path()});
  j.open(table, t0);
  BOOST_CHECK_THROW(repair_data_dir(dir.path()), std::runtime_error);
}

// The state a crash leaves between a cut and the new snapshot's install: the old snapshot (none here) and
// two logs. Recovery replays both in order.
BOOST_AUTO_TEST_CASE(recovery_replays_every_log_after_the_snapshot_in_order) {
  temp_dir dir;
  write_records(dir.path(),
                {{record_type::acquire, 1, 60000, "a", "o"}, {record_type::acquire, 2, 60000, "b", "o"}});
  {
    std::string next;
    encode_record(wal_record{record_type::release, 1, 0, "a", ""}, next);
    encode_record(wal_record{record_type::acquire, 3, 60000, "c", "o"}, next);
    std::ofstream f(wal_file(dir.path(), 1), std::ios::binary);
    f << next;
  }
  lock_table table;
  journal j(journal_options{dir.path()});
  auto stats = j.open(table, t0);
  BOOST_TEST(stats.log_files == 2u);
  BOOST_TEST(stats.records == 4u);
  BOOST_TEST(stats.last_token == 3u);
  BOOST_TEST(!table.get("a", t0).has_value());
  BOOST_TEST(table.get("b", t0).has_value());
  BOOST_TEST(table.get("c", t0).has_value());
}

BOOST_AUTO_TEST_CASE(a_damaged_record_in_an_older_complete_log_refuses_to_start) {
  temp_dir dir;
  auto offsets = write_five(dir.path());
  { std::ofstream f(wal_file(dir.path(), 1), std::ios::binary); }
  flip_bit(wal_file(dir.path()), offsets[4] + record_header_size + 3);  // the last record of log 0
  lock_table table;
  journal j(journal_options{dir.path()});
  BOOST_CHECK_THROW(j.open(table, t0), journal_damaged);
}

BOOST_AUTO_TEST_CASE(a_missing_log_refuses_to_start) {
  temp_dir dir;
  write_records(dir.path(), {{record_type::acquire, 1, 60000, "a", "o"}});
  fs::rename(wal_file(dir.path(), 0), wal_file(dir.path(), 2));
  lock_table table;
  journal j(journal_options{dir.path()});
  BOOST_CHECK_THROW(j.open(table, t0), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(open_creates_missing_parent_directories) {
  temp_dir dir;
  auto nested = dir.path() / "a" / "b" / "data";
  lock_table table;
  journal j(journal_options{nested});
  j.open(table, t0);
  BOOST_TEST(fs::is_directory(nested));
  BOOST_TEST(fs::exists(wal_file(nested)));
}

BOOST_AUTO_TEST_CASE(waiters_complete_once_their_record_is_durable) {
  temp_dir dir;
  lock_table table;
  journal j(journal_options{dir.path()});
  j.open(table, t0);
  j.start();
  boost::asio::io_context ioc;
  auto work = boost::asio::make_work_guard(ioc);  // keeps run_for() waiting while completions are pending
  std::vector<std::uint64_t> completed;
  for (int i = 0; i < 100; ++i) {
    auto lsn =
        j.append(record_type::acquire, static_cast<std::uint64_t>(i + 1), 1000, "k" + std::to_string(i), "o");
    j.async_wait_durable(lsn, boost::asio::bind_executor(ioc, [&, lsn](boost::system::error_code ec) {
                           BOOST_TEST(!ec);
                           BOOST_TEST(j.durable() >= lsn);
                           completed.push_back(lsn);
                         }));
  }
  // Bounded: 100 records need at most 100 fsyncs.
  for (int spins = 0; completed.size() < 100 && spins < 3000; ++spins)
    ioc.run_for(10ms);
  BOOST_TEST(completed.size() == 100u);
  j.stop();
}

BOOST_AUTO_TEST_CASE(compaction_writes_a_snapshot_and_recovery_uses_it) {
  temp_dir dir;
  std::uint64_t last = 0;
  std::map<std::string, std::uint64_t> expected;  // key -> token of the lease that should be restored
  {
    lock_table table;
    std::mutex mu;
    journal j(journal_options{dir.path(), /*compact_bytes=*/4096});
    j.open(table, t0);
    j.start();
    // Churn: many acquires and releases, so the log passes the compaction size several times.
    for (int i = 0; i < 2000; ++i) {
      std::lock_guard lk(mu);
      std::string key = "k" + std::to_string(i % 50);
      auto g = std::get<acquire_granted>(table.acquire(key, "o", 60s, t0));
      j.append(record_type::acquire, g.token, 60000, key, "o");
      expected[key] = g.token;
      if (i % 3 != 0) {
        table.release(key, "o", g.token, t0);
        j.append(record_type::release, g.token, 0, key);
        expected.erase(key);
      }
    }
    last = table.last_token();
    j.stop();
  }
  BOOST_TEST(fs::exists(dir.path() / "snapshot"));
  BOOST_TEST(!fs::exists(wal_file(dir.path(), 0)));  // the first generation was compacted away
  lock_table table;
  journal j(journal_options{dir.path()});
  auto stats = j.open(table, t0);
  BOOST_TEST(stats.generation > 0u);
  BOOST_TEST(stats.last_token == last);
  // Exactly the keys whose last operation was an acquire are held again, with that acquire's token.
  BOOST_TEST(table.size() == expected.size());
  BOOST_TEST(!expected.empty());
  for (const auto& [key, token] : expected) {
    auto v = table.get(key, t0);
    BOOST_REQUIRE_MESSAGE(v.has_value(), key);
    BOOST_TEST(v->token == token);
  }
}

BOOST_AUTO_TEST_CASE(a_second_journal_cannot_open_the_same_directory) {
  temp_dir dir;
  lock_table t1, t2;
  journal a(journal_options{dir.path()});
  a.open(t1, t0);
  journal b(journal_options{dir.path()});
  BOOST_CHECK_THROW(b.open(t2, t0), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(a_corrupt_snapshot_refuses_to_start) {
  temp_dir dir;
  {
    std::ofstream f(dir.path() / "snapshot", std::ios::binary);
    f << "not a snapshot";
  }
  lock_table table;
  journal j(journal_options{dir.path()});
  BOOST_CHECK_THROW(j.open(table, t0), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(a_record_without_client_keeps_the_original_format_and_one_with_a_client_round_trips) {
  // The original payload, written by hand: type, token, ttl, key and owner, nothing after them.
  std::string payload;
  payload.push_back(static_cast<char>(record_type::acquire));
  le(payload, 7, 8);
  le(payload, 5000, 8);
  le(payload, 3, 4);
  payload += "a/b";
  le(payload, 4, 4);
  payload += "host";
  const std::string old_format = framed(payload);

  std::string encoded;
  encode_record(wal_record{record_type::acquire, 7, 5000, "a/b", "host"}, encoded);
  BOOST_TEST(encoded == old_format);  // a server without tokens writes exactly what older servers wrote
  std::size_t used = 0;
  auto old_back = decode_record(old_format, used);
  BOOST_REQUIRE(old_back.has_value());
  BOOST_TEST(old_back->client.empty());
  BOOST_TEST(old_back->owner == "host");

  wal_record bound{record_type::acquire, 8, 5000, "a/b", "host", "alpha"};
  std::string with_client;
  encode_record(bound, with_client);
  BOOST_TEST(with_client.size() == old_format.size() + 4 + 5);
  auto back = decode_record(with_client, used);
  BOOST_REQUIRE(back.has_value());
  BOOST_TEST((*back == bound));
  BOOST_TEST(used == with_client.size());
  for (std::size_t n = 0; n < with_client.size(); ++n)
    BOOST_TEST(!decode_record(std::string_view(with_client).substr(0, n), used));

  // A client section that does not add up is corruption: a zero length (never written), a length past the
  // payload, or bytes too few for a length.
  std::string zero = payload;
  le(zero, 0, 4);
  BOOST_TEST(!decode_record(framed(zero), used));
  std::string too_long = payload;
  le(too_long, 9, 4);
  too_long += "alpha";
  BOOST_TEST(!decode_record(framed(too_long), used));
  BOOST_TEST(!decode_record(framed(payload + "xy"), used));
}

BOOST_AUTO_TEST_CASE(recovery_keeps_the_client_binding_from_old_and_new_records_in_log_and_snapshot) {
  temp_dir dir;
  {
    lock_table table;
    journal j(journal_options{dir.path()});
    j.open(table, t0);
    j.start();
    j.append(record_type::acquire, 1, 60000, "old", "o");           // written before authentication
    j.append(record_type::acquire, 2, 60000, "new", "o", "alpha");  // bound to client alpha
    j.stop();
  }
  auto check = [](lock_table& table, time_point now) {
    BOOST_TEST(table.get("old", now)->client.empty());
    BOOST_TEST(table.get("new", now)->client == "alpha");
    // Same owner string and token from another client (or from no client) are another holder.
    BOOST_TEST((std::get<renew_refused>(table.renew("new", "o", 2, 60s, now, "beta")).reason ==
                lost_reason::owner_mismatch));
    BOOST_TEST((std::get<renew_refused>(table.renew("new", "o", 2, 60s, now)).reason ==
                lost_reason::owner_mismatch));
    BOOST_TEST(std::holds_alternative<renew_ok>(table.renew("new", "o", 2, 60s, now, "alpha")));
  };
  std::vector<snapshot_entry> entries;
  {
    lock_table table;
    journal j(journal_options{dir.path()});
    j.open(table, t0);
    check(table, t0);
    entries = table.snapshot();
  }
  // The snapshot carries the client too.
  compact_by_churn(dir.path(), "gamma");
  BOOST_TEST(fs::exists(dir.path() / "snapshot"));
  BOOST_TEST(!fs::exists(wal_file(dir.path(), 0)));
  lock_table table;
  journal j(journal_options{dir.path()});
  auto stats = j.open(table, t0);
  BOOST_TEST(stats.generation > 0u);
  check(table, t0);
}

BOOST_AUTO_TEST_CASE(an_acquire_with_a_value_has_its_own_type_byte_and_round_trips) {
  wal_record plain{record_type::acquire, 7, 5000, "a/b", "host"};
  std::string old_format;
  encode_record(plain, old_format);
  BOOST_TEST(static_cast<int>(old_format[record_header_size]) == static_cast<int>(record_type::acquire));

  for (const std::string client : {"", "alpha"}) {
    wal_record valued{record_type::acquire, 7, 5000, "a/b", "host", client, "10.0.0.7:8080"};
    std::string encoded;
    encode_record(valued, encoded);
    // Older servers stop at this record (unknown type) instead of restoring the lease without its value.
    BOOST_TEST(static_cast<int>(encoded[record_header_size]) == static_cast<int>(acquire_value_type_byte));
    BOOST_TEST(encoded.size() == old_format.size() + 4 + client.size() + 4 + valued.value.size());
    std::size_t used = 0;
    auto back = decode_record(encoded, used);
    BOOST_REQUIRE(back.has_value());
    BOOST_TEST((*back == valued));
    BOOST_TEST(used == encoded.size());
    for (std::size_t n = 0; n < encoded.size(); ++n)
      BOOST_TEST(!decode_record(std::string_view(encoded).substr(0, n), used));
  }
  // A value is only ever carried by an acquire; other records stay as they were.
  std::string release;
  encode_record(wal_record{record_type::release, 7, 0, "a/b", "", "", "ignored"}, release);
  std::size_t used = 0;
  BOOST_TEST(decode_record(release, used)->value.empty());
}

// A data directory written before values (acquires in the original format, by hand here) recovers as it
// did, and a log that mixes old records with new ones, and the snapshot made from it, keep each value.
BOOST_AUTO_TEST_CASE(recovery_reads_a_log_written_before_values_and_keeps_values_through_a_snapshot) {
  temp_dir dir;
  auto old_acquire = [](std::uint64_t token, std::string_view key, std::string_view owner) {
    std::string payload;
    payload.push_back(static_cast<char>(record_type::acquire));
    le(payload, token, 8);
    le(payload, 60000, 8);
    le(payload, key.size(), 4);
    payload += key;
    le(payload, owner.size(), 4);
    payload += owner;
    return framed(payload);
  };
  {
    std::ofstream out(wal_file(dir.path()), std::ios::binary);
    out << old_acquire(1, "old", "o") << old_acquire(2, "leader", "o");
  }
  {
    lock_table table;
    journal j(journal_options{dir.path()});
    auto stats = j.open(table, t0);
    BOOST_TEST(stats.restored_leases == 2u);
    BOOST_TEST(table.get("old", t0)->value.empty());
    j.start();
    auto g = std::get<acquire_granted>(table.acquire("leader", "o", 60s, t0, {}, "10.0.0.1:80"));
    j.append(record_type::acquire, g.token, 60000, "leader", "o", {}, "10.0.0.1:80");
    j.stop();
  }
  {
    lock_table table;
    journal j(journal_options{dir.path()});
    j.open(table, t0);
    BOOST_TEST(table.get("leader", t0)->value == "10.0.0.1:80");
    BOOST_TEST(table.get("leader", t0)->token == 3u);
    BOOST_TEST(table.get("old", t0)->value.empty());
  }
  // Compaction puts the value into the snapshot.
  BOOST_TEST(compact_by_churn(dir.path(), {}, "v") >= 1u);
  BOOST_TEST(fs::exists(dir.path() / "snapshot"));
  lock_table table;
  journal j(journal_options{dir.path()});
  auto stats = j.open(table, t0);
  BOOST_TEST(stats.generation > 0u);
  BOOST_TEST(table.get("leader", t0)->value == "10.0.0.1:80");
  BOOST_TEST(table.get("old", t0)->value.empty());
}

// The log's writes and syncs, seen through the storage seam; a sync fails with `sync_error` when set.
struct watched_storage : baton::test::forwarding_storage {
  explicit watched_storage(const fs::path& dir) : forwarding_storage(make_posix_storage(dir)) {}
  int open(const std::string& name, bool truncate) override {
    int h = forwarding_storage::open(name, truncate);
    if (name.rfind("wal-", 0) == 0) log_handle = h;
    return h;
  }
  int write(int handle, std::string_view data) override {
    if (handle == log_handle) written += data;
    return forwarding_storage::write(handle, data);
  }
  int sync_data(int handle) override {
    ++syncs;
    return sync_error ? sync_error : forwarding_storage::sync_data(handle);
  }
  int sync(int handle) override {
    ++syncs;
    return sync_error ? sync_error : forwarding_storage::sync(handle);
  }
  int sync_dir() override {
    ++dir_syncs;
    return dir_sync_error ? dir_sync_error : forwarding_storage::sync_dir();
  }
  int log_handle = -1;
  std::string written;
  int syncs = 0, dir_syncs = 0;
  int sync_error = 0, dir_sync_error = 0;
};

// The seam of the deterministic simulation: every file call goes through the journal's storage, flush()
// writes one batch on the caller's thread, and a failed sync poisons the journal as a failed fdatasync does.
BOOST_AUTO_TEST_CASE(a_storage_takes_flushed_batches_and_a_failed_sync_poisons_the_journal) {
  temp_dir dir;
  watched_storage device(dir.path());
  lock_table table;
  journal j(journal_options{dir.path(), max_compact_bytes, &device});
  j.open(table, t0);
  // Recovery gives the empty log its first frame, durable at once, and syncs the directory.
  BOOST_TEST(device.syncs == 1);
  BOOST_TEST(device.dir_syncs == 1);
  BOOST_TEST(device.written.size() == batch_frame_size);
  device.written.clear();
  std::string failure;
  j.on_failure([&](const std::string& what) { failure = what; });
  j.append(record_type::acquire, 1, 1000, "a", "o");
  auto lsn = j.append(record_type::acquire, 2, 1000, "b", "o");
  BOOST_TEST(j.durable() == 0u);
  BOOST_TEST(j.flush());
  BOOST_TEST(j.durable() == lsn);
  BOOST_TEST(device.syncs == 2);  // one batch, one sync
  std::size_t used = 0;
  auto frame = decode_record(device.written, used);
  BOOST_TEST_REQUIRE(frame.has_value());
  BOOST_TEST((frame->type == record_type::batch));
  BOOST_TEST(frame->token == device.written.size() - used);  // the frame covers both records
  auto first = decode_record(std::string_view(device.written).substr(used), used);
  BOOST_TEST_REQUIRE(first.has_value());
  BOOST_TEST(first->key == "a");
  BOOST_TEST(contents(wal_file(dir.path())).size() == batch_frame_size + device.written.size());

  device.sync_error = EIO;
  auto lost = j.append(record_type::release, 2, 0, "b");
  boost::asio::io_context ioc;
  boost::system::error_code waited;
  j.async_wait_durable(lost,
                       boost::asio::bind_executor(ioc, [&](boost::system::error_code ec) { waited = ec; }));
  BOOST_TEST(!j.flush());
  ioc.run();
  BOOST_TEST(j.failed());
  BOOST_TEST(waited.failed());
  BOOST_TEST(j.durable() == lsn);
  BOOST_TEST(failure.find("Input/output error") != std::string::npos);
}

// Without its threads (the simulation's driver), flush() cuts a log grown past compact_bytes as the writer
// thread does, and compact_now() runs the compaction the cut left, as the compactor thread does; a failed
// directory fsync at the cut poisons the journal before anything is appended to the new log.
BOOST_AUTO_TEST_CASE(flush_cuts_and_compact_now_compacts_on_the_callers_thread) {
  temp_dir dir;
  watched_storage device(dir.path());
  {
    lock_table table;
    journal j(journal_options{dir.path(), /*compact_bytes=*/256, &device});
    j.open(table, t0);
    for (std::uint64_t token = 1; !j.compaction_due(); ++token) {
      BOOST_TEST_REQUIRE(token < 100u);
      j.append(record_type::acquire, token, 1000, "k" + std::to_string(token), "o");
      BOOST_TEST_REQUIRE(j.flush());
    }
    BOOST_TEST(fs::exists(wal_file(dir.path(), 1)));
    BOOST_TEST(!fs::exists(dir.path() / "snapshot"));
    BOOST_TEST(j.compact_now());
    BOOST_TEST(!j.compaction_due());
    BOOST_TEST(j.compactions() == 1u);
    BOOST_TEST(fs::exists(dir.path() / "snapshot"));
    BOOST_TEST(!fs::exists(wal_file(dir.path(), 0)));
    j.append(record_type::acquire, 1000, 1000, "after", "o");
    BOOST_TEST(j.flush());

    // The next cut's directory fsync fails: the journal stops there.
    device.dir_sync_error = EIO;
    std::string failure;
    j.on_failure([&](const std::string& what) { failure = what; });
    for (std::uint64_t token = 1001; !j.failed(); ++token) {
      BOOST_TEST_REQUIRE(token < 1100u);
      j.append(record_type::acquire, token, 1000, "k" + std::to_string(token), "o");
      j.flush();
    }
    BOOST_TEST(failure.find("fsync directory") != std::string::npos);
    BOOST_TEST(!j.compact_now());
  }
  device.dir_sync_error = 0;
  lock_table table;
  journal j(journal_options{dir.path(), max_compact_bytes, &device});
  auto stats = j.open(table, t0);
  BOOST_TEST(stats.generation == 1u);
  BOOST_TEST(table.get("after", t0).has_value());
  BOOST_TEST(table.last_token() >= 1001u);
}

// A group commit hands each executor its waiters in one go: every waiter on either of two executors
// completes, in LSN order within its executor, never before its record is durable; when the sync fails,
// every waiter still pending completes with io_error.
BOOST_AUTO_TEST_CASE(many_waiters_on_two_executors_complete_in_order_with_the_batch_outcome) {
  temp_dir dir;
  watched_storage device(dir.path());
  lock_table table;
  journal j(journal_options{dir.path(), max_compact_bytes, &device});
  j.open(table, t0);
  boost::asio::io_context a, b;
  struct completion {
    std::uint64_t lsn;
    boost::system::error_code ec;
    std::uint64_t durable;
  };
  std::vector<completion> done_a, done_b;
  auto wait_batch = [&](int records) {
    std::vector<std::uint64_t> lsns;
    for (int i = 0; i < records; ++i)
      lsns.push_back(j.append(record_type::release, static_cast<std::uint64_t>(i + 1), 0, "k"));
    // Enqueued out of LSN order, alternating executors.
    for (int i = records - 1; i >= 0; --i) {
      auto lsn = lsns[static_cast<std::size_t>(i)];
      auto& ioc = i % 2 ? a : b;
      auto& done = i % 2 ? done_a : done_b;
      j.async_wait_durable(lsn, boost::asio::bind_executor(ioc, [&, lsn](boost::system::error_code ec) {
                             done.push_back({lsn, ec, j.durable()});
                           }));
    }
    return lsns;
  };
  auto check = [](const std::vector<completion>& done, std::size_t count, bool failed) {
    BOOST_TEST_REQUIRE(done.size() == count);
    for (std::size_t i = 0; i < done.size(); ++i) {
      if (i > 0) BOOST_TEST(done[i - 1].lsn < done[i].lsn);
      BOOST_TEST(done[i].ec.failed() == failed);
      if (failed)
        BOOST_TEST((done[i].ec == boost::system::errc::make_error_code(boost::system::errc::io_error)));
      else
        BOOST_TEST(done[i].durable >= done[i].lsn);
    }
  };

  wait_batch(100);
  a.poll();
  b.poll();
  BOOST_TEST(done_a.empty());  // nothing is durable yet
  BOOST_TEST(done_b.empty());
  BOOST_TEST(j.flush());
  a.restart();
  b.restart();
  a.run();
  b.run();
  check(done_a, 50, false);
  check(done_b, 50, false);

  done_a.clear();
  done_b.clear();
  device.sync_error = EIO;
  wait_batch(64);
  BOOST_TEST(!j.flush());
  a.restart();
  b.restart();
  a.run();
  b.run();
  check(done_a, 32, true);
  check(done_b, 32, true);
  BOOST_TEST(j.failed());
}

// The completions a batch posts belong to the executor's queue: when the executor is destroyed without
// running them (a stopped server, a simulated crash), the waiters go with it, not with the journal later.
BOOST_AUTO_TEST_CASE(waiters_posted_to_an_executor_that_never_runs_are_destroyed_with_it) {
  temp_dir dir;
  watched_storage device(dir.path());
  lock_table table;
  journal j(journal_options{dir.path(), max_compact_bytes, &device});
  j.open(table, t0);
  auto alive = std::make_shared<int>(0);
  std::weak_ptr<int> watch = alive;
  {
    boost::asio::io_context ioc;
    auto lsn = j.append(record_type::release, 1, 0, "k");
    j.async_wait_durable(
        lsn, boost::asio::bind_executor(ioc, [held = std::move(alive)](boost::system::error_code) {}));
    BOOST_TEST(j.flush());
    BOOST_TEST(!watch.expired());  // posted, not run
  }
  BOOST_TEST(watch.expired());
}

BOOST_AUTO_TEST_CASE(a_record_write_has_its_own_type_byte_and_round_trips) {
  for (const std::string& value : {std::string(), std::string("{\"a\":1}\n"), std::string("x\0y", 3)}) {
    const wal_record r{record_type::lock_record, 41, 3, "jobs/a", "agent-1", "team", value};
    std::string bytes;
    encode_record(r, bytes);
    BOOST_TEST(static_cast<int>(bytes[record_header_size]) == 10);
    std::size_t used = 0;
    auto back = decode_record(bytes, used);
    BOOST_REQUIRE(back.has_value());
    BOOST_TEST((*back == r));
    BOOST_TEST(used == bytes.size());
  }
}

namespace {
// Appends one record write (and, in the same batch, a grant of another key) and flushes it as a batch.
void write_record_batch(journal& j, const std::string& value, std::uint64_t version) {
  j.append(record_type::acquire, 1, 60000, "jobs", "leader");
  j.append(record_type::lock_record, 1, version, "jobs", "leader", "", value);
  BOOST_REQUIRE(j.flush());
}

// A new log in `dir` whose last batch holds a record write of `value`; returns where that batch starts.
std::uint64_t log_with_record_batch(const fs::path& dir, const std::string& value) {
  lock_table table;
  journal j(journal_options{dir});
  j.open(table, t0);
  const auto at = fs::file_size(wal_file(dir));
  write_record_batch(j, value, 1);
  return at;
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_record_survives_replay_and_compaction_and_repair) {
  temp_dir dir;
  const std::string big(20000, 'r');
  {
    lock_table table;
    journal j(journal_options{dir.path()});
    j.open(table, t0);
    write_record_batch(j, "first", 1);
    j.append(record_type::release, 1, 0, "jobs");
    j.append(record_type::lock_record, 1, 2, "jobs", "leader", "", big);  // no lease needed to replay it
    BOOST_REQUIRE(j.flush());
  }
  auto check = [&](const char* when) {
    lock_table table;
    journal j(journal_options{dir.path()});
    j.open(table, t0);
    BOOST_TEST(!table.get("jobs", t0).has_value(), when);
    const auto* r = table.find_record("jobs");
    BOOST_REQUIRE_MESSAGE(r != nullptr, when);
    BOOST_TEST(r->value == big, when);
    BOOST_TEST(r->version == 2u, when);
    BOOST_TEST(r->token == 1u, when);
    BOOST_TEST(r->owner == "leader", when);
  };
  check("replayed from the log");
  BOOST_TEST(compact_by_churn(dir.path()) > 0u);
  BOOST_TEST(fs::exists(dir.path() / "snapshot"));
  check("restored from the snapshot");
  compact_by_churn(dir.path());  // a snapshot made from a snapshot keeps it too
  check("restored from a second snapshot");
}

// A batch holding a record write is followed, in the same write, by a guard batch that every batond reads
// as a whole, valid batch. So a batond that predates records, which cannot decode the record batch, finds a
// valid batch after it: damage to acknowledged data, a refusal to start (exit 65), never a torn tail cut
// without a word. This server knows the guard, and still takes a torn record batch for a torn tail.
BOOST_AUTO_TEST_CASE(a_record_batch_is_guarded_against_older_servers_and_a_torn_one_is_still_cut) {
  temp_dir dir;
  const std::uint64_t record_batch = log_with_record_batch(dir.path(), std::string(3000, 'v'));
  const auto log = contents(wal_file(dir.path()));
  // The record batch, then the guard: a batch frame around one token_floor record of token 0.
  std::size_t used = 0;
  auto frame = decode_record(std::string_view(log).substr(record_batch), used);
  BOOST_REQUIRE(frame.has_value());
  const std::size_t guard_at = record_batch + used + frame->token;
  auto guard_frame = decode_record(std::string_view(log).substr(guard_at), used);
  BOOST_REQUIRE(guard_frame.has_value());
  BOOST_TEST((guard_frame->type == record_type::batch));
  std::vector<wal_record> guard;
  BOOST_REQUIRE(
      decode_batch(*guard_frame, std::string_view(log).substr(guard_at + used, guard_frame->token), guard));
  BOOST_REQUIRE(guard.size() == 1u);
  BOOST_TEST((guard[0].type == record_type::token_floor));  // a type every batond with frames knows
  BOOST_TEST(guard[0].token == 0u);                         // and a no-op for all of them
  BOOST_TEST(is_guard(guard[0]));
  BOOST_TEST(guard_at + used + guard_frame->token == log.size());
  // This server does not take the guard for evidence that the batch before it was acknowledged.
  BOOST_TEST(!data_files::next_acknowledged(log, record_batch + 1, true).has_value());
  // A power cut that tore the record batch (a lost sector) and kept the guard: a torn tail here.
  zero_bytes(wal_file(dir.path()), record_batch + 1024, 512);
  lock_table table;
  journal j(journal_options{dir.path()});
  recovery_stats stats;
  BOOST_REQUIRE_NO_THROW(stats = j.open(table, t0));
  BOOST_TEST(stats.torn_bytes == log.size() - record_batch);
  BOOST_TEST(table.find_record("jobs") == nullptr);
}

// The log as a server that predates records reads it: the record batch does not decode, and the guard after
// it is a whole batch, which by that server's rule (a whole batch after a bad one) is damage, a refusal.
BOOST_AUTO_TEST_CASE(to_an_older_server_the_record_batch_is_followed_by_a_whole_batch) {
  temp_dir dir;
  const std::uint64_t record_batch = log_with_record_batch(dir.path(), "v");
  auto log = contents(wal_file(dir.path()));
  // Make the record's type unknown (as to a server that predates records), checksums kept valid: the
  // batch no longer decodes, and the guard after it is a whole batch.
  std::size_t used = 0;
  auto frame = decode_record(std::string_view(log).substr(record_batch), used);
  BOOST_REQUIRE(frame.has_value());
  const std::size_t body = record_batch + used;
  std::size_t first = 0;
  BOOST_REQUIRE(decode_record(std::string_view(log).substr(body), first).has_value());
  const std::size_t rec = body + first;
  std::size_t rec_len = 0;
  BOOST_REQUIRE(decode_record(std::string_view(log).substr(rec), rec_len).has_value());
  std::string payload = log.substr(rec + record_header_size, rec_len - record_header_size);
  payload[0] = static_cast<char>(0x6e);  // a type no batond knows
  log.replace(rec, rec_len, framed(payload));
  encode_batch_frame(std::string_view(log).substr(body, frame->token), 2, log.data() + record_batch);
  std::vector<wal_record> out;
  BOOST_TEST(!decode_batch(*decode_record(std::string_view(log).substr(record_batch), used),
                           std::string_view(log).substr(body, frame->token), out));
  // An older server's rule: a whole batch after the bad one. The guard is one.
  std::size_t guard_used = 0;
  const std::size_t guard_at = body + frame->token;
  auto guard_frame = decode_record(std::string_view(log).substr(guard_at), guard_used);
  BOOST_REQUIRE(guard_frame.has_value());
  BOOST_TEST(decode_batch(*guard_frame,
                          std::string_view(log).substr(guard_at + guard_used, guard_frame->token), out));
}

// A lease's lock-delay is a record type older servers do not know (wal_record.hpp): like a record write, its
// batch is followed by a guard batch, so an older server refuses the log instead of cutting the delay off as
// a torn tail. Replayed here, the lease carries its delay.
BOOST_AUTO_TEST_CASE(a_lock_delay_batch_is_guarded_and_replays_onto_its_lease) {
  temp_dir dir;
  std::uint64_t at = 0;
  {
    lock_table table;
    journal j(journal_options{dir.path()});
    j.open(table, t0);
    at = fs::file_size(wal_file(dir.path()));
    j.append(record_type::acquire, 1, 60000, "k", "a");
    j.append(record_type::lock_delay, 1, 5000, "k");
    BOOST_REQUIRE(j.flush());
  }
  const auto log = contents(wal_file(dir.path()));
  std::size_t used = 0;
  auto frame = decode_record(std::string_view(log).substr(at), used);
  BOOST_REQUIRE(frame.has_value());
  std::vector<wal_record> batch;
  BOOST_REQUIRE(decode_batch(*frame, std::string_view(log).substr(at + used, frame->token), batch));
  BOOST_REQUIRE(batch.size() == 2u);
  BOOST_TEST((batch[1].type == record_type::lock_delay));
  BOOST_TEST(batch[1].ttl_ms == 5000u);
  const std::size_t guard_at = at + used + frame->token;
  auto guard_frame = decode_record(std::string_view(log).substr(guard_at), used);
  BOOST_REQUIRE(guard_frame.has_value());
  std::vector<wal_record> guard;
  BOOST_REQUIRE(
      decode_batch(*guard_frame, std::string_view(log).substr(guard_at + used, guard_frame->token), guard));
  BOOST_REQUIRE(guard.size() == 1u);
  BOOST_TEST(is_guard(guard[0]));
  lock_table table;
  journal j(journal_options{dir.path()});
  j.open(table, t0);
  BOOST_TEST(table.get("k", t0)->lock_delay.count() == 5000);
}

// Two records that mean one thing only together (a grant and its lease's lock-delay) go into one batch,
// which a crash keeps whole or not at all: appended one by one, the writer, woken by the first, could take
// it alone. Thousands of pairs under the running writer, then every batch of the log is read back: no
// batch holds a lock_delay record without its acquire just before it.
BOOST_AUTO_TEST_CASE(records_appended_together_are_never_split_between_batches) {
  temp_dir dir;
  constexpr std::uint64_t pairs = 3000;
  {
    lock_table table;
    journal j(journal_options{dir.path()});
    j.open(table, t0);
    j.start();
    std::uint64_t last = 0;
    for (std::uint64_t t = 1; t <= pairs; ++t) {
      const auto key = "k" + std::to_string(t);
      last = j.append_together({record_type::acquire, t, 60000, key, "a"},
                               {record_type::lock_delay, t, 5000, key});
    }
    for (int i = 0; i < 2000 && j.durable() < last; ++i)
      std::this_thread::sleep_for(5ms);  // 10 s at most
    BOOST_REQUIRE(j.durable() >= last);
    j.stop();
  }
  const auto log = contents(wal_file(dir.path()));
  std::size_t at = 0, batches = 0, delays = 0;
  while (at < log.size()) {
    std::size_t used = 0;
    auto frame = decode_record(std::string_view(log).substr(at), used);
    BOOST_REQUIRE(frame.has_value());
    BOOST_REQUIRE((frame->type == record_type::batch));
    std::vector<wal_record> batch;
    BOOST_REQUIRE(decode_batch(*frame, std::string_view(log).substr(at + used, frame->token), batch));
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].type != record_type::lock_delay) continue;
      ++delays;
      BOOST_TEST_REQUIRE(i > 0u,
                         "batch " << batches << " starts with token " << batch[i].token << "'s delay");
      BOOST_TEST((batch[i - 1].type == record_type::acquire));
      BOOST_TEST(batch[i - 1].token == batch[i].token);
    }
    ++batches;
    at += used + frame->token;
  }
  BOOST_TEST(delays == pairs);
  BOOST_TEST_MESSAGE(pairs << " pairs in " << batches << " batches (guard batches included)");
}
