// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: batond's write-ahead log as bytes, to damage it the way a disk does. A record is framed as
// u32 payload_len | u32 crc32c(payload) | payload, little-endian, and each group-commit batch is a record of
// type 8 whose u64 token is the length of the records after it (server/src/wal_record.hpp); logs are named
// wal-<16 hex digits of the generation>.log.

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace baton::test {

/// One whole unit of a log file: a batch (its frame and the records it covers; an empty frame first in
/// every log) or, in a log written before batches were framed, a bare record. Where it starts and its
/// length, headers included.
struct wal_frame {
  std::size_t offset = 0;
  std::size_t size = 0;
};

/// The whole units from the start of `log`, up to the first incomplete one (a torn tail). Units are found
/// by their length fields alone; checksums are not verified.
std::vector<wal_frame> wal_frames(const std::filesystem::path& log);

/// The log of the newest generation in `data_dir`. Throws if there is none.
std::filesystem::path newest_wal(const std::filesystem::path& data_dir);

/// Inverts bit `bit` (0-7) of the byte at `offset` of `file`, in place. Throws if the file is shorter.
void flip_bit(const std::filesystem::path& file, std::size_t offset, int bit);

/// The whole content of `file`.
std::string file_bytes(const std::filesystem::path& file);

}  // namespace baton::test
