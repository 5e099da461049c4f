// SPDX-License-Identifier: Apache-2.0
#include "auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>

namespace baton::server::auth {
namespace {

constexpr std::string_view hash_scheme = "sha256:";
constexpr std::string_view whitespace = " \t\r";

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  for (std::size_t pos = 0;;) {
    pos = line.find_first_not_of(whitespace, pos);
    if (pos == std::string_view::npos) break;
    std::size_t end = line.find_first_of(whitespace, pos);
    if (end == std::string_view::npos) end = line.size();
    out.push_back(line.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<digest> parse_hash(std::string_view field) {
  if (!field.starts_with(hash_scheme)) return std::nullopt;
  field.remove_prefix(hash_scheme.size());
  digest d{};
  if (field.size() != 2 * d.size()) return std::nullopt;
  for (std::size_t i = 0; i < d.size(); ++i) {
    int hi = hex_value(field[2 * i]), lo = hex_value(field[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    d[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return d;
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > max_client_name_bytes) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-' || c == '@' || c == ':';
    if (!ok) return false;
  }
  return true;
}

// Tabs separate fields and a CRLF line ending is accepted; any other control character is refused.
bool has_control_chars(std::string_view line) {
  if (line.ends_with('\r')) line.remove_suffix(1);
  for (unsigned char c : line)
    if ((c < 0x20 && c != '\t') || c == 0x7f) return true;
  return false;
}

}  // namespace

digest sha256(std::string_view data) {
  digest d{};
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), d.data(), &len, EVP_sha256(), nullptr) != 1 || len != d.size())
    throw std::runtime_error("SHA-256 failed in libcrypto");
  return d;
}

bool constant_time_equal(const unsigned char* a, const unsigned char* b, std::size_t n) {
  return CRYPTO_memcmp(a, b, n) == 0;
}

token_table parse_tokens(std::string_view text, std::string_view source) {
  token_table table;
  std::map<digest, std::size_t> seen;  // hash -> line it was defined on
  std::size_t line_no = 0;
  auto fail = [&](const std::string& reason) -> tokens_file_error {
    return tokens_file_error(std::string(source) + ":" + std::to_string(line_no) + ": " + reason);
  };
  for (std::size_t pos = 0; pos <= text.size();) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    auto fields = split_fields(line);
    if (fields.empty() || fields[0].starts_with('#')) continue;
    if (has_control_chars(line)) throw fail("control characters are not allowed (only spaces and tabs)");
    if (fields.size() < 2)
      throw fail(
          "expected \"sha256:<64 hex digits> <name> "
          "[rw:<prefix>|ro:<prefix>|admin:<prefix>|max_locks=<N>]...\"");
    auto hash = parse_hash(fields[0]);
    if (!hash) throw fail("token hash must be \"sha256:\" followed by 64 hex digits (SHA-256 of the token)");
    if (auto it = seen.find(*hash); it != seen.end())
      throw fail("the same token hash is already on line " + std::to_string(it->second));
    if (!valid_name(fields[1]))
      throw fail("client name \"" + std::string(fields[1]) + "\" must be 1 to " +
                 std::to_string(max_client_name_bytes) + " characters of A-Z a-z 0-9 . _ - @ :");
    client_entry entry{*hash, std::string(fields[1]), {}, std::nullopt};
    for (std::size_t i = 2; i < fields.size(); ++i) {
      std::string_view f = fields[i];
      if (f.starts_with("max_locks=")) {
        std::string_view n = f.substr(10);
        std::size_t value = 0;
        auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), value);
        if (n.empty() || ec != std::errc() || end != n.data() + n.size())
          throw fail("\"" + std::string(f) + "\" must be max_locks=<N> with N a whole number");
        if (entry.max_locks) throw fail("max_locks is given twice");
        entry.max_locks = value;
        continue;
      }
      grant g;
      std::string_view prefix;
      if (f.starts_with("rw:")) {
        g.level = access::write;
        prefix = f.substr(3);
      } else if (f.starts_with("ro:")) {
        g.level = access::read;
        prefix = f.substr(3);
      } else if (f.starts_with("admin:")) {
        g.level = access::admin;
        prefix = f.substr(6);
      } else {
        throw fail("permission \"" + std::string(f) +
                   "\" must be rw:<prefix>, ro:<prefix>, admin:<prefix> or max_locks=<N>");
      }
      if (prefix.empty())
        throw fail("permission \"" + std::string(f) + "\" has no prefix (write * for every key)");
      if (prefix.size() > max_key_bytes)
        throw fail("prefix is longer than a key can be (" + std::to_string(max_key_bytes) + " bytes)");
      if (prefix != "*") g.prefix = prefix;
      entry.grants.push_back(std::move(g));
    }
    seen.emplace(*hash, line_no);
    table.clients.push_back(std::move(entry));
  }
  return table;
}

token_table load_tokens(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw tokens_file_error(path + ": cannot open the tokens file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw tokens_file_error(path + ": cannot read the tokens file");
  return parse_tokens(text.str(), path);
}

const client_entry* find_client(const token_table& table, std::string_view token) {
  const digest presented = sha256(token);
  const std::size_t n = table.clients.size();
  std::size_t match = n;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t eq =
        constant_time_equal(presented.data(), table.clients[i].token_hash.data(), presented.size());
    const std::size_t mask = std::size_t{0} - eq;  // all ones when equal
    match = (i & mask) | (match & ~mask);
  }
  return match < n ? &table.clients[match] : nullptr;
}

std::optional<std::size_t> lock_quota(const token_table& table, std::string_view name) {
  std::optional<std::size_t> quota;
  for (const auto& c : table.clients)
    if (c.name == name && c.max_locks) quota = quota ? std::min(*quota, *c.max_locks) : *c.max_locks;
  return quota;
}

bool permits(const client_entry& client, std::string_view key, access level) {
  for (const auto& g : client.grants)
    if (key.starts_with(g.prefix) && g.level >= level) return true;
  return false;
}

std::optional<std::string_view> bearer_token(std::string_view authorization) {
  // The scheme is case-insensitive (RFC 9110 11.1); exactly one space, then the token.
  constexpr std::string_view scheme = "bearer ";
  if (authorization.size() <= scheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    char c = authorization[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != scheme[i]) return std::nullopt;
  }
  std::string_view token = authorization.substr(scheme.size());
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t'))
    token.remove_suffix(1);
  if (token.empty() || token.find_first_of(" \t") != std::string_view::npos) return std::nullopt;
  return token;
}

namespace {
std::variant<const client_entry*, api_error> find_caller(const token_table& table,
                                                         std::string_view authorization) {
  auto token = bearer_token(authorization);
  if (!token)
    return api_error{401, "unauthorized",
                     authorization.empty() ? "this server requires an Authorization: Bearer <token> header"
                                           : "the Authorization header must be \"Bearer <token>\""};
  const client_entry* client = find_client(table, *token);
  if (!client) return api_error{401, "unauthorized", "the bearer token is not valid"};
  return client;
}
}  // namespace

decision authenticate(const token_table& table, std::string_view authorization) {
  auto caller = find_caller(table, authorization);
  if (auto* e = std::get_if<api_error>(&caller)) return std::move(*e);
  return std::get<const client_entry*>(caller)->name;
}

decision authorize(const token_table& table, std::string_view authorization, const lock_target& target) {
  if (target.what == lock_target::kind::healthz) return std::string();
  auto caller = find_caller(table, authorization);
  if (auto* e = std::get_if<api_error>(&caller)) return std::move(*e);
  const client_entry* client = std::get<const client_entry*>(caller);
  if (target.what == lock_target::kind::metrics || target.what == lock_target::kind::capabilities ||
      target.what == lock_target::kind::renew_batch)
    return client->name;
  // A record is read as the lock is (GET), and written as the lease is renewed (write access). A listing
  // reads every key under its prefix (the target's key): read access to the prefix itself. A break ends
  // another client's lease: admin access only (docs/security.md).
  using kind = lock_target::kind;
  const access need =
      target.what == kind::get || target.what == kind::record_read || target.what == kind::list ? access::read
      : target.what == kind::break_lease ? access::admin
                                         : access::write;
  if (!permits(*client, target.key, need)) {
    if (need == access::admin)
      return api_error{
          403, "admin_required",
          "client \"" + client->name + "\" may not break leases of this key (needs admin:<prefix>)"};
    if (target.what == kind::list)
      return api_error{403, "forbidden",
                       "client \"" + client->name +
                           "\" may not read every key under this prefix (needs "
                           "ro:, rw: or admin: with a prefix it starts with)"};
    if (need == access::write && permits(*client, target.key, access::read))
      return api_error{403, "forbidden", "client \"" + client->name + "\" may only read this key"};
    return api_error{403, "forbidden", "client \"" + client->name + "\" has no access to this key"};
  }
  return client->name;
}

decision authorize_renew_batch(const token_table& table, std::string_view authorization,
                               const renew_batch_request& batch) {
  auto caller = find_caller(table, authorization);
  if (auto* e = std::get_if<api_error>(&caller)) return std::move(*e);
  const client_entry* client = std::get<const client_entry*>(caller);
  for (const auto& entry : batch.leases) {
    if (permits(*client, entry.key, access::write)) continue;
    return api_error{403, "forbidden",
                     "client \"" + client->name + "\" may not renew the key \"" + entry.key +
                         "\" (needs write access); nothing in the batch was renewed"};
  }
  return client->name;
}

token_store::token_store(std::string path)
    : path_(std::move(path)), table_(std::make_shared<const token_table>(load_tokens(path_))) {}

std::shared_ptr<const token_table> token_store::current() const {
  std::lock_guard lk(mu_);
  return table_;
}

std::optional<std::string> token_store::reload() {
  try {
    auto fresh = std::make_shared<const token_table>(load_tokens(path_));
    std::lock_guard lk(mu_);
    table_ = std::move(fresh);
    return std::nullopt;
  } catch (const tokens_file_error& e) {
    return std::string(e.what());
  }
}

}  // namespace baton::server::auth
