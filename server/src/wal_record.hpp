// SPDX-License-Identifier: Apache-2.0
#pragma once
// The on-disk record format shared by the write-ahead log and snapshots. Pure encode/decode, no I/O.
//
//   record  = u32 payload_len | u32 crc32c(payload) | payload          (little-endian)
//   payload = u8 type | u64 token | u64 ttl_ms | u32 key_len | key | u32 owner_len | owner
//             [ | u32 client_len | client ]
//
// The client field (the authenticated name a lease is bound to, docs/security.md) is written only when it
// is not empty, so a server without a tokens file writes exactly the original format, and a record without
// it decodes with an empty client.
//
// An acquire whose lease carries a value (docs/protocol.md, "value") is written under its own type byte,
// acquire_value, with every field present:
//
//   payload = u8 7 | u64 token | u64 ttl_ms | u32 key_len | key | u32 owner_len | owner
//             | u32 client_len | client | u32 value_len | value                   (value_len >= 1)
//
// and decodes as an acquire record with `value` set. An acquire without a value is written exactly as
// before, so a data directory that never saw a value stays readable by servers older than values, and
// every directory they wrote reads the same here.
//
// A proclaim (docs/protocol.md, "proclaim": a new value for a held lease, same token) is logged as an
// acquire record with the lease's own token and restore TTL and the new value (type 7, or type 1 when the
// new value is empty). Replay installs a record whose token equals the lease's over it (lock_table::restore),
// so the lease comes back with its last value; compaction writes the table as it is, value included. No new
// type byte: a server that predates proclaim but reads values replays such a log correctly, where an unknown
// type would make it read the batch as torn or damaged, and drop acknowledged records with it.
//
// A write of a lock's record (docs/protocol.md, "record": a value kept for a key beyond any lease) has a
// type byte of its own, with every field present and the record's version where a TTL would be:
//
//   payload = u8 10 | u64 token | u64 version | u32 key_len | key | u32 owner_len | owner
//             | u32 client_len | client | u32 value_len | value                   (value_len >= 0)
//
// Snapshots hold one such record per lock record, after the leases. Unlike a proclaim, a record is not a
// lease and no older record type can carry it; so a server that predates records must refuse such a
// directory rather than drop what it does not know. An unknown type makes a snapshot damaged (refused), but
// in the last batch of a log it reads as a torn write, which would be cut without a word. So a batch that
// holds a record write is followed, in the same write(2), by a guard batch: a batch frame around one
// token_floor record of token 0 and ttl_ms guard_marker, a no-op to every server. To an older server that
// meets the record, a whole batch after an undecodable one is damage to acknowledged data: it refuses to
// start (status 65, naming the file and offset) instead. This server knows the guard belongs to the batch
// before it, so a power cut that keeps the guard and tears that batch is still a torn tail here.
//
// A lease's lock-delay (docs/protocol.md, "Lock-delay") has a type byte of its own, in the plain format
// (empty owner, no client), the delay where a TTL would be:
//
//   payload = u8 11 | u64 token | u64 delay_ms | u32 key_len | key | u32 0
//
// It means one of three things, by what the table holds when it is replayed. Right after the acquire of
// lease `token`, that lease carries the delay (a grant with a lock-delay appends both together, into one
// batch, journal::append_together, and its answer waits for them). For a key whose lease `token` is gone (a
// snapshot writes one for each key in lock-delay, with no acquire), the key is in lock-delay, begun again in
// full at recovery. A break of a lease with a delay is logged as its expiry, one record. With delay_ms 0 it
// says that key's delay after `token` is over (the sweep logs it, lazily: losing one only keeps a key in
// lock-delay longer). An expire record of a lease that carries a delay also begins the delay in full at
// recovery. Like a record write, an older server must not read past it as if the delay had not been asked
// for: its batch is followed by a guard batch, and a snapshot holding one is refused by an older server as
// damaged.
//
// The log frames each group-commit batch (one write, one fdatasync) with a record of its own, written in
// front of the batch's records:
//
//   frame   = record of type batch: token = length of the body in bytes,
//             ttl_ms = u32 record count (high half) | crc32c of the records' checksum fields (low half)
//   body    = the batch's records, back to back
//
// A power cut during a batch's write may keep any subset of its sectors (the disk orders nothing before
// the fdatasync returns), so a lost sector in the middle of the last batch, with a later one kept, is not
// damage: the whole batch was never acknowledged. The frame says where a batch ends and whether all of it
// is there, so recovery drops an incomplete last batch whole and still refuses damage to an acknowledged
// one (docs/design.md, "Batch frames"). An empty frame (no body) marks a log whose batches are framed from
// there on; logs written before frames existed hold bare records and read as before.
//
// A reader stops at the first record (or batch) whose length or checksum does not match: that is a torn
// write from a crash and everything after it was never acknowledged.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace baton::server {

enum class record_type : std::uint8_t {
  acquire = 1,          // key granted to owner with token; ttl_ms is the TTL granted
  release = 2,          // key with token freed by its owner
  expire = 3,           // key with token expired (logged lazily; losing one only keeps a lease longer)
  extend = 4,           // key with token renewed with a TTL larger than any before (the restore TTL grew)
  snapshot_header = 5,  // snapshot files only: token = last issued token, ttl_ms = generation
  snapshot_end = 6,     // snapshot files only: token = number of entries
  batch = 8,            // logs only: the frame of a group-commit batch (above)
  token_floor = 9,      // logs only: token = a floor the counter passed at recovery (no grant above it)
  lock_record = 10,     // a record write: key, owner, client, value; token; ttl_ms = the record's version
  lock_delay = 11,      // lease token's lock-delay: ttl_ms = the delay in ms (0: a key's delay is over)
};

/// The type byte on disk of an acquire record with a value (see above). Never a wal_record::type: such a
/// record decodes as record_type::acquire with a non-empty value.
inline constexpr std::uint8_t acquire_value_type_byte = 7;

/// The ttl_ms of a guard batch's token_floor record (above).
inline constexpr std::uint64_t guard_marker = 0x7265636f7264;  // "record"

struct wal_record {
  record_type type{};
  std::uint64_t token = 0;
  std::uint64_t ttl_ms = 0;
  std::string key;
  std::string owner;
  std::string client{};  // empty: no client name (the original format)
  std::string value{};   // acquire: the value published with the lease (empty: none); lock_record: the value

  friend bool operator==(const wal_record&, const wal_record&) = default;
};

/// True when `r` is the record of a guard batch (above; data_files::guard_batch writes one).
bool is_guard(const wal_record& r);

/// Bytes of framing before the payload.
inline constexpr std::size_t record_header_size = 8;
/// Upper bound on a payload: anything larger is corruption, not a record.
inline constexpr std::uint32_t max_payload_size = 1u << 20;

/// Appends the encoded record to `out`.
void encode_record(const wal_record& r, std::string& out);
void encode_record(record_type type, std::uint64_t token, std::uint64_t ttl_ms, std::string_view key,
                   std::string_view owner, std::string& out, std::string_view client = {},
                   std::string_view value = {});

/// Decodes the record at the front of `in`. Returns the record and sets `consumed`, or nullopt when `in`
/// does not start with a whole, valid record (truncated, bad checksum, unknown type).
std::optional<wal_record> decode_record(std::string_view in, std::size_t& consumed);

std::uint32_t crc32c(std::string_view data);

/// Bytes of a batch frame (a record of type batch).
inline constexpr std::size_t batch_frame_size = record_header_size + 1 + 8 + 8 + 4 + 4;

/// Writes the frame of `body` (the encoded records of one batch, `records` of them) into the
/// batch_frame_size bytes at `out`.
void encode_batch_frame(std::string_view body, std::size_t records, char* out);

/// Decodes the batch that `frame` (a decoded record of type batch) describes from `body`, which must be
/// exactly frame.token bytes long, appending its records to `out`. Returns false, with `out` holding any
/// prefix, unless every record decodes, none is a frame or a snapshot record, and their count and
/// checksums are the frame's.
bool decode_batch(const wal_record& frame, std::string_view body, std::vector<wal_record>& out);

}  // namespace baton::server
