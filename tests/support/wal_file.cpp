// SPDX-License-Identifier: Apache-2.0
#include "wal_file.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace baton::test {

namespace {

std::size_t le32(const std::string& data, std::size_t at) {
  std::size_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= std::size_t{static_cast<unsigned char>(data[at + i])} << (8 * i);
  return v;
}

bool is_wal_name(const std::string& name) {
  if (name.size() != 4 + 16 + 4 || name.rfind("wal-", 0) != 0 || name.substr(20) != ".log") return false;
  for (char c : name.substr(4, 16))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

std::string file_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + file.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<wal_frame> wal_frames(const std::filesystem::path& log) {
  constexpr std::size_t header = 8;
  const std::string data = file_bytes(log);
  std::vector<wal_frame> out;
  std::size_t at = 0;
  while (data.size() - at >= header) {
    std::size_t size = header + le32(data, at);
    // A batch frame (type byte 8) covers the records after it: its token field is their length.
    if (size >= header + 9 && static_cast<unsigned char>(data[at + header]) == 8 && data.size() - at >= size)
      size += le32(data, at + header + 1) + (std::size_t{le32(data, at + header + 5)} << 32);
    if (data.size() - at < size) break;
    out.push_back({at, size});
    at += size;
  }
  return out;
}

std::filesystem::path newest_wal(const std::filesystem::path& data_dir) {
  // Sixteen hex digits, zero-padded: the names sort like the generations.
  std::filesystem::path newest;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir)) {
    auto name = entry.path().filename().string();
    if (is_wal_name(name) && (newest.empty() || name > newest.filename().string())) newest = entry.path();
  }
  if (newest.empty()) throw std::runtime_error("no wal-*.log in " + data_dir.string());
  return newest;
}

void flip_bit(const std::filesystem::path& file, std::size_t offset, int bit) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + file.string());
  f.seekg(static_cast<std::streamoff>(offset));
  char byte;
  if (!f.get(byte))
    throw std::runtime_error(file.string() + " has no byte at offset " + std::to_string(offset));
  byte = static_cast<char>(byte ^ (1 << bit));
  f.seekp(static_cast<std::streamoff>(offset));
  if (!f.put(byte) || !f.flush()) throw std::runtime_error("cannot write " + file.string());
}

}  // namespace baton::test
