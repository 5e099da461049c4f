// SPDX-License-Identifier: Apache-2.0
#pragma once
// Bearer-token authentication and per-key-prefix permissions for batond. Pure: parsing a tokens file,
// looking a token up and deciding whether a request may proceed take no sockets and no clock; only
// token_store reads the file (at startup and on SIGHUP).
//
// Tokens file (docs/security.md): one client per line, fields separated by spaces or tabs,
//
//   # comment lines and blank lines are ignored
//   sha256:<64 hex digits> <name> [rw:<prefix> | ro:<prefix> | admin:<prefix> | max_locks=<N>]...
//
// The hash is SHA-256 of the bearer token, so the file holds no secret. `rw:` grants acquire, renew,
// release and get on keys that start with the prefix; `ro:` grants get (and long-poll) only; `*` as the
// prefix means every key. `admin:` grants what `rw:` does and an operator's break of other clients' leases
// (POST /v1/locks/{key}/break); files without it mean what they always did. A client with no grant may still
// read /metrics. Several lines may share a name (two tokens of one client during a rotation): the name is the
// identity a lease is bound to. `max_locks=N` caps the locks the client may hold at once (the smallest N on
// any of its lines applies).

#include "protocol.hpp"

#include <array>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace baton::server::auth {

using digest = std::array<unsigned char, 32>;

/// Ordered: each level grants what the ones below it do.
enum class access { read, write, admin };

struct grant {
  std::string prefix;  // empty: every key (written `*` in the file)
  access level = access::read;
  friend bool operator==(const grant&, const grant&) = default;
};

struct client_entry {
  digest token_hash{};
  std::string name;
  std::vector<grant> grants;
  /// `max_locks=N`: the most locks this client may hold at once (none: only the server's --max-locks).
  std::optional<std::size_t> max_locks;
};

struct token_table {
  std::vector<client_entry> clients;
};

/// A tokens file that cannot be used; what() is "<source>:<line>: <reason>".
struct tokens_file_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr std::size_t max_client_name_bytes = 64;

/// Parses the text of a tokens file. `source` names the file in errors. Throws tokens_file_error at the
/// first bad line; nothing is returned for a partly valid file.
token_table parse_tokens(std::string_view text, std::string_view source);

/// Reads and parses a tokens file. Throws tokens_file_error (unreadable file or bad content).
token_table load_tokens(const std::string& path);

/// SHA-256 of `data`.
digest sha256(std::string_view data);

/// Equality of two byte ranges of length `n` in time that depends only on `n` (OpenSSL's CRYPTO_memcmp).
bool constant_time_equal(const unsigned char* a, const unsigned char* b, std::size_t n);

/// The entry whose hash matches SHA-256(`token`), or nullptr. Every entry is compared, and the match is
/// selected without a branch on the comparison, so the time taken does not say which entry (or whether
/// any) matched.
const client_entry* find_client(const token_table& table, std::string_view token);

/// Whether `client` may use `key` at `level` (an admin grant implies write, a write grant read).
bool permits(const client_entry& client, std::string_view key, access level);

/// The token of an `Authorization: Bearer <token>` header value, or nullopt when it is not one.
std::optional<std::string_view> bearer_token(std::string_view authorization);

/// The authenticated client name, or the error to answer (401 unauthorized, 403 forbidden).
using decision = std::variant<std::string, api_error>;

/// Checks only the token: the client's name, or 401. Used for a request whose target names no key (an
/// unknown route or a bad key): without a valid token a client learns nothing, not even that.
decision authenticate(const token_table& table, std::string_view authorization);

/// The lock quota of a client name: the smallest `max_locks` on any of its lines, or nullopt.
std::optional<std::size_t> lock_quota(const token_table& table, std::string_view name);

/// Decides one request. `/healthz` is open (returns an empty name); `/metrics` and `/v1/capabilities` need
/// any valid token; a `GET` of a key needs read access to it, a listing read access to its prefix; acquire,
/// renew and release need write access; a break needs admin access (403 `admin_required`).
/// `POST /v1/renew` itself needs any valid token, like `/metrics`: its keys are in the body.
decision authorize(const token_table& table, std::string_view authorization, const lock_target& target);

/// A batch renewal's keys, once its body is parsed: write access to every one, or 403 naming the first key
/// refused (the whole batch is refused; nothing is renewed).
decision authorize_renew_batch(const token_table& table, std::string_view authorization,
                               const renew_batch_request& batch);

/// The current table of a running server, replaced as a whole on reload. Thread-safe.
class token_store {
 public:
  /// Loads `path`; throws tokens_file_error.
  explicit token_store(std::string path);

  const std::string& path() const { return path_; }
  std::shared_ptr<const token_table> current() const;

  /// Reads the file again. On success the new table replaces the old one in one step and nullopt is
  /// returned; on failure the old table stays in force and the error is returned.
  std::optional<std::string> reload();

 private:
  std::string path_;
  mutable std::mutex mu_;
  std::shared_ptr<const token_table> table_;
};

}  // namespace baton::server::auth
