// SPDX-License-Identifier: Apache-2.0
#include "permit_index.hpp"

#include "lock_table.hpp"

#include <charconv>

namespace baton::server {

std::string permit_key(std::string_view key, std::uint32_t permits, std::uint32_t slot) {
  if (permits <= 1) return std::string(key);
  std::string out;
  out.reserve(key.size() + 12);
  out.append(key);
  char digits[12];
  out += '\0';
  out.append(digits, std::to_chars(digits, digits + sizeof digits, permits).ptr);
  out += '\0';
  out.append(digits, std::to_chars(digits, digits + sizeof digits, slot).ptr);
  return out;
}

std::string broken_permit_key(std::string_view key, std::uint64_t token) {
  std::string out(key);
  out.append("\0#", 2);
  out += std::to_string(token);
  return out;
}

namespace {
bool parse_number(std::string_view text, std::uint32_t& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && end == text.data() + text.size();
}
}  // namespace

std::optional<permit_key_parts> parse_permit_key(std::string_view table_key) {
  const auto first = table_key.find('\0');
  if (first == std::string_view::npos) return std::nullopt;
  const auto second = table_key.find('\0', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  permit_key_parts p{table_key.substr(0, first)};
  if (!parse_number(table_key.substr(first + 1, second - first - 1), p.permits) ||
      !parse_number(table_key.substr(second + 1), p.slot) || p.permits < 2 || p.slot >= p.permits)
    return std::nullopt;
  return p;
}

bool permit_index::leased(const permit_key_parts& p, lease_entry& e, std::uint64_t token,
                          std::uint64_t old_token) {
  auto it = entries_.find(p.key);
  if (it == entries_.end()) it = add(p);
  entry& k = it->second;
  // A key's count is set by the first lease of an unused key: lock_table retires every lease and delay of
  // another count before it grants one, or restores one (docs/design.md, "Semaphores").
  if (k.permits != p.permits) return false;
  if (old_token != 0) k.by_token.erase(old_token);
  k.slots[p.slot] = &e;
  k.by_token[token] = p.slot;
  return true;
}

void permit_index::unleased(const permit_key_parts& p, std::uint64_t token) {
  auto it = entries_.find(p.key);
  if (it == entries_.end()) return;
  entry& k = it->second;
  if (auto t = k.by_token.find(token); t != k.by_token.end() && t->second == p.slot) {
    k.by_token.erase(t);
    k.slots.erase(p.slot);
  }
  drop_if_unused(it);
}

bool permit_index::delay_changed(const permit_key_parts& p, int delta) {
  auto it = entries_.find(p.key);
  if (delta > 0) {
    if (it == entries_.end()) it = add(p);
    if (it->second.permits != p.permits) return false;
    it->second.delayed.insert(p.slot);
    return true;
  }
  if (it == entries_.end() || it->second.permits != p.permits || !it->second.delayed.erase(p.slot))
    return false;
  drop_if_unused(it);
  return true;
}

permit_index::entry_map::iterator permit_index::add(const permit_key_parts& p) {
  auto it = entries_.try_emplace(std::string(p.key)).first;
  it->second.permits = p.permits;
  return it;
}

void permit_index::drop_if_unused(entry_map::iterator it) {
  if (it->second.slots.empty() && it->second.delayed.empty()) entries_.erase(it);
}

}  // namespace baton::server
