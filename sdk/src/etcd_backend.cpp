// SPDX-License-Identifier: Apache-2.0
// The etcd backend: Baton's lock semantics on etcd 3.4+ through its v3 JSON gateway (docs/sdk.md, etcd).
//
//   entry    = the key's value: the owner, or, for a lease that carries a value (docs/protocol.md, "value"),
//              owner NUL value. Owners hold no control characters, so the NUL is unambiguous, and an entry
//              without a value is exactly what backends before values wrote and read.
//   acquire  = /v3/lease/grant (TTL in whole seconds, rounded up) + /v3/kv/txn "create_revision == 0 →
//              put with the lease; else read the holder". The fencing token is the key's create_revision:
//              cluster-wide monotonic and durable across restarts and leader changes (lease IDs are not
//              ordered).
//   renew    = read the key (still ours: same create_revision and owner?) + /v3/lease/keepalive; an answer
//              without TTL means the lease is gone.
//   release  = txn "create_revision == token and value == entry → delete", then /v3/lease/revoke; the
//              entry is first taken to be the bare owner, and when the key holds this owner's token with a
//              value, the txn is repeated with that exact entry (an entry never changes under one
//              create_revision).
//   proclaim = read the key (still ours: same create_revision and owner?) + txn "mod_revision == the read's →
//              put the new entry with the key's own lease" (etcd's Election.Proclaim): the token (the key's
//              create_revision) and the lease, so the expiry, stay.
//   record   = a lock's record (docs/protocol.md, "record") is the key <prefix without its last '/'>.records/
//              <key>, outside the locks' range (and so outside the loss watch), with no etcd lease: its value
//              is the token in decimal, NUL, the owner, NUL, the record's value. A write reads the lock key
//              and the record in one txn, decides as proclaim does (then refuses a record of a larger token),
//              and puts the record in a txn "lock key's mod_revision == the read's and record's mod_revision
//              == the read's" (again from a fresh read when either changed). The version is etcd's own
//              `version` of the record key: its puts since it was created.
//   wait     = /v3/watch on the key from the revision after the read that found it held, on a connection of
//              its own (TLS over etcds://, as every request), so a waiter wakes at the delete; bounded
//              polling (100 ms) when the watch fails.
// Never /v3/lock or /v3/election: with lease 0 they make a hidden 60 s lease nobody renews, and 3.4's lock
// can report success after the caller's lease expired while waiting.

#include "baton/backend.hpp"
#include "baton/error.hpp"
#include "etcd_prefix.hpp"
#include "etcd_version.hpp"
#include "http_transport.hpp"
#include "tls_context.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/detail/base64.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <unordered_map>

namespace baton {
namespace {
namespace asio = boost::asio;
namespace json = boost::json;
namespace b64 = boost::beast::detail::base64;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using detail::http_result;
using detail::string_field;
using detail::uint_field;
using clock = std::chrono::steady_clock;

std::string encode64(std::string_view s) {
  std::string out(b64::encoded_size(s.size()), '\0');
  out.resize(b64::encode(out.data(), s.data(), s.size()));
  return out;
}

std::string decode64(std::string_view s) {
  std::string out(b64::decoded_size(s.size()), '\0');
  out.resize(b64::decode(out.data(), s.data(), s.size()).first);
  return out;
}

const json::value* path(const json::value& v, std::initializer_list<std::string_view> keys) {
  const json::value* cur = &v;
  for (auto k : keys) {
    if (!cur->is_object()) return nullptr;
    cur = cur->as_object().if_contains(k);
    if (!cur) return nullptr;
  }
  return cur;
}

// The revision in a txn answer's header, which becomes the fencing token; false when it is missing (an
// answer without it must not be taken for a grant with token 0).
bool header_revision(const json::value& body, std::uint64_t& out) {
  const json::value* header = path(body, {"header"});
  return header && uint_field(*header, "revision", out) && out != 0;
}

// The first key-value of one response of a txn, or null.
const json::value* kv_of(const json::value& response) {
  const json::value* kvs = path(response, {"response_range", "kvs"});
  if (!kvs || !kvs->is_array() || kvs->as_array().empty()) return nullptr;
  return &kvs->as_array()[0];
}

// The first kv of the first response of a txn or of a range answer, if any.
const json::value* first_kv(const json::value& body, bool in_txn) {
  if (in_txn) {
    auto* responses = path(body, {"responses"});
    if (!responses || !responses->is_array() || responses->as_array().empty()) return nullptr;
    return kv_of(responses->as_array()[0]);
  }
  const json::value* kvs = path(body, {"kvs"});
  if (!kvs || !kvs->is_array() || kvs->as_array().empty()) return nullptr;
  return &kvs->as_array()[0];
}

// A lock record as stored in etcd: token NUL owner NUL value (the value may hold NULs; the owner holds
// none). A value of another shape reads as token 0.
struct stored_record {
  std::uint64_t token = 0;
  std::string owner;
  std::string value;
};
stored_record split_record(std::string_view s) {
  stored_record out;
  const auto first = s.find('\0');
  const auto second = first == std::string_view::npos ? first : s.find('\0', first + 1);
  if (second == std::string_view::npos) return out;
  for (char c : s.substr(0, first)) {
    if (c < '0' || c > '9' || out.token > (UINT64_MAX - 9) / 10) return {};
    out.token = out.token * 10 + static_cast<std::uint64_t>(c - '0');
  }
  out.owner.assign(s.substr(first + 1, second - first - 1));
  out.value.assign(s.substr(second + 1));
  return out;
}

// The key's value in etcd: the owner, then NUL and the lease's value when it has one.
std::string entry_of(std::string_view owner, std::string_view value) {
  std::string out(owner);
  if (!value.empty()) {
    out.push_back('\0');
    out.append(value);
  }
  return out;
}

struct entry {
  std::string owner, value;
};
entry split_entry(std::string_view e) {
  auto nul = e.find('\0');
  if (nul == std::string_view::npos) return {std::string(e), {}};
  return {std::string(e.substr(0, nul)), std::string(e.substr(nul + 1))};
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The URL's user or password as etcd is to be told it: %XY is the byte XY (RFC 3986, 2.1). The message never
// quotes the text, which may be a password.
std::string percent_decoded(std::string_view text, const char* what) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const int hi = i + 2 < text.size() ? hex_digit(text[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_digit(text[i + 2]) : -1;
    if (lo < 0)
      throw exception(error::invalid_config, std::string("etcd URL credentials: the ") + what +
                                                 " has a '%' that is not followed by two hex digits "
                                                 "(write a '%' itself as %25)");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// etcd_password_file's content without one trailing newline; the message names the file, never its content.
std::string read_password_file(const std::string& path) {
  const auto refused = [&](const std::string& why) {
    return exception(error::invalid_config, "etcd_password_file \"" + path + "\": " + why);
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw refused(std::string("cannot read: ") + std::strerror(errno));
  std::string password;
  char buf[4096];
  for (;;) {
    const auto n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      throw refused(std::string("cannot read: ") + std::strerror(e));
    }
    password.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  // One line ending, as an editor or `echo` leaves it; anything else (spaces included) is the password's.
  if (password.ends_with('\n')) {
    password.pop_back();
    if (password.ends_with('\r')) password.pop_back();
  }
  if (password.empty()) throw refused("the file is empty");
  return password;
}

struct etcd_endpoint {
  std::string host, port, name;
};

// Whether this process has yet to print the warning about the etcd member `name` (host:port as the URL
// writes it) on stderr, where a process with many clients of one cluster (`baton conformance` makes about
// ten) would otherwise print it once per client. Thread-safe; the set lives as long as the process, so a
// backend destroyed during exit never reaches a destroyed one.
bool first_stderr_warning(const std::string& name) {
  static std::mutex mutex;
  static auto* const warned = new std::set<std::string>;
  std::lock_guard lock(mutex);
  return warned->insert(name).second;
}

// How a watch on the key ended.
enum class watch_end { changed, timed_out, failed, cancelled };

class etcd_backend final : public backend, public std::enable_shared_from_this<etcd_backend> {
 public:
  etcd_backend(asio::any_io_executor ex, const client_config& config)
      : ex_(std::move(ex)),
        watch_open_timeout_(config.request_timeout),
        revocation_bug_(config.etcd_lease_revocation_bug),
        on_event_(config.on_event) {
    // etcd://host:port[,host:port...][/key/prefix/]; etcds:// speaks TLS to every member, one tls_config.
    std::string_view rest(config.server_url);
    const bool tls = rest.rfind("etcds://", 0) == 0;
    rest.remove_prefix(rest.find("://") + 3);
    // One context for every member's connections, watches included, so one reload changes them all.
    if (tls) tls_context_ = detail::make_client_tls(config.tls);
    auto slash = rest.find('/');
    std::string_view hosts = rest.substr(0, slash);
    // etcd's own authentication: etcd://user:password@host:port,..., each part percent-encoded as RFC 3986
    // has it (a password with '@', ':' or '/' is written p%40ss), or etcd://user@... with the password in
    // config.etcd_password_file.
    if (auto at = hosts.rfind('@'); at != std::string_view::npos) {
      std::string_view userinfo = hosts.substr(0, at);
      auto colon = userinfo.find(':');
      if (colon == 0 || (colon == std::string_view::npos && config.etcd_password_file.empty()))
        throw exception(error::invalid_config,
                        "etcd URL credentials must be user:password@ (or user@ with etcd_password_file)");
      if (colon != std::string_view::npos && !config.etcd_password_file.empty())
        throw exception(error::invalid_config,
                        "server_url holds a password and etcd_password_file is set: give the password once");
      user_ = percent_decoded(userinfo.substr(0, colon), "user");
      password_ = colon == std::string_view::npos ? read_password_file(config.etcd_password_file)
                                                  : percent_decoded(userinfo.substr(colon + 1), "password");
      hosts.remove_prefix(at + 1);
    } else if (!config.etcd_password_file.empty()) {
      throw exception(error::invalid_config,
                      "etcd_password_file needs a user in server_url (etcd://user@host:port)");
    }
    prefix_ = detail::etcd_key_prefix(slash == std::string_view::npos ? std::string_view()
                                                                      : rest.substr(slash + 1));
    while (!hosts.empty()) {
      auto comma = hosts.find(',');
      std::string_view one = hosts.substr(0, comma);
      auto colon = one.rfind(':');
      if (one.empty() || colon == std::string_view::npos || colon == 0 || colon + 1 == one.size())
        throw exception(error::invalid_config,
                        "etcd endpoint \"" + std::string(one) + "\" must be host:port");
      std::string host(one.substr(0, colon));
      if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
      endpoints_.push_back(std::make_unique<detail::http_transport>(
          ex_, host, std::string(one.substr(colon + 1)), std::string(one), config.max_idle_connections,
          config.max_connections, tls_context_));
      hosts_.push_back({host, std::string(one.substr(colon + 1)), std::string(one)});
      probed_.push_back(false);
      warned_.push_back(false);
      authenticated_.push_back(false);
      if (comma == std::string_view::npos) break;
      hosts.remove_prefix(comma + 1);
    }
    if (endpoints_.empty()) throw exception(error::invalid_config, "etcd URL names no endpoint");
  }

  asio::awaitable<acquire_reply> acquire(std::string key, std::string owner, milliseconds ttl,
                                         std::string value, milliseconds timeout) override {
    const auto deadline = clock::now() + timeout;
    acquire_reply out;
    const std::string k = encode64(prefix_ + key), v = encode64(entry_of(owner, value));
    // Whole seconds, rounded up: etcd never ends the lease before the TTL the caller asked for.
    const auto ttl_s = std::max<std::int64_t>(1, (ttl.count() + 999) / 1000);
    json::object body1{{"TTL", std::to_string(ttl_s)}};
    auto g = co_await call("/v3/lease/grant", body1, deadline);
    std::uint64_t lease = 0;
    if (!g.ec && !uint_field(g.body, "ID", lease)) protocol(g, "lease grant answer has no ID");
    if (g.ec) co_return fail<acquire_reply>(g);

    // Creates the key under `with_lease` if it does not exist; reads it otherwise.
    auto create_txn = [&](std::uint64_t with_lease) {
      return json::object{
          {"compare", json::array{json::object{
                          {"key", k}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}}},
          {"success", json::array{json::object{
                          {"request_put",
                           json::object{{"key", k}, {"value", v}, {"lease", std::to_string(with_lease)}}}}}},
          {"failure", json::array{json::object{{"request_range", json::object{{"key", k}}}}}}};
    };
    auto r = co_await call("/v3/kv/txn", create_txn(lease), deadline);
    if (r.ec) co_return fail<acquire_reply>(r);
    if (auto* ok = path(r.body, {"succeeded"}); ok && ok->is_bool() && ok->as_bool()) {
      if (!header_revision(r.body, out.token)) protocol(r, "txn answer has no revision");
      if (r.ec) co_return fail<acquire_reply>(r);
      co_return out;
    }
    const json::value* kv = first_kv(r.body, true);
    std::uint64_t holder_rev = 0, holder_lease = 0;
    entry holder;
    if (kv) {
      uint_field(*kv, "create_revision", holder_rev);
      uint_field(*kv, "lease", holder_lease);
      holder = split_entry(decode64(string_field(*kv, "value")));
    }
    if (kv && holder.owner == owner) {
      // The same owner again (a retry after a lost reply): supersede with a new create_revision, as batond
      // does. etcd refuses a delete and a put of one key in one txn, so: delete ours, then create anew; if
      // someone else takes the key in between, they hold it and this try is refused.
      //
      // A re-acquire never makes the key free sooner (docs/protocol.md, acquire), and etcd cannot lengthen a
      // lease: when the old lease has more time left than this request asks for, the new key gets a lease
      // of that time instead, a second more than etcd reports (it counts whole seconds). Without that time
      // the new lease could end sooner than the old one: a failed lookup fails this try, outcome unknown as
      // after a failed grant (the key is still this owner's), and the lease granted above is handed back.
      auto old = co_await time_to_live(holder_lease, deadline);
      if (old.r.ec) {
        co_await revoke(lease, deadline);
        co_return fail<acquire_reply>(old.r);
      }
      const auto left_s = old.left.count() / 1000 + 1;
      if (left_s > ttl_s) {
        co_await revoke(lease, deadline);
        json::object longer{{"TTL", std::to_string(left_s)}};
        auto g2 = co_await call("/v3/lease/grant", longer, deadline);
        lease = 0;
        if (!g2.ec && !uint_field(g2.body, "ID", lease)) protocol(g2, "lease grant answer has no ID");
        if (g2.ec) co_return fail<acquire_reply>(g2);
      }
      json::object drop{
          {"compare", json::array{json::object{{"key", k},
                                               {"target", "CREATE"},
                                               {"result", "EQUAL"},
                                               {"create_revision", std::to_string(holder_rev)}}}},
          {"success", json::array{json::object{{"request_delete_range", json::object{{"key", k}}}}}}};
      auto d = co_await call("/v3/kv/txn", drop, deadline);
      if (d.ec) co_return fail<acquire_reply>(d);
      co_await revoke(holder_lease, deadline);
      auto s = co_await call("/v3/kv/txn", create_txn(lease), deadline);
      if (s.ec) co_return fail<acquire_reply>(s);
      if (auto* ok = path(s.body, {"succeeded"}); ok && ok->is_bool() && ok->as_bool()) {
        if (!header_revision(s.body, out.token)) {
          protocol(s, "txn answer has no revision");
          co_return fail<acquire_reply>(s);
        }
        co_return out;
      }
      kv = first_kv(s.body, true);
      holder = {};
      holder_rev = holder_lease = 0;
      if (kv) {
        uint_field(*kv, "create_revision", holder_rev);
        uint_field(*kv, "lease", holder_lease);
        holder = split_entry(decode64(string_field(*kv, "value")));
      }
    }
    co_await revoke(lease, deadline);  // ours was never used
    out.ec = error::held;
    out.diagnostic = kv ? "the lock is held by another owner" : "the lock changed hands during the attempt";
    out.holder.owner = std::move(holder.owner);
    out.holder.value = std::move(holder.value);
    out.holder.token = holder_rev;
    out.holder.ttl_remaining = (co_await time_to_live(holder_lease, deadline)).left;  // 0 when unknown
    co_return out;
  }

  asio::awaitable<renew_reply> renew(std::string key, std::string owner, std::uint64_t token, milliseconds,
                                     milliseconds timeout) override {
    const auto deadline = clock::now() + timeout;
    json::object body2{{"key", encode64(prefix_ + key)}};
    auto r = co_await call("/v3/kv/range", body2, deadline);
    if (r.ec) co_return fail<renew_reply>(r);
    co_return co_await keep_alive_if_held(first_kv(r.body, false), owner, token, deadline);
  }

  // A batch (docs/protocol.md, "renew batch"): the keys of up to `max_txn_reads` entries are read in one txn,
  // at one revision, and each lease still held by its owner with its token is kept alive on its own, as
  // renew() does. Each entry's conditions are exactly a renew's; what the batch saves is a read per lease.
  asio::awaitable<std::vector<renew_reply>> renew_batch(std::span<const renew_entry> entries,
                                                        milliseconds timeout) override {
    // etcd refuses a txn of more operations than its --max-txn-ops, 128 by default.
    constexpr std::size_t max_txn_reads = 128;
    const auto deadline = clock::now() + timeout;
    std::vector<renew_reply> out(entries.size());
    for (std::size_t first = 0; first < entries.size(); first += max_txn_reads) {
      const std::size_t end = std::min(entries.size(), first + max_txn_reads);
      json::array reads;
      for (std::size_t i = first; i < end; ++i) {
        json::object range{{"key", encode64(prefix_ + entries[i].key)}};
        json::object read{{"request_range", std::move(range)}};
        reads.push_back(std::move(read));
      }
      json::object txn{{"success", std::move(reads)}};
      auto r = co_await call("/v3/kv/txn", txn, deadline);
      const json::value* responses = r.ec ? nullptr : path(r.body, {"responses"});
      if (!r.ec && (!responses || !responses->is_array() || responses->as_array().size() != end - first))
        protocol(r, "txn answer lacks one response per read");
      for (std::size_t i = first; i < end; ++i) {
        if (r.ec) {
          out[i] = fail<renew_reply>(r);
          continue;
        }
        const json::value* kvs = path(responses->as_array()[i - first], {"response_range", "kvs"});
        const json::value* kv =
            kvs && kvs->is_array() && !kvs->as_array().empty() ? &kvs->as_array()[0] : nullptr;
        out[i] = co_await keep_alive_if_held(kv, entries[i].owner, entries[i].token, deadline);
      }
    }
    co_return out;
  }

  // The rest of a renew once the key has been read (`kv`, null when absent): refused unless it holds this
  // owner's entry under `token`, else its etcd lease is kept alive.
  asio::awaitable<renew_reply> keep_alive_if_held(const json::value* kv, const std::string& owner,
                                                  std::uint64_t token, clock::time_point deadline) {
    renew_reply out;
    std::uint64_t rev = 0, lease = 0;
    std::string holder;
    if (kv) {
      uint_field(*kv, "create_revision", rev);
      uint_field(*kv, "lease", lease);
      holder = split_entry(decode64(string_field(*kv, "value"))).owner;
    }
    if (refuse(out, kv, holder, owner, rev, token)) co_return out;
    json::object body3{{"ID", std::to_string(lease)}};
    auto ka = co_await call("/v3/lease/keepalive", body3, deadline);
    if (ka.ec) co_return fail<renew_reply>(ka);
    std::uint64_t left = 0;
    const json::value* result = path(ka.body, {"result"});
    if (!result || !uint_field(*result, "TTL", left) || left == 0) {
      out.ec = error::lease_lost;
      out.lost_reason = "expired";
      out.diagnostic = "etcd no longer has the lease";
    }
    co_return out;
  }

  asio::awaitable<release_reply> release(std::string key, std::string owner, std::uint64_t token,
                                         milliseconds timeout) override {
    const auto deadline = clock::now() + timeout;
    release_reply out;
    const std::string k = encode64(prefix_ + key);
    auto txn = [&](const std::string& stored) {
      return json::object{
          {"compare",
           json::array{
               json::object{{"key", k},
                            {"target", "CREATE"},
                            {"result", "EQUAL"},
                            {"create_revision", std::to_string(token)}},
               json::object{{"key", k}, {"target", "VALUE"}, {"result", "EQUAL"}, {"value", stored}}}},
          {"success", json::array{json::object{{"request_range", json::object{{"key", k}}}},
                                  json::object{{"request_delete_range", json::object{{"key", k}}}}}},
          {"failure", json::array{json::object{{"request_range", json::object{{"key", k}}}}}}};
    };
    const json::object as_bare_owner = txn(encode64(owner));
    auto r = co_await call("/v3/kv/txn", as_bare_owner, deadline);
    if (r.ec) co_return fail<release_reply>(r);
    const json::value* kv = first_kv(r.body, true);
    auto succeeded = [](const http_result& a) {
      auto* ok = path(a.body, {"succeeded"});
      return ok && ok->is_bool() && ok->as_bool();
    };
    if (!succeeded(r) && kv) {
      // The entry may carry a value after the owner: if it is this owner's, with this token, release it by
      // its exact bytes.
      std::uint64_t rev = 0;
      uint_field(*kv, "create_revision", rev);
      const std::string stored = string_field(*kv, "value");
      if (rev == token && stored != encode64(owner) && split_entry(decode64(stored)).owner == owner) {
        const json::object as_stored = txn(stored);
        r = co_await call("/v3/kv/txn", as_stored, deadline);
        if (r.ec) co_return fail<release_reply>(r);
        kv = first_kv(r.body, true);
      }
    }
    if (succeeded(r)) {
      std::uint64_t lease = 0;
      if (kv) uint_field(*kv, "lease", lease);
      co_await revoke(lease, deadline);
      out.outcome = release_outcome::released;
    } else {
      out.outcome = kv ? release_outcome::not_owner : release_outcome::already_free;
    }
    co_return out;
  }

  // The read decides a refusal's reason as renew's does; the put is conditional on the key being exactly as
  // read (its mod_revision), so it can land only on this lease's own entry. A failed compare means the key
  // changed between: the txn's answer is the key as it now is, and the decision is made again from it (it
  // may still be ours, changed by another proclaim of this holder).
  asio::awaitable<proclaim_reply> proclaim(std::string key, std::string owner, std::uint64_t token,
                                           std::string value, milliseconds timeout) override {
    const auto deadline = clock::now() + timeout;
    const std::string k = encode64(prefix_ + key);
    json::object read{{"key", k}};
    auto last = co_await call("/v3/kv/range", read, deadline);
    if (last.ec) co_return fail<proclaim_reply>(last);
    const json::value* kv = first_kv(last.body, false);
    for (;;) {
      proclaim_reply out;
      std::uint64_t rev = 0, lease = 0, mod = 0;
      std::string holder;
      if (kv) {
        uint_field(*kv, "create_revision", rev);
        uint_field(*kv, "mod_revision", mod);
        uint_field(*kv, "lease", lease);
        holder = split_entry(decode64(string_field(*kv, "value"))).owner;
      }
      if (refuse(out, kv, holder, owner, rev, token)) co_return out;
      json::object txn{
          {"compare",
           json::array{json::object{
               {"key", k}, {"target", "MOD"}, {"result", "EQUAL"}, {"mod_revision", std::to_string(mod)}}}},
          {"success",
           json::array{json::object{{"request_put", json::object{{"key", k},
                                                                 {"value", encode64(entry_of(owner, value))},
                                                                 {"lease", std::to_string(lease)}}}}}},
          {"failure", json::array{json::object{{"request_range", json::object{{"key", k}}}}}}};
      auto r = co_await call("/v3/kv/txn", txn, deadline);
      if (r.ec) co_return fail<proclaim_reply>(r);
      if (auto* ok = path(r.body, {"succeeded"}); ok && ok->is_bool() && ok->as_bool()) co_return out;
      if (clock::now() >= deadline) {
        out.ec = error::request_timeout;
        out.diagnostic = "the key kept changing under the proclaim";
        co_return out;
      }
      last = std::move(r);
      kv = first_kv(last.body, true);
    }
  }

  asio::awaitable<record_write_reply> write_record(std::string key, std::string owner, std::uint64_t token,
                                                   std::string value, milliseconds timeout) override {
    const auto deadline = clock::now() + timeout;
    const std::string k = encode64(prefix_ + key), rk = encode64(record_key(key));
    const std::string stored = encode64(std::to_string(token) + '\0' + owner + '\0' + value);
    auto read_both =
        json::object{{"success", json::array{json::object{{"request_range", json::object{{"key", k}}}},
                                             json::object{{"request_range", json::object{{"key", rk}}}}}}};
    auto last = co_await call("/v3/kv/txn", read_both, deadline);
    for (;;) {
      if (last.ec) co_return fail<record_write_reply>(last);
      const json::value* responses = path(last.body, {"responses"});
      if (!responses || !responses->is_array() || responses->as_array().size() != 2) {
        protocol(last, "txn answer lacks the lock key and the record");
        continue;
      }
      const json::value* kv = kv_of(responses->as_array()[0]);
      const json::value* rec = kv_of(responses->as_array()[1]);
      record_write_reply out;
      std::uint64_t rev = 0, mod = 0, rec_mod = 0, rec_version = 0;
      std::string holder;
      if (kv) {
        uint_field(*kv, "create_revision", rev);
        uint_field(*kv, "mod_revision", mod);
        holder = split_entry(decode64(string_field(*kv, "value"))).owner;
      }
      if (refuse(out, kv, holder, owner, rev, token)) co_return out;
      if (rec) {
        uint_field(*rec, "mod_revision", rec_mod);
        uint_field(*rec, "version", rec_version);
        if (auto was = split_record(decode64(string_field(*rec, "value"))); was.token > token) {
          out.ec = error::stale_token;
          out.diagnostic = "the record was written with token " + std::to_string(was.token);
          co_return out;
        }
      }
      auto same = [](const std::string& key64, std::uint64_t m) {
        return json::object{
            {"key", key64}, {"target", "MOD"}, {"result", "EQUAL"}, {"mod_revision", std::to_string(m)}};
      };
      json::object txn{
          {"compare", json::array{same(k, mod), same(rk, rec_mod)}},
          {"success",
           json::array{json::object{{"request_put", json::object{{"key", rk}, {"value", stored}}}}}},
          {"failure", read_both["success"]}};
      auto r = co_await call("/v3/kv/txn", txn, deadline);
      if (r.ec) co_return fail<record_write_reply>(r);
      if (auto* ok = path(r.body, {"succeeded"}); ok && ok->is_bool() && ok->as_bool()) {
        out.version = rec_version + 1;  // the compare held: no other put came between
        co_return out;
      }
      if (clock::now() >= deadline) {
        out.ec = error::request_timeout;
        out.diagnostic = "the key or its record kept changing under the write";
        co_return out;
      }
      last = std::move(r);
    }
  }

  asio::awaitable<record_read_reply> read_record(std::string key, milliseconds timeout) override {
    const auto deadline = clock::now() + timeout;
    json::object read{{"key", encode64(record_key(key))}};
    auto r = co_await call("/v3/kv/range", read, deadline);
    if (r.ec) co_return fail<record_read_reply>(r);
    record_read_reply out;
    if (const json::value* kv = first_kv(r.body, false)) {
      auto e = split_record(decode64(string_field(*kv, "value")));
      lock_record rec{std::move(e.value), e.token, 0, std::move(e.owner)};
      if (e.token == 0 || !uint_field(*kv, "version", rec.version)) {
        out.ec = error::protocol_error;
        out.diagnostic = "the record key in etcd does not hold a Baton record";
        co_return out;
      }
      out.record = std::move(rec);
    }
    co_return out;
  }

  asio::awaitable<get_reply> get(std::string key, std::optional<wait_for_change> wait,
                                 milliseconds timeout) override {
    const auto give_up = clock::now() + (wait ? wait->wait : milliseconds{0});
    const std::string k = encode64(prefix_ + key);
    for (;;) {
      const auto deadline = std::max(clock::now(), give_up) + timeout;
      get_reply out;
      json::object body4{{"key", k}};
      auto r = co_await call("/v3/kv/range", body4, deadline);
      if (r.ec) co_return fail<get_reply>(r);
      if (const json::value* kv = first_kv(r.body, false)) {
        holder_info h;
        std::uint64_t lease = 0;
        uint_field(*kv, "create_revision", h.token);
        uint_field(*kv, "lease", lease);
        auto e = split_entry(decode64(string_field(*kv, "value")));
        h.owner = std::move(e.owner);
        h.value = std::move(e.value);
        h.ttl_remaining = (co_await time_to_live(lease, deadline)).left;  // 0 when unknown
        out.holder = std::move(h);
      }
      std::uint64_t current = out.holder ? out.holder->token : 0;
      const bool value_changed =
          wait && wait->value &&
          (out.holder ? std::string_view(out.holder->value) : std::string_view()) != *wait->value;
      if (!wait || current != wait->token || value_changed || clock::now() >= give_up) co_return out;
      // Watching from the revision after this read misses no change made since: the delete (release or
      // expiry) wakes the waiter at once. Any event wakes it, and the read above decides again.
      std::uint64_t seen = 0;
      const json::value* header = path(r.body, {"header"});
      if (header && uint_field(*header, "revision", seen)) {
        auto w = co_await watch(k, seen + 1, give_up);
        if (w == watch_end::cancelled) {
          get_reply cancelled;
          cancelled.ec = asio::error::operation_aborted;
          cancelled.diagnostic = "the wait was cancelled";
          co_return cancelled;
        }
        if (w != watch_end::failed) continue;
      }
      // The watch could not be set up or broke: bounded polling, a holder change is seen within one period.
      asio::steady_timer t(ex_,
                           std::min<clock::duration>(std::chrono::milliseconds(100), give_up - clock::now()));
      co_await t.async_wait(asio::use_awaitable);
    }
  }

  // Every lease of this client is watched through one stream: a watch of the whole prefix, from the revision
  // after the earliest grant, whose events are matched against the held keys (docs/design.md, "etcd: leases
  // the server revokes"). Any event on a held key after its grant is a change this client did not make.
  std::unique_ptr<loss_watch> watch_loss(const std::string& key, const std::string& owner,
                                         std::uint64_t token,
                                         std::function<void(std::string_view)> on_lost) override {
    if (token == 0) return nullptr;
    const std::uint64_t id = ++last_watch_id_;
    std::string k = prefix_ + key;
    held_.emplace(k, held_key{id, owner, token, std::move(on_lost)});
    if (!watching_) {
      // Replaying events from before a grant is harmless (they are older than its token): start early enough.
      if (next_rev_ == 0 || token + 1 < next_rev_) next_rev_ = token + 1;
      start_loss_watch();
    }
    return std::make_unique<key_watch>(weak_from_this(), std::move(k), id);
  }

  tls_reload_result reload_tls(std::optional<tls_config> tls) override {
    return detail::reload_client_tls(tls_context_, std::move(tls));
  }

  void close() override {
    for (auto& e : endpoints_)
      e->close();
    // The loss watch's connection too; it starts again while leases are still watched.
    if (watching_) stop_watch_->emit(asio::cancellation_type::terminal);
  }

 private:
  // Renew's refusal, in its order, for the key as read (`kv` null: absent; `holder` its entry's owner,
  // `rev` its create_revision); false when `owner` holds it under `token`.
  template <class Reply>
  static bool refuse(Reply& out, const json::value* kv, const std::string& holder, const std::string& owner,
                     std::uint64_t rev, std::uint64_t token) {
    if (!kv)
      out.lost_reason = "not_held";
    else if (holder != owner)
      out.lost_reason = "owner_mismatch";
    else if (rev != token)
      out.lost_reason = "token_mismatch";
    if (out.lost_reason.empty()) return false;
    out.ec = error::lease_lost;
    out.diagnostic = "the key no longer carries this lease's create_revision";
    return true;
  }

  template <class Reply>
  static Reply fail(const http_result& r) {
    Reply out;
    out.ec = r.ec;
    out.diagnostic = r.diagnostic;
    return out;
  }
  static void protocol(http_result& r, std::string what) {
    r.ec = error::protocol_error;
    r.diagnostic = std::move(what);
  }

  // A watch stream on a connection of its own to member `m` (a watch is a stream that never ends, so it
  // cannot share the pooled keep-alive connections): connects, sends `create` and reads the answer's header.
  // The gateway then streams one JSON object per line in a chunked reply, first "created", then events;
  // read_watch() hands each one's "result" to `on_result` until it returns false or the stream fails. Over
  // etcds:// the connection is TLS, made and checked as the pooled ones are (http_transport.cpp).
  struct watch_stream {
    explicit watch_stream(const asio::any_io_executor& ex) : socket(ex) {}
    tcp::socket socket;
    // The context current when the stream connected, held for the stream's life (a reload swaps it).
    std::shared_ptr<asio::ssl::context> tls_context;
    std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;  // null over etcd://
    boost::beast::flat_buffer buffer;
    http::response_parser<http::buffer_body> parser;

    // `op` on the stream the HTTP messages go through: TLS over the socket, or the socket itself.
    template <class Op>
    auto on_stream(Op op) {
      return tls ? op(*tls) : op(socket);
    }
  };

  asio::awaitable<bool> open_watch(watch_stream& w, std::size_t m, const json::object& create) {
    constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
    const etcd_endpoint& ep = hosts_[m];
    // A literal address skips the resolver (which runs on a thread of its own and cannot be cancelled).
    boost::system::error_code ec;
    auto address = asio::ip::make_address(ep.host, ec);
    unsigned short port = 0;
    const auto [end, pec] = std::from_chars(ep.port.data(), ep.port.data() + ep.port.size(), port);
    if (!ec && pec == std::errc() && end == ep.port.data() + ep.port.size()) {
      auto [cec] = co_await w.socket.async_connect(tcp::endpoint(address, port), use_tuple);
      if (cec) co_return false;
    } else {
      tcp::resolver resolver(ex_);
      auto [rec, found] = co_await resolver.async_resolve(ep.host, ep.port, use_tuple);
      if (rec) co_return false;
      auto [cec, connected] = co_await asio::async_connect(w.socket, found, use_tuple);
      if (cec) co_return false;
    }
    if (tls_context_) {
      // A certificate that does not name the member is refused as for any request; a stream that cannot be
      // set up fails, and the caller polls or tries again later.
      w.tls_context = tls_context_->current();
      w.tls = std::make_unique<asio::ssl::stream<tcp::socket&>>(w.socket, *w.tls_context);
      if (!detail::set_expected_host(w.tls->native_handle(), ep.host).empty()) co_return false;
      auto [hec] = co_await w.tls->async_handshake(asio::ssl::stream_base::client, use_tuple);
      if (hec) co_return false;
    }
    http::request<http::string_body> req{http::verb::post, "/v3/watch", 11};
    req.set(http::field::host, ep.name);
    req.set(http::field::content_type, "application/json");
    if (const auto& token = endpoints_[m]->authorization(); !token.empty())
      req.set(http::field::authorization, token);
    req.body() = json::serialize(create);
    req.prepare_payload();
    auto [wec, wn] = co_await w.on_stream([&](auto& s) { return http::async_write(s, req, use_tuple); });
    if (wec) co_return false;
    w.parser.body_limit(boost::none);  // the stream has no end
    auto [hec, hn] = co_await w.on_stream(
        [&](auto& s) { return http::async_read_header(s, w.buffer, w.parser, use_tuple); });
    co_return !hec && w.parser.get().result_int() == 200;
  }

  // Reads `w`'s messages until `on_result` returns false (true is returned) or the stream fails or ends
  // (false: an error object, a cancelled watch, a line that is not JSON, a member that closed it).
  template <class OnResult>
  asio::awaitable<bool> read_watch(watch_stream& w, OnResult on_result) {
    constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
    std::string pending;
    char chunk[4096];
    while (!w.parser.is_done()) {
      w.parser.get().body().data = chunk;
      w.parser.get().body().size = sizeof chunk;
      auto [rec, rn] = co_await w.on_stream(
          [&](auto& s) { return http::async_read_some(s, w.buffer, w.parser, use_tuple); });
      if (rec && rec != http::error::need_buffer) co_return false;
      pending.append(chunk, sizeof chunk - w.parser.get().body().size);
      for (auto nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n')) {
        boost::system::error_code jec;
        auto message = json::parse(std::string_view(pending).substr(0, nl), jec);
        pending.erase(0, nl + 1);
        const json::value* result = jec ? nullptr : path(message, {"result"});
        if (!result) co_return false;  // an error object, or not JSON
        if (!on_result(*result)) co_return true;
      }
      if (pending.size() > (1u << 20)) co_return false;
    }
    co_return false;  // the member ended the stream
  }

  // One watch on `k` from revision `from` on the current member, for a waiter: ends at the first event, at
  // `until`, or when the stream fails (the caller then polls).
  asio::awaitable<watch_end> watch(const std::string& k, std::uint64_t from, clock::time_point until) {
    using namespace asio::experimental::awaitable_operators;
    constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
    watch_stream w(ex_);
    auto work = [&]() -> asio::awaitable<watch_end> {
      json::object create{
          {"create_request", json::object{{"key", k}, {"start_revision", std::to_string(from)}}}};
      if (!co_await open_watch(w, current_, create)) co_return watch_end::failed;
      bool changed = false;
      co_await read_watch(w, [&](const json::value& result) {
        // A cancelled watch (e.g. the start revision was compacted) is a failed one.
        if (auto* c = path(result, {"canceled"}); c && c->is_bool() && c->as_bool()) return false;
        if (auto* events = path(result, {"events"});
            events && events->is_array() && !events->as_array().empty()) {
          changed = true;
          return false;
        }
        return true;
      });
      co_return changed ? watch_end::changed : watch_end::failed;
    };
    asio::steady_timer timer(ex_, until);
    auto result = co_await (work() || timer.async_wait(use_tuple));
    if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none)
      co_return watch_end::cancelled;
    if (result.index() == 1) co_return watch_end::timed_out;
    co_return std::get<0>(result);
  }

  // A lease watched for loss: `on_lost` is called once, when the key changes after `token`.
  struct held_key {
    std::uint64_t id;
    std::string owner;
    std::uint64_t token;
    std::function<void(std::string_view)> on_lost;
  };

  class key_watch final : public loss_watch {
   public:
    key_watch(std::weak_ptr<etcd_backend> b, std::string k, std::uint64_t id)
        : backend_(std::move(b)), key_(std::move(k)), id_(id) {}
    ~key_watch() override {
      if (auto b = backend_.lock()) b->unwatch(key_, id_);
    }

   private:
    std::weak_ptr<etcd_backend> backend_;
    std::string key_;
    std::uint64_t id_;
  };

  void unwatch(const std::string& k, std::uint64_t id) {
    auto [first, last] = held_.equal_range(k);
    for (auto it = first; it != last; ++it)
      if (it->second.id == id) {
        held_.erase(it);
        break;
      }
    // The last one gone: the stream ends, from outside whatever called this (it may be the stream's own
    // callback), unless a lease is watched again by then.
    if (held_.empty() && watching_)
      asio::post(ex_, [w = weak_from_this()] {
        if (auto b = w.lock(); b && b->held_.empty() && b->watching_)
          b->stop_watch_->emit(asio::cancellation_type::terminal);
      });
  }

  void start_loss_watch() {
    watching_ = true;
    // A signal per stream, kept alive by the stream's frame: its slot must outlive the coroutine.
    stop_watch_ = std::make_shared<asio::cancellation_signal>();
    asio::co_spawn(ex_, run_loss_watch(shared_from_this(), stop_watch_),
                   asio::bind_cancellation_slot(stop_watch_->slot(), asio::detached));
  }

  // Keeps the loss watch open while leases are watched: a stream that fails or ends is opened again after
  // a pause (100 ms, doubling to 2 s while the member does not answer), on the member calls use by then.
  asio::awaitable<void> run_loss_watch(std::shared_ptr<etcd_backend> self,
                                       std::shared_ptr<asio::cancellation_signal>) {
    constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
    for (int failures = 0; !held_.empty();) {
      const bool answered = co_await watch_held_keys();
      if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) break;
      if (held_.empty()) break;
      failures = answered ? 0 : std::min(failures + 1, 5);
      asio::steady_timer pause(ex_, std::min<clock::duration>(std::chrono::milliseconds(100 << failures),
                                                              std::chrono::seconds(2)));
      co_await pause.async_wait(use_tuple);
      if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) break;
    }
    watching_ = false;
    if (!held_.empty()) self->start_loss_watch();  // watched again after the stop was asked
  }

  // One stream over every key under the prefix from next_rev_, on the current member, until it fails, no
  // lease is watched any more, or the backend's calls moved to another member (a member that stopped
  // answering them may have stopped sending events too: a paused member keeps its connections open and
  // silent). Returns whether the member answered (created the watch). Opening it is bounded by the request
  // timeout: a member that accepts the connection and never answers is left for the current one.
  asio::awaitable<bool> watch_held_keys() {
    using namespace asio::experimental::awaitable_operators;
    constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
    const std::size_t m = current_;
    watch_stream w(ex_);
    std::string range_end = prefix_;
    ++range_end.back();  // the prefix ends with '/' (etcd_prefix.hpp): the next byte ends its range
    json::object create{{"create_request", json::object{{"key", encode64(prefix_)},
                                                        {"range_end", encode64(range_end)},
                                                        {"start_revision", std::to_string(next_rev_)},
                                                        {"progress_notify", true}}}};
    asio::steady_timer open_limit(ex_, watch_open_timeout_);
    auto opened = co_await (open_watch(w, m, create) || open_limit.async_wait(use_tuple));
    if (opened.index() != 0 || !std::get<0>(opened)) co_return false;
    bool created = false;
    auto reading = read_watch(w, [&](const json::value& result) {
      if (auto* c = path(result, {"canceled"}); c && c->is_bool() && c->as_bool()) {
        // The start revision was compacted: go on from the oldest one kept. What was lost between is for the
        // next renew to find, as without a watch.
        std::uint64_t compacted = 0;
        if (uint_field(result, "compact_revision", compacted)) next_rev_ = std::max(next_rev_, compacted);
        return false;
      }
      if (auto* c = path(result, {"created"}); c && c->is_bool() && c->as_bool()) {
        created = true;
        return true;
      }
      const json::value* events = path(result, {"events"});
      if (!events || !events->is_array() || events->as_array().empty()) {
        // A progress notification: every event up to its header's revision has been sent.
        std::uint64_t rev = 0;
        if (const json::value* h = path(result, {"header"}); h && uint_field(*h, "revision", rev))
          next_rev_ = std::max(next_rev_, rev + 1);
        return true;
      }
      on_watch_events(events->as_array());
      return !held_.empty();
    });
    co_await (std::move(reading) || calls_leave(m));
    co_return created;
  }

  // Completes once the backend's calls have moved away from member `m` (looked at every 250 ms), or when
  // cancelled.
  asio::awaitable<void> calls_leave(std::size_t m) {
    asio::steady_timer tick(ex_);
    while (current_ == m) {
      tick.expires_after(std::chrono::milliseconds(250));
      auto [ec] = co_await tick.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
    }
  }

  // Declares lost every watched lease whose key one of `events` changed after its grant.
  void on_watch_events(const json::array& events) {
    std::vector<std::pair<std::function<void(std::string_view)>, std::string>> lost;
    for (const auto& ev : events) {
      const json::value* kv = path(ev, {"kv"});
      if (!kv) continue;
      std::uint64_t changed = 0, created = 0;
      uint_field(*kv, "mod_revision", changed);
      uint_field(*kv, "create_revision", created);
      next_rev_ = std::max(next_rev_, changed + 1);
      const bool deleted = string_field(ev, "type") == "DELETE";  // PUT, etcd's 0, is left out of the JSON
      auto [first, last] = held_.equal_range(decode64(string_field(*kv, "key")));
      for (auto it = first; it != last;) {
        const held_key& h = it->second;
        if (changed <= h.token) {  // history up to the grant itself
          ++it;
          continue;
        }
        // A put that keeps the key's creation and owner under an etcd lease is a proclaim of this holder
        // (its owner and token, sent by this client or by another process that has them, `baton proclaim`):
        // the lease goes on.
        std::uint64_t under_lease = 0;
        uint_field(*kv, "lease", under_lease);
        if (!deleted && created == h.token && under_lease != 0 &&
            split_entry(decode64(string_field(*kv, "value"))).owner == h.owner) {
          ++it;
          continue;
        }
        const std::string at = " at etcd revision " + std::to_string(changed) + " (seen by the key watch)";
        std::string why = deleted              ? "not_held: the key was deleted" + at
                          : created != h.token ? "token_mismatch: the key was created anew" + at
                          : split_entry(decode64(string_field(*kv, "value"))).owner != h.owner
                              ? "owner_mismatch: another owner wrote the key" + at
                              : "owner_mismatch: the key was written over, not by this lease," + at;
        lost.emplace_back(std::move(it->second.on_lost), std::move(why));
        it = held_.erase(it);
      }
    }
    // After the table is settled: a callback may end other watches, or the stream.
    for (auto& [on_lost, why] : lost)
      on_lost(why);
  }

  asio::awaitable<void> revoke(std::uint64_t lease, clock::time_point deadline) {
    if (lease == 0) co_return;
    json::object body5{{"ID", std::to_string(lease)}};
    co_await call("/v3/lease/revoke", body5, deadline);
  }

  // The time etcd has left on a lease, in whole seconds: 0 for lease 0 (none) and for a lease etcd no longer
  // has (TTL -1: expired or revoked, its keys gone with it). r.ec is set when the lookup failed (no answer,
  // an error status, an answer without a TTL); `left` is 0 then.
  struct time_left {
    milliseconds left{0};
    http_result r;
  };
  asio::awaitable<time_left> time_to_live(std::uint64_t lease, clock::time_point deadline) {
    time_left out;
    if (lease == 0) co_return out;
    json::object body6{{"ID", std::to_string(lease)}};
    out.r = co_await call("/v3/lease/timetolive", body6, deadline);
    if (out.r.ec) co_return out;
    const json::value* ttl = path(out.r.body, {"TTL"});
    const bool gone =
        ttl && ((ttl->is_string() && ttl->as_string() == "-1") || (ttl->is_int64() && ttl->as_int64() == -1));
    if (gone) co_return out;
    std::uint64_t seconds = 0;
    if (!uint_field(out.r.body, "TTL", seconds))
      protocol(out.r, "lease time-to-live answer has no TTL");
    else
      out.left = milliseconds(static_cast<std::int64_t>(seconds) * 1000);
    co_return out;
  }

  // One gateway call on a healthy endpoint. A member that fails to connect, or does not answer within its
  // share of the time left, is left for the next one (a request that may have been applied is safe to repeat:
  // every operation above is conditional). Each member not yet tried gets an equal share of what is left, so
  // one that hangs (SIGSTOP, a stalled disk, cut off from the leader) costs at most its share and the call
  // still ends by `deadline`; the next calls start at the member that answered. The first call to each member
  // probes /version (probe_version()).
  asio::awaitable<http_result> call(std::string_view target, const json::object& body,
                                    clock::time_point deadline) {
    http_result r;
    const std::string text = json::serialize(body);
    for (std::size_t tried = 0; tried < endpoints_.size(); ++tried) {
      const auto now = clock::now();
      if (std::chrono::duration_cast<milliseconds>(deadline - now).count() <= 0) {
        if (!r.ec) {
          r.ec = error::request_timeout;
          r.diagnostic = "no answer from etcd in time";
        }
        co_return r;
      }
      const auto share = now + (deadline - now) / static_cast<int>(endpoints_.size() - tried);
      const auto left = [&] {
        return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(share - clock::now()));
      };
      const std::size_t m = current_;
      auto& ep = *endpoints_[m];
      if (!probed_[m]) {
        auto v = co_await probe_version(m, left());
        if (v.ec == asio::error::operation_aborted || v.ec == error::invalid_config) co_return v;
        if (v.ec) {
          r = std::move(v);
          leave(m, r);
          continue;
        }
      }
      // etcd's simple auth tokens belong to the member that issued them and expire when idle: each member
      // gets its own, and a request refused with "invalid auth token" authenticates again once.
      for (int attempt = 0;; ++attempt) {
        if (!user_.empty() && !authenticated_[m]) {
          auto a = co_await authenticate(ep, left());
          if (a.ec) {
            r = std::move(a);
            break;
          }
          authenticated_[m] = true;
        }
        r = co_await ep.request("POST", std::string(target), text, left());
        if (r.ec || r.status != 401 || user_.empty() || attempt > 0) break;
        authenticated_[m] = false;
      }
      if (!r.ec && r.status != 200) {
        std::string msg = string_field(r.body, "message");
        if (msg.empty()) msg = string_field(r.body, "error");
        // etcd with authentication on answers a request without credentials 400 "user name is empty".
        const bool no_credentials = msg.find("user name is empty") != std::string::npos;
        r.ec = r.status == 503                     ? make_error_code(error::storage_unavailable)
               : r.status == 401 || no_credentials ? make_error_code(error::unauthorized)
               : r.status == 403                   ? make_error_code(error::forbidden)
                                                   : make_error_code(error::server_error);
        r.diagnostic =
            "etcd " + ep.name() + " HTTP " + std::to_string(r.status) + (msg.empty() ? "" : ": " + msg);
      }
      // A member that cannot serve now is left for the next one: unreachable, silent, or answering 503 (no
      // leader on its side of a partition, a proposal that timed out, a leader change). Every request here is
      // conditional or idempotent, so sending it again to another member is safe.
      if (r.ec == error::connection_failed || r.ec == error::request_timeout ||
          r.ec == error::storage_unavailable) {
        leave(m, r);
        continue;
      }
      co_return r;
    }
    if (!r.ec) r.ec = error::connection_failed;
    co_return r;
  }

  // Member `m` failed `r` (no connection, or no answer in time): later calls start at the next member. Only
  // if no other call has moved on already, so that two calls failing on one member skip it once, not twice.
  // A member that refused the connection may come back as another process: probed and authenticated again.
  void leave(std::size_t m, http_result& r) {
    if (r.ec == error::request_timeout) r.diagnostic = "etcd " + endpoints_[m]->name() + ": " + r.diagnostic;
    if (r.ec == error::connection_failed) {
      probed_[m] = false;
      authenticated_[m] = false;
    }
    if (current_ == m) current_ = (m + 1) % endpoints_.size();
  }

  // GET /version on member `m`: refuses etcd older than 3.4 (error::invalid_config), and one that revokes
  // live leases as etcd_lease_revocation_bug says (warned about once per member: to this client's handler,
  // or on stderr once per process); any other failure is the member's, and the caller moves on.
  asio::awaitable<http_result> probe_version(std::size_t m, milliseconds timeout) {
    auto& ep = *endpoints_[m];
    auto v = co_await ep.request("GET", "/version", {}, timeout, detail::answer_form::text);
    if (v.ec) co_return v;
    if (v.status != 200) {
      v.ec = error::connection_failed;
      v.diagnostic = "etcd " + ep.name() + " answered /version with HTTP " + std::to_string(v.status);
      co_return v;
    }
    using verdict = detail::etcd_version_check::verdict;
    const auto check = detail::check_etcd_version(v.text);
    if (check.what == verdict::too_old) {
      v.ec = error::invalid_config;
      v.diagnostic =
          ep.name() + " runs etcd \"" + check.version + "\"; Baton needs etcd 3.4 or newer (v3 gateway /v3/)";
      co_return v;
    }
    if (check.what == verdict::revokes_live_leases) {
      const bool refuse = revocation_bug_ == etcd_bug_policy::refuse;
      auto message = detail::lease_revocation_message(ep.name(), check.version, refuse);
      if (refuse) {
        v.ec = error::invalid_config;
        v.diagnostic = std::move(message);
        co_return v;
      }
      if (!warned_[m]) {
        warned_[m] = true;
        // Loud: the event when someone listens (each client's handler hears it, once per member, as
        // documented), else stderr, which nobody has to set up to see, once per member and process.
        if (on_event_)
          on_event_(lease_event{lease_event::kind::server_warning, {}, 0, {}, message});
        else if (first_stderr_warning(ep.name()))
          std::fprintf(stderr, "baton: warning: %s\n", message.c_str());
      }
    }
    probed_[m] = true;
    co_return v;
  }

  // POST /v3/auth/authenticate; on success every later request to `ep` carries the token. The password
  // never appears in a diagnostic.
  asio::awaitable<http_result> authenticate(detail::http_transport& ep, milliseconds left) {
    ep.set_authorization({});  // etcd checks a stale token before the password
    json::object body{{"name", user_}, {"password", password_}};
    auto a = co_await ep.request("POST", "/v3/auth/authenticate", json::serialize(body), left);
    if (a.ec) co_return a;
    std::string token = string_field(a.body, "token");
    if (a.status != 200 || token.empty()) {
      std::string msg = string_field(a.body, "message");
      a.ec = error::unauthorized;
      a.diagnostic =
          "etcd " + ep.name() + " refused user \"" + user_ + "\"" + (msg.empty() ? "" : ": " + msg);
      co_return a;
    }
    ep.set_authorization(std::move(token));
    co_return a;
  }

  asio::any_io_executor ex_;
  std::string user_, password_;  // empty user: etcd without authentication
  std::vector<bool> authenticated_;
  std::string prefix_;

  // Where the record of `key` is kept: beside the locks' prefix, not under it (see the top of this file).
  std::string record_key(std::string_view key) const {
    return prefix_.substr(0, prefix_.size() - 1) + ".records/" + std::string(key);
  }
  std::vector<std::unique_ptr<detail::http_transport>> endpoints_;
  std::vector<etcd_endpoint> hosts_;
  std::vector<bool> probed_;
  std::vector<bool> warned_;  // members whose etcd revokes live leases, warned about
  // The loss watch: every lease watched (by its etcd key), the stream's next revision, whether it runs.
  std::unordered_multimap<std::string, held_key> held_;
  std::uint64_t last_watch_id_ = 0;
  std::uint64_t next_rev_ = 0;
  bool watching_ = false;
  std::shared_ptr<asio::cancellation_signal> stop_watch_;
  milliseconds watch_open_timeout_;
  etcd_bug_policy revocation_bug_ = etcd_bug_policy::warn;
  std::function<void(const lease_event&)> on_event_;
  std::size_t current_ = 0;
  std::shared_ptr<detail::client_tls> tls_context_;  // null for etcd://
};

}  // namespace

std::shared_ptr<backend> make_etcd_backend(const asio::any_io_executor& ex, const client_config& config) {
  return std::make_shared<etcd_backend>(ex, config);
}

}  // namespace baton
