// SPDX-License-Identifier: Apache-2.0
#include "wal_record.hpp"

#include <boost/crc.hpp>

#include <cstring>

namespace baton::server {
namespace {

void put_u32(std::string& out, std::uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i)
    b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out.append(b, 4);
}
void put_u64(std::string& out, std::uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i)
    b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out.append(b, 8);
}
std::uint32_t get_u32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
std::uint64_t get_u64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

bool known_type(std::uint8_t t) {
  return (t >= static_cast<std::uint8_t>(record_type::acquire) &&
          t <= static_cast<std::uint8_t>(record_type::snapshot_end)) ||
         t == static_cast<std::uint8_t>(record_type::batch) ||
         t == static_cast<std::uint8_t>(record_type::token_floor) ||
         t == static_cast<std::uint8_t>(record_type::lock_record) ||
         t == static_cast<std::uint8_t>(record_type::lock_delay);
}

using crc32c_state = boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

// Walks the records of a batch body by their framing alone, feeding each one's checksum field to `crc`.
// Returns the number of records, or nullopt when a record's length runs past the body.
std::optional<std::uint64_t> checksum_fields(std::string_view body, crc32c_state& crc) {
  std::uint64_t n = 0;
  while (!body.empty()) {
    if (body.size() < record_header_size) return std::nullopt;
    std::uint64_t len = get_u32(body.data());
    if (body.size() - record_header_size < len) return std::nullopt;
    crc.process_bytes(body.data() + 4, 4);
    body.remove_prefix(record_header_size + len);
    ++n;
  }
  return n;
}

}  // namespace

std::uint32_t crc32c(std::string_view data) {
  crc32c_state crc;
  crc.process_bytes(data.data(), data.size());
  return crc.checksum();
}

bool is_guard(const wal_record& r) {
  return r.type == record_type::token_floor && r.token == 0 && r.ttl_ms == guard_marker;
}

void encode_batch_frame(std::string_view body, std::size_t records, char* out) {
  // The records' own checksums cover their bytes; the frame's covers which records are there, in order,
  // so a sector of other valid records (or none) in the body cannot pass for the batch.
  crc32c_state crc;
  checksum_fields(body, crc);
  std::string frame;
  frame.reserve(batch_frame_size);
  encode_record(record_type::batch, body.size(), (std::uint64_t{records} << 32) | crc.checksum(), {}, {},
                frame);
  std::memcpy(out, frame.data(), batch_frame_size);
}

bool decode_batch(const wal_record& frame, std::string_view body, std::vector<wal_record>& out) {
  if (frame.type != record_type::batch || body.size() != frame.token) return false;
  crc32c_state crc;
  auto n = checksum_fields(body, crc);
  if (!n || *n != frame.ttl_ms >> 32 || crc.checksum() != (frame.ttl_ms & 0xffffffffu)) return false;
  while (!body.empty()) {
    std::size_t used = 0;
    auto r = decode_record(body, used);
    if (!r || r->type == record_type::batch || r->type == record_type::snapshot_header ||
        r->type == record_type::snapshot_end)
      return false;
    out.push_back(std::move(*r));
    body.remove_prefix(used);
  }
  return true;
}

void encode_record(record_type type, std::uint64_t token, std::uint64_t ttl_ms, std::string_view key,
                   std::string_view owner, std::string& out, std::string_view client,
                   std::string_view value) {
  std::size_t start = out.size();
  out.append(record_header_size, '\0');
  const bool is_record = type == record_type::lock_record;
  const bool with_value = (type == record_type::acquire && !value.empty()) || is_record;
  out.push_back(with_value && !is_record ? static_cast<char>(acquire_value_type_byte)
                                         : static_cast<char>(type));
  put_u64(out, token);
  put_u64(out, ttl_ms);
  put_u32(out, static_cast<std::uint32_t>(key.size()));
  out.append(key);
  put_u32(out, static_cast<std::uint32_t>(owner.size()));
  out.append(owner);
  if (!client.empty() || with_value) {
    put_u32(out, static_cast<std::uint32_t>(client.size()));
    out.append(client);
  }
  if (with_value) {
    put_u32(out, static_cast<std::uint32_t>(value.size()));
    out.append(value);
  }
  std::string_view payload(out.data() + start + record_header_size, out.size() - start - record_header_size);
  std::uint32_t len = static_cast<std::uint32_t>(payload.size());
  std::uint32_t crc = crc32c(payload);
  for (int i = 0; i < 4; ++i) {
    out[start + i] = static_cast<char>((len >> (8 * i)) & 0xff);
    out[start + 4 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  }
}

void encode_record(const wal_record& r, std::string& out) {
  encode_record(r.type, r.token, r.ttl_ms, r.key, r.owner, out, r.client, r.value);
}

std::optional<wal_record> decode_record(std::string_view in, std::size_t& consumed) {
  if (in.size() < record_header_size) return std::nullopt;
  std::uint32_t len = get_u32(in.data());
  std::uint32_t crc = get_u32(in.data() + 4);
  if (len > max_payload_size || in.size() - record_header_size < len) return std::nullopt;
  std::string_view payload = in.substr(record_header_size, len);
  if (crc32c(payload) != crc) return std::nullopt;
  // Fixed part: type, token, ttl, key length.
  constexpr std::size_t fixed = 1 + 8 + 8 + 4;
  if (payload.size() < fixed + 4) return std::nullopt;
  const char* p = payload.data();
  auto type = static_cast<std::uint8_t>(p[0]);
  const bool is_record = type == static_cast<std::uint8_t>(record_type::lock_record);
  const bool with_value = type == acquire_value_type_byte || is_record;
  if (!known_type(type) && !with_value) return std::nullopt;
  wal_record r;
  r.type = type == acquire_value_type_byte ? record_type::acquire : static_cast<record_type>(type);
  r.token = get_u64(p + 1);
  r.ttl_ms = get_u64(p + 9);
  std::uint32_t key_len = get_u32(p + 17);
  if (payload.size() < fixed + key_len + 4) return std::nullopt;
  r.key.assign(p + fixed, key_len);
  std::uint32_t owner_len = get_u32(p + fixed + key_len);
  const std::size_t owner_end = fixed + key_len + 4 + std::size_t{owner_len};
  if (payload.size() < owner_end) return std::nullopt;
  r.owner.assign(p + fixed + key_len + 4, owner_len);
  if (with_value) {
    // Client (possibly empty) and value (never empty) are both present.
    if (payload.size() < owner_end + 4) return std::nullopt;
    const std::size_t client_end = owner_end + 4 + std::size_t{get_u32(p + owner_end)};
    if (payload.size() < client_end + 4) return std::nullopt;
    r.client.assign(p + owner_end + 4, client_end - owner_end - 4);
    std::uint32_t value_len = get_u32(p + client_end);
    // An acquire's value is never written empty (type 1 says "none"); a record's may be.
    if ((value_len == 0 && !is_record) || payload.size() != client_end + 4 + std::size_t{value_len})
      return std::nullopt;
    r.value.assign(p + client_end + 4, value_len);
  } else if (payload.size() != owner_end) {
    // The optional client field; it is never written empty.
    if (payload.size() < owner_end + 4) return std::nullopt;
    std::uint32_t client_len = get_u32(p + owner_end);
    if (client_len == 0 || payload.size() != owner_end + 4 + std::size_t{client_len}) return std::nullopt;
    r.client.assign(p + owner_end + 4, client_len);
  }
  consumed = record_header_size + len;
  return r;
}

}  // namespace baton::server
