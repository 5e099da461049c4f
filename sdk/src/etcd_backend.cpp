// SPDX-License-Identifier: Apache-2.0
// The etcd backend: Baton's lock semantics on etcd 3.4+ through its v3 JSON gateway (docs/sdk.md, etcd).
//
// A lock K under prefix P is etcd's own concurrency.Mutex named P+K, so that `etcdctl lock`, `etcdctl elect`
// and Go's concurrency package exclude Baton on one name, and wait in one line with it:
//   contender = P+K/<its etcd lease ID in hex>, put with that lease, its value the lease's value (what etcd's
//               Election keeps there; empty for a plain lock, as Mutex writes it). The contender with the
//               lowest create_revision holds.
//   guard     = P+K itself, the key of the single-key layout before: a Baton holder puts it too, with its
//               lease, holding the entry: the owner, or owner NUL value for a lease with a value (owners hold
//               no control characters). Clients of the old layout see the lock held; the owner is read
//               from it; a Baton contender first in line waits while a guard it did not put exists. The
//               guard's create_revision is the fencing token: the revision at which the hold began, larger
//               than every holder's before, whichever client it was (docs/design.md, "The etcd backend").
//   acquire   = /v3/lease/grant (TTL in whole seconds, rounded up) + one txn "no key in P+K/ and no guard →
//               put the contender and the guard; else read the first in line and the guard".
//   queued    = etcd's Mutex.Lock: the contender is put, its lease kept alive while it waits; it watches only
//               the contender just before it (or the guard, when first), and once first with no guard, puts
//               the guard (the grant). Leaving revokes the lease: both keys go in one step.
//   renew     = read the guard and the first in line (guard created at the token, naming the owner, its
//               lease's contender first?) + /v3/lease/keepalive; an answer without TTL: the lease is gone.
//   release   = txn "both keys as read → delete both", then /v3/lease/revoke.
//   proclaim  = read both + txn "both keys' mod_revision as read → put the value into the contender and the
//               entry into the guard, with their own lease" (etcd's Election.Proclaim): token and expiry
//               stay.
//   record    = a lock's record (docs/protocol.md, "record") is the key <prefix without its last
//   '/'>.records/
//               <key>, outside the locks' range, with no etcd lease: its value is the token in decimal, NUL,
//               the owner, NUL, the record's value. A write reads the lock's keys and the record in one txn,
//               decides as proclaim does (then refuses a record of a larger token), and puts the record in a
//               txn conditional on all three keys' mod_revisions (again from a fresh read when one changed).
//               The version is etcd's own `version` of the record key.
//   break     = read both, then /v3/lease/revoke of the holder's etcd lease (an operator's break).
//   list      = not offered (invalid_config): a range over P+prefix mixes guards, contender keys and keys of
//               locks named K/x, and telling them apart needs a read per lock (docs/design.md).
//   wait      = /v3/watch on the lock's keys from the revision after the read, on a connection of its own
//               (TLS over etcds://, as every request); bounded polling (100 ms) when the watch fails.
// Never /v3/lock or /v3/election: with lease 0 they make a hidden 60 s lease nobody renews, and 3.4's lock
// can report success after the caller's lease expired while waiting. The same recipe through kv and lease
// calls has neither problem.

#include "baton/backend.hpp"
#include "baton/common/tls_context.hpp"
#include "baton/error.hpp"
#include "etcd_prefix.hpp"
#include "etcd_version.hpp"
#include "http_transport.hpp"

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

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
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

// The keys of lock K under prefix P (docs/sdk.md, "etcd"): etcd's concurrency.Mutex named P+K. Each
// contender puts P+K/<its etcd lease ID in hex>, with that lease; the one with the lowest create_revision
// holds, and its create_revision is the fencing token. The guard, P+K itself, is the key the single-key
// layout of Baton before 0.9 used: the holder puts it too, with its lease, so that clients of that layout see
// the lock held, and a contender first in line waits while that layout's holder keeps it.
struct lock_keys {
  lock_keys(const std::string& prefix, std::string_view key)
      : guard(prefix + std::string(key)), queue(guard + '/'), queue_end(guard + '0') {}
  std::string guard;  // P+K
  std::string queue;  // P+K/, where the contenders' keys are
  std::string
      queue_end;  // the end of their range ('0' follows '/'); [guard, queue_end) is every key of the lock
  std::string contender(std::uint64_t lease) const { return queue + hex(lease); }
  // Whether `k`, put under etcd lease `lease`, is a contender's key of this lock: P+K/ and that lease in hex,
  // as etcd's Mutex and Election name them (P+K/x and P+K/x/... belong to the lock named K/x, whose keys
  // are in this range too).
  bool in_line(std::string_view k, std::uint64_t lease) const {
    return lease != 0 && k.size() > queue.size() && k.starts_with(queue) &&
           k.substr(queue.size()) == hex(lease);
  }
  static std::string hex(std::uint64_t lease) {
    char out[17];
    std::snprintf(out, sizeof out, "%llx", static_cast<unsigned long long>(lease));  // as Go's %x writes it
    return out;
  }
};

// One key as a range read returned it.
struct stored_kv {
  bool present = false;
  // For a contender read from a page of the queue's range: false when the page held only other locks' keys
  // and more follow (the caller reads the rest).
  bool resolved = true;
  std::string key, value;
  std::uint64_t create = 0, mod = 0, lease = 0, version = 0;
};

stored_kv read_kv(const json::value* kv) {
  stored_kv out;
  if (!kv || !kv->is_object()) return out;
  out.present = true;
  out.key = decode64(string_field(*kv, "key"));
  out.value = decode64(string_field(*kv, "value"));
  uint_field(*kv, "create_revision", out.create);
  uint_field(*kv, "mod_revision", out.mod);
  uint_field(*kv, "lease", out.lease);
  uint_field(*kv, "version", out.version);
  return out;
}

// The i-th response of a txn answer (null when there is none).
const json::value* response_at(const json::value& body, std::size_t i) {
  const json::value* responses = path(body, {"responses"});
  if (!responses || !responses->is_array() || responses->as_array().size() <= i) return nullptr;
  return &responses->as_array()[i];
}

// The first key-value of the i-th response of a txn answer.
stored_kv response_kv(const json::value& body, std::size_t i) {
  const json::value* r = response_at(body, i);
  return read_kv(r ? kv_of(*r) : nullptr);
}

// The first contender of lock `lk` among the kvs of a range (a txn's response or a range answer), in the
// order read: other locks' keys are passed over.
stored_kv first_in_line_of(const json::value* range, const lock_keys& lk) {
  stored_kv out;
  if (!range) return out;
  const json::value* inner = path(*range, {"response_range"});
  if (!inner) inner = range;
  if (const json::value* kvs = path(*inner, {"kvs"}); kvs && kvs->is_array())
    for (const auto& kv : kvs->as_array()) {
      std::uint64_t lease = 0;
      uint_field(kv, "lease", lease);
      if (lk.in_line(decode64(string_field(kv, "key")), lease)) return read_kv(&kv);
    }
  if (const json::value* more = path(*inner, {"more"}); more && more->is_bool() && more->as_bool()) {
    out.present = true;
    out.resolved = false;
  }
  return out;
}

// The reads of the queue's range that find the first in line (ascending create_revision) or the contender
// just before `before` (descending, below it); a page of 16, or all of them (`page` false).
json::object in_line_read(const lock_keys& lk, std::uint64_t before, bool page) {
  json::object range{{"key", encode64(lk.queue)},
                     {"range_end", encode64(lk.queue_end)},
                     {"sort_order", before == 0 ? "ASCEND" : "DESCEND"},
                     {"sort_target", "CREATE"}};
  if (page) range["limit"] = "16";
  if (before != 0) range["max_create_revision"] = std::to_string(before - 1);
  return json::object{{"request_range", std::move(range)}};
}

json::object key_read(const std::string& k) {
  return json::object{{"request_range", json::object{{"key", encode64(k)}}}};
}

json::object same_create(const std::string& k64, std::uint64_t rev) {
  return json::object{
      {"key", k64}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", std::to_string(rev)}};
}

json::object same_mod(const std::string& k64, std::uint64_t rev) {
  return json::object{
      {"key", k64}, {"target", "MOD"}, {"result", "EQUAL"}, {"mod_revision", std::to_string(rev)}};
}

json::object put_key(const std::string& k, std::string_view value, std::uint64_t lease) {
  return json::object{
      {"request_put",
       json::object{{"key", encode64(k)}, {"value", encode64(value)}, {"lease", std::to_string(lease)}}}};
}

json::object delete_key(const std::string& k) {
  return json::object{{"request_delete_range", json::object{{"key", encode64(k)}}}};
}

bool succeeded(const http_result& r) {
  auto* ok = path(r.body, {"succeeded"});
  return ok && ok->is_bool() && ok->as_bool();
}

std::uint64_t r_revision(const http_result& r) {
  std::uint64_t rev = 0;
  if (const json::value* h = path(r.body, {"header"})) uint_field(*h, "revision", rev);
  return rev;
}

// The lock as read: the first in line and the guard.
struct lock_view {
  stored_kv first, guard;
};

// Who holds the lock, as Baton sees it.
struct lock_holder {
  holder_info info;
  std::uint64_t lease = 0;
  bool baton = false;  // a Baton holder (the guard names its owner); false: a contender of etcd's own recipe
};

std::optional<lock_holder> holder_of(const lock_view& v) {
  const stored_kv &first = v.first, &guard = v.guard;
  if (guard.present && (!first.present || guard.lease != first.lease)) {
    // A holder of the single-key layout (or a guard whose contender key was deleted): the guard holds.
    auto e = split_entry(guard.value);
    return lock_holder{
        {std::move(e.owner), guard.create, milliseconds(0), std::move(e.value)}, guard.lease, true};
  }
  if (!first.present) return std::nullopt;
  if (guard.present) {  // a Baton holder: its token is the guard's create_revision, when its hold began
    auto e = split_entry(guard.value);
    return lock_holder{
        {std::move(e.owner), guard.create, milliseconds(0), std::move(e.value)}, first.lease, true};
  }
  // `etcdctl lock`, `etcdctl elect`, Go's concurrency package: no owner is written; the key's name is it.
  return lock_holder{
      {"etcd:" + first.key.substr(first.key.rfind('/') + 1), first.create, milliseconds(0), first.value},
      first.lease,
      false};
}

// A lease's keys as read by its token: the guard (created at the token) and the first in line (the
// holder's contender key, carrying the guard's etcd lease).
constexpr std::size_t ownership_read_count = 2;
json::array ownership_reads(const lock_keys& lk) {
  return json::array{key_read(lk.guard), in_line_read(lk, 0, true)};
}

struct ownership {
  stored_kv guard, first;
  // Whether the lock is held with `token`: the guard created then, and its contender first in line.
  bool held_with(std::uint64_t token) const {
    return guard.present && guard.create == token && first.present && first.lease == guard.lease;
  }
};
ownership ownership_of(const json::value& body, std::size_t at, const lock_keys& lk) {
  return ownership{response_kv(body, at), first_in_line_of(response_at(body, at + 1), lk)};
}

// A txn of reads only.
json::object read_txn(json::array reads) {
  return json::object{{"success", std::move(reads)}};
}
json::object read_txn(json::object read) {
  return read_txn(json::array{std::move(read)});
}

json::array view_reads(const lock_keys& lk) {
  return json::array{in_line_read(lk, 0, true), key_read(lk.guard)};
}

// The keys of a semaphore K of N permits under prefix P (docs/design.md, "Semaphores on etcd"), all in
// [P+K \x01, P+K \x02): outside the lock's line (P+K/...) and outside every other key's keys, since keys hold
// no control characters. The count is in each key's name, so a range read tells it and a compare on a slot's
// name is a compare on the count too.
//   slot   = P+K \x01 s/<N>/<slot, 5 digits>, put with its holder's etcd lease, holding the owner (NUL
//   value),
//            as a guard does. Token = the revision of the put that granted it (its mod_revision then).
//   waiter = P+K \x01 w/<N>/<etcd lease ID in hex>: a queued acquire's place, with its own lease; the lowest
//            create_revisions are admitted first.
struct permit_keys {
  permit_keys(const std::string& prefix, std::string_view key)
      : base(prefix + std::string(key) + '\x01'), end(prefix + std::string(key) + '\x02') {}
  std::string base, end;
  std::string slot(std::uint32_t n, std::uint32_t s) const {
    char digits[8];
    std::snprintf(digits, sizeof digits, "%05u", s);
    return base + "s/" + std::to_string(n) + "/" + digits;
  }
  std::string waiter(std::uint32_t n, std::uint64_t lease) const {
    return base + "w/" + std::to_string(n) + "/" + lock_keys::hex(lease);
  }
};

// A key of a semaphore as named: its kind ('s' slot, 'w' waiter), the count and the slot; kind 0 when the
// name is not one.
struct permit_name {
  char kind = 0;
  std::uint32_t permits = 0, slot = 0;
};
permit_name parse_permit_name(std::string_view name, std::string_view base) {
  permit_name out;
  if (!name.starts_with(base)) return out;
  name.remove_prefix(base.size());
  if (name.size() < 4 || (name[0] != 's' && name[0] != 'w') || name[1] != '/') return out;
  const auto slash = name.find('/', 2);
  if (slash == std::string_view::npos) return out;
  std::uint32_t n = 0, s = 0;
  auto [p1, e1] = std::from_chars(name.data() + 2, name.data() + slash, n);
  if (e1 != std::errc() || p1 != name.data() + slash || n < 2 || n > 65535) return out;
  if (name[0] == 's') {
    auto [p2, e2] = std::from_chars(name.data() + slash + 1, name.data() + name.size(), s);
    if (e2 != std::errc() || p2 != name.data() + name.size() || s >= n) return out;
  }
  out.kind = name[0];
  out.permits = n;
  out.slot = s;
  return out;
}

// A read of the semaphore keys of lock `lk` (the first only, with `one`).
json::object permit_range_read(const lock_keys& lk, bool one) {
  json::object range{{"key", encode64(lk.guard + '\x01')}, {"range_end", encode64(lk.guard + '\x02')}};
  if (one) range["limit"] = "1";
  return json::object{{"request_range", std::move(range)}};
}

// No key of a semaphore on lock `lk`'s name (a range compare of create_revision == 0 holds for an empty
// range only): a lock is granted only so, and a semaphore never while the guard exists.
json::object no_permits(const lock_keys& lk) {
  json::object c = same_create(encode64(lk.guard + '\x01'), 0);
  c["range_end"] = encode64(lk.guard + '\x02');
  return c;
}

// The count of the semaphore whose keys a response of permit_range_read() found; 0 when none.
std::uint32_t permits_in(const json::value* response, const lock_keys& lk) {
  if (!response) return 0;
  const json::value* kvs = path(*response, {"response_range", "kvs"});
  if (!kvs || !kvs->is_array()) return 0;
  for (const auto& kv : kvs->as_array())
    if (auto n = parse_permit_name(decode64(string_field(kv, "key")), lk.guard + '\x01'); n.kind)
      return n.permits;
  return kvs->as_array().empty() ? 0 : 2;  // a key there that is not one of ours: in use all the same
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
    std::uint64_t lease = 0;
    auto out = co_await try_acquire(key, owner, ttl, value, clock::now() + timeout, lease);
    // Whatever was not granted hands its etcd lease back: a txn applied whose answer was lost leaves no keys.
    if ((out.ec || out.token == 0) && lease != 0)
      asio::co_spawn(ex_, leave_queue(shared_from_this(), lease), asio::detached);
    co_return out;
  }

  // acquire() but for handing back `lease`, the etcd lease granted for it (0 once granted or superseded).
  asio::awaitable<acquire_reply> try_acquire(const std::string& key, const std::string& owner,
                                             milliseconds ttl, const std::string& value,
                                             clock::time_point deadline, std::uint64_t& lease) {
    const lock_keys lk(prefix_, key);
    acquire_reply out;
    // Whole seconds, rounded up: etcd never ends the lease before the TTL the caller asked for.
    const auto ttl_s = std::max<std::int64_t>(1, (ttl.count() + 999) / 1000);
    if (auto g = co_await grant(ttl_s, deadline, lease); g.ec) co_return fail<acquire_reply>(g);
    for (int round = 0;; ++round) {
      // Free (nobody in line, no guard): the contender key and the guard in one txn.
      const json::object body1 = try_txn(lk, lease, owner, value);
      auto r = co_await call("/v3/kv/txn", body1, deadline);
      if (r.ec) co_return fail<acquire_reply>(r);
      if (succeeded(r)) {
        if (!header_revision(r.body, out.token)) {
          protocol(r, "txn answer has no revision");
          co_return fail<acquire_reply>(r);
        }
        lease = 0;
        co_return out;
      }
      lock_view v{first_in_line_of(response_at(r.body, 0), lk), response_kv(r.body, 1)};
      if (const auto n = permits_in(response_at(r.body, 2), lk); n > 1) {
        // The key is a semaphore's now (docs/protocol.md, "Semaphores"): a lock is 1 permit.
        out.ec = error::permits_mismatch;
        out.permits = n;
        out.diagnostic = "the key is held or awaited as a semaphore of " + std::to_string(n) + " permits";
        co_return out;
      }
      if (v.guard.present && v.guard.lease == lease) {
        // The txn was applied and its answer lost, then sent again (call() moves to another member): ours.
        out.token = v.guard.create;
        lease = 0;
        co_return out;
      }
      if (!v.first.resolved) v.first = co_await first_in_line(lk, deadline, r);
      if (r.ec) co_return fail<acquire_reply>(r);
      if (!v.first.present && !v.guard.present) {
        // Nobody in line, yet the compare failed: the range holds keys of locks named below this one
        // ("K/x"), or someone came and went. Tried the way etcd's TryLock does.
        auto q = co_await try_in_line(lk, lease, owner, value, deadline, out);
        if (q.ec) co_return fail<acquire_reply>(q);
        if (out.token != 0) {
          lease = 0;
          co_return out;
        }
        if (clock::now() < deadline) continue;  // someone came first: read again
      }
      const auto h = holder_of(v);
      if (round == 0 && h && h->baton && h->info.owner == owner) {
        // The same owner again (a retry after a lost reply): superseded with a new token, as batond does,
        // by deleting its keys and trying again; someone else may then come first.
        //
        // A re-acquire never makes the key free sooner (docs/protocol.md, acquire), and etcd cannot lengthen
        // a lease: when the old lease has more time left than this request asks for, the new keys get a
        // lease of that time instead, a second more than etcd reports (it counts whole seconds). Without that
        // time the new lease could end sooner than the old one: a failed lookup fails this try, outcome
        // unknown as after a failed grant (the key is still this owner's), and the new lease is handed back.
        auto old = co_await time_to_live(h->lease, deadline);
        if (old.r.ec) co_return fail<acquire_reply>(old.r);
        if (const auto left_s = old.left.count() / 1000 + 1; left_s > ttl_s) {
          co_await revoke(lease, deadline);
          if (auto g = co_await grant(left_s, deadline, lease); g.ec) co_return fail<acquire_reply>(g);
        }
        json::array compare{same_create(encode64(v.guard.key), v.guard.create)};
        json::array drop{delete_key(v.guard.key)};
        if (v.first.present && v.first.lease == v.guard.lease) {
          compare.push_back(same_create(encode64(v.first.key), v.first.create));
          drop.push_back(delete_key(v.first.key));
        }
        json::object txn{{"compare", std::move(compare)}, {"success", std::move(drop)}};
        if (auto d = co_await call("/v3/kv/txn", txn, deadline); d.ec) co_return fail<acquire_reply>(d);
        co_await revoke(h->lease, deadline);
        continue;
      }
      out.ec = error::held;
      out.diagnostic = h ? "the lock is held by another owner" : "the lock changed hands during the attempt";
      if (h) {
        out.holder = h->info;
        out.holder.ttl_remaining = (co_await time_to_live(h->lease, deadline)).left;  // 0 when unknown
      }
      co_return out;
    }
  }

  // A queued acquire (backend::acquire_queued) is etcd's Mutex.Lock: the contender key goes in line, its
  // lease kept alive while it waits, and a waiter watches only the key just before its own. First in line
  // with no guard: the guard is put, which is the grant, and its create_revision the token. Leaving without a
  // grant (the wait passed, an error, cancellation) revokes the etcd lease, which deletes the contender key,
  // and a guard put as it left, in one step: no ghost lock. A plain try comes first: it grants a free lock
  // at once, and a re-acquire by the holder's own owner supersedes, as acquire() does, instead of waiting
  // behind itself.
  asio::awaitable<acquire_reply> acquire_queued(std::string key, std::string owner, milliseconds ttl,
                                                std::string value, milliseconds wait,
                                                milliseconds timeout) override {
    std::uint64_t lease = 0;
    acquire_reply out;
    try {
      const auto per_call = std::max<milliseconds>(timeout - wait, milliseconds(1000));
      out = co_await try_acquire(key, owner, ttl, value, clock::now() + per_call, lease);
      if (out.ec == error::held) {
        if (lease != 0) co_await revoke(lease, clock::now() + per_call);
        lease = 0;
        out = co_await wait_in_line(key, owner, ttl, value, wait, timeout, lease);
      }
    } catch (const boost::system::system_error& e) {
      // Cancelled: Asio throws at the next co_await once the coroutine is.
      out = {};
      out.ec = e.code();
      out.diagnostic = "the wait was cancelled";
    }
    if ((out.ec || out.token == 0) && lease != 0)
      asio::co_spawn(ex_, leave_queue(shared_from_this(), lease), asio::detached);
    co_return out;
  }

  // acquire_queued() but for leaving: `lease` is the etcd lease of the place (0 once granted).
  asio::awaitable<acquire_reply> wait_in_line(const std::string& key, const std::string& owner,
                                              milliseconds ttl, const std::string& value, milliseconds wait,
                                              milliseconds timeout, std::uint64_t& lease) {
    const auto start = clock::now();
    const auto give_up = start + wait;
    // What each request may take: the time the caller allows beyond the wait.
    const auto per_call = std::max<clock::duration>(timeout - wait, std::chrono::seconds(1));
    const lock_keys lk(prefix_, key);
    const auto ttl_s = std::max<std::int64_t>(1, (ttl.count() + 999) / 1000);
    // A keep-alive every third of the TTL keeps the place while the etcd lease lives.
    const auto keep_alive_every = std::chrono::milliseconds(ttl_s * 1000 / 3);
    auto refreshed = clock::now();  // the send time of the lease's last grant or refresh
    if (auto g = co_await grant(ttl_s, start + per_call, lease); g.ec) co_return fail<acquire_reply>(g);
    queue_place place{lk, lease, clock::now() + per_call};
    const json::object enqueue = enqueue_txn(lk, lease, value);
    auto r = co_await call("/v3/kv/txn", enqueue, place.deadline);
    if (r.ec || !place.read(r, succeeded(r))) co_return fail<acquire_reply>(r);
    for (;;) {
      if (co_await cancelled()) co_return aborted<acquire_reply>();
      if (place.permits > 1) {
        // The key became a semaphore's while this lock waited: refused, as batond refuses it.
        acquire_reply out;
        out.ec = error::permits_mismatch;
        out.permits = place.permits;
        out.diagnostic =
            "the key is held or awaited as a semaphore of " + std::to_string(place.permits) + " permits";
        co_return out;
      }
      place.deadline = clock::now() + per_call;
      if (!place.first.resolved) {
        place.first = co_await first_in_line(lk, place.deadline, r);
        if (r.ec) co_return fail<acquire_reply>(r);
      }
      if (!place.mine.present) {
        acquire_reply out;
        out.ec = error::connection_failed;
        out.diagnostic = "the place in the queue was lost (its etcd lease ended while it waited)";
        co_return out;
      }
      const bool first = place.first.present && place.first.create == place.mine.create;
      std::uint64_t token = 0;
      if (place.guard.present && place.guard.lease == lease)
        token = place.guard.create;  // a claim's lost answer
      if (first && !place.guard.present) {
        // First in line and nobody holds the guard: claimed, while the contender key is still this one.
        const json::object claim = claim_txn(place, owner, value);
        auto c = co_await call("/v3/kv/txn", claim, place.deadline);
        if (c.ec) co_return fail<acquire_reply>(c);
        if (!succeeded(c)) {
          if (!place.read(c, false)) co_return fail<acquire_reply>(c);
          continue;
        }
        if (!header_revision(c.body, token)) {
          protocol(c, "txn answer has no revision");
          co_return fail<acquire_reply>(c);
        }
      }
      if (token != 0) {
        // The TTL restarts with a keep-alive sent now, and the lease is counted from the last refresh sent
        // (the grant's, if this one fails): never later than etcd counts it.
        const auto sent = clock::now();
        if (co_await keep_alive(lease, place.deadline) > 0) refreshed = sent;
        lease = 0;
        acquire_reply out;
        out.token = token;
        out.queued = std::chrono::duration_cast<milliseconds>(refreshed - start);
        co_return out;
      }
      if (clock::now() >= give_up) {
        acquire_reply out;
        out.ec = error::held;
        out.diagnostic = "the wait passed in the queue";
        if (auto h = holder_of(lock_view{place.first, place.guard})) {
          out.holder = h->info;
          out.holder.ttl_remaining = (co_await time_to_live(h->lease, place.deadline)).left;
        }
        co_return out;
      }
      // Waits on the key in the way: when this contender is first, the guard of a holder of the single-key
      // layout (or of one just leaving); else the contender just before this one, only it (no herd).
      std::string blocker = lk.guard;
      std::uint64_t from = place.revision + 1;
      if (!first) {
        auto before = co_await in_line_before(lk, place.mine.create, place.deadline, r);
        if (r.ec) co_return fail<acquire_reply>(r);
        blocker = before.present ? before.key : std::string();
        from = std::max(from, r_revision(r) + 1);
      }
      if (!blocker.empty()) {
        const auto until = std::min<clock::time_point>(give_up, refreshed + keep_alive_every);
        if (co_await watch_or_pause(encode64(blocker), from, until) == watch_end::cancelled)
          co_return aborted<acquire_reply>();
      }
      if (co_await cancelled()) co_return aborted<acquire_reply>();
      if (clock::now() >= refreshed + keep_alive_every) {
        const auto sent = clock::now();
        const auto left = co_await keep_alive(lease, clock::now() + per_call);
        if (left > 0) refreshed = sent;
        if (left == 0) {  // etcd has no such lease any more: the contender key went with it
          place.mine.present = false;
          continue;
        }
      }
      const json::object again = read_txn(place.reads());
      auto now = co_await call("/v3/kv/txn", again, place.deadline);
      if (now.ec || !place.read(now, false)) co_return fail<acquire_reply>(now);
    }
  }

  asio::awaitable<renew_reply> renew(std::string key, std::string owner, std::uint64_t token, milliseconds,
                                     milliseconds timeout) override {
    const auto deadline = clock::now() + timeout;
    if (known_permit(key, token)) co_return co_await renew_permit(key, owner, token, deadline);
    const lock_keys lk(prefix_, key);
    json::object txn{{"success", ownership_reads(lk)}};
    auto r = co_await call("/v3/kv/txn", txn, deadline);
    if (r.ec) co_return fail<renew_reply>(r);
    ownership o = ownership_of(r.body, 0, lk);
    auto out = co_await keep_alive_if_held(lk, o, owner, token, deadline);
    co_return co_await or_permit_renew(std::move(out), key, owner, token, deadline);
  }

  // A lock's renew that found no lock may be a permit's that another backend granted (the CLI's renew).
  asio::awaitable<renew_reply> or_permit_renew(renew_reply lock_answer, const std::string& key,
                                               const std::string& owner, std::uint64_t token,
                                               clock::time_point deadline) {
    if (lock_answer.ec != error::lease_lost || lock_answer.lost_reason != "not_held") co_return lock_answer;
    auto p = co_await renew_permit(key, owner, token, deadline);
    if (p.ec == error::lease_lost && p.lost_reason == "not_held") co_return lock_answer;
    co_return p;
  }

  // A batch (docs/protocol.md, "renew batch"): the keys of up to `max_txn_leases` entries are read in one
  // txn, at one revision, and each lease still held by its owner with its token is kept alive on its own, as
  // renew() does. Each entry's conditions are exactly a renew's; what the batch saves is a request per lease.
  asio::awaitable<std::vector<renew_reply>> renew_batch(std::span<const renew_entry> entries,
                                                        milliseconds timeout) override {
    const auto deadline = clock::now() + timeout;
    std::vector<std::size_t> permit_at;
    std::vector<renew_entry> locks;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (known_permit(entries[i].key, entries[i].token))
        permit_at.push_back(i);
      else
        locks.push_back(entries[i]);
    }
    if (permit_at.empty()) co_return co_await renew_lock_batch(entries, timeout);
    // A semaphore's permits are renewed one by one (their keys are not the lock's); the locks in a batch.
    std::vector<renew_reply> out(entries.size());
    const std::span<const renew_entry> lock_span(locks);
    auto lock_out = co_await renew_lock_batch(lock_span, timeout);
    for (std::size_t i = 0, l = 0, p = 0; i < entries.size(); ++i) {
      if (p < permit_at.size() && permit_at[p] == i) {
        out[i] = co_await renew_permit(entries[i].key, entries[i].owner, entries[i].token, deadline);
        ++p;
      } else {
        out[i] = std::move(lock_out[l++]);
      }
    }
    co_return out;
  }

  asio::awaitable<std::vector<renew_reply>> renew_lock_batch(std::span<const renew_entry> entries,
                                                             milliseconds timeout) {
    // etcd refuses a txn of more operations than its --max-txn-ops, 128 by default: two reads a lease.
    constexpr std::size_t max_txn_leases = 128 / ownership_read_count;
    const auto deadline = clock::now() + timeout;
    std::vector<renew_reply> out(entries.size());
    for (std::size_t first = 0; first < entries.size(); first += max_txn_leases) {
      const std::size_t end = std::min(entries.size(), first + max_txn_leases);
      json::array reads;
      for (std::size_t i = first; i < end; ++i)
        for (auto& read : ownership_reads(lock_keys(prefix_, entries[i].key)))
          reads.push_back(std::move(read));
      json::object txn{{"success", std::move(reads)}};
      auto r = co_await call("/v3/kv/txn", txn, deadline);
      const json::value* responses = r.ec ? nullptr : path(r.body, {"responses"});
      if (!r.ec && (!responses || !responses->is_array() ||
                    responses->as_array().size() != (end - first) * ownership_read_count))
        protocol(r, "txn answer lacks one response per read");
      for (std::size_t i = first; i < end; ++i) {
        if (r.ec) {
          out[i] = fail<renew_reply>(r);
          continue;
        }
        const lock_keys lk(prefix_, entries[i].key);
        ownership o = ownership_of(r.body, (i - first) * ownership_read_count, lk);
        out[i] = co_await keep_alive_if_held(lk, o, entries[i].owner, entries[i].token, deadline);
      }
    }
    co_return out;
  }

  // The rest of a renew once the lock's keys have been read: refused unless `owner` holds it under `token`,
  // else its etcd lease is kept alive.
  asio::awaitable<renew_reply> keep_alive_if_held(const lock_keys& lk, ownership& o, const std::string& owner,
                                                  std::uint64_t token, clock::time_point deadline) {
    renew_reply out;
    if (auto r = co_await resolve(lk, o, deadline); r.ec) co_return fail<renew_reply>(r);
    if (refuse(out, o, owner, token)) co_return out;
    json::object body{{"ID", std::to_string(o.guard.lease)}};
    auto ka = co_await call("/v3/lease/keepalive", body, deadline);
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

  // The first in line read whole when its page held only other locks' keys.
  asio::awaitable<http_result> resolve(const lock_keys& lk, ownership& o, clock::time_point deadline) {
    http_result r;
    if (!o.first.resolved) o.first = co_await first_in_line(lk, deadline, r);
    co_return r;
  }

  // Deletes this lease's keys if `owner` holds the lock with `token` (the guard and, when first in line with
  // the guard's etcd lease, the contender key, in one txn, each only as read), then revokes the etcd lease. A
  // lock held in the single-key layout is released as before: its key, by its create_revision and owner.
  asio::awaitable<release_reply> release(std::string key, std::string owner, std::uint64_t token,
                                         milliseconds timeout) override {
    const auto deadline = clock::now() + timeout;
    if (known_permit(key, token)) co_return co_await release_permit(key, owner, token, deadline);
    const lock_keys lk(prefix_, key);
    json::object read{{"success", ownership_reads(lk)}};
    auto last = co_await call("/v3/kv/txn", read, deadline);
    for (;;) {
      if (last.ec) co_return fail<release_reply>(last);
      ownership o = ownership_of(last.body, 0, lk);
      if (auto r = co_await resolve(lk, o, deadline); r.ec) co_return fail<release_reply>(r);
      release_reply out;
      const stored_kv& g = o.guard;
      if (!g.present || g.create != token || split_entry(g.value).owner != owner) {
        if (holder_of(lock_view{o.first, g})) {
          out.outcome = release_outcome::not_owner;
          co_return out;
        }
        // No lock: a permit of a semaphore on the key, perhaps (granted by another backend).
        co_return co_await release_permit(key, owner, token, deadline);
      }
      json::array compare{same_mod(encode64(g.key), g.mod)}, drop{delete_key(g.key)};
      if (o.first.present && o.first.lease == g.lease) {
        compare.push_back(same_mod(encode64(o.first.key), o.first.mod));
        drop.push_back(delete_key(o.first.key));
      }
      json::object txn{
          {"compare", std::move(compare)}, {"success", std::move(drop)}, {"failure", ownership_reads(lk)}};
      auto r = co_await call("/v3/kv/txn", txn, deadline);
      if (r.ec) co_return fail<release_reply>(r);
      if (succeeded(r)) {
        co_await revoke(g.lease, deadline);
        co_return out;  // released
      }
      if (clock::now() >= deadline) {
        out.ec = error::request_timeout;
        out.diagnostic = "the lock's keys kept changing under the release";
        co_return out;
      }
      last = std::move(r);  // changed between the read and the txn (a proclaim): decided again
    }
  }

  // The read decides a refusal's reason as renew's does; the puts are conditional on both keys being exactly
  // as read (their mod_revisions), so they land only on this lease's own keys. A failed compare means a key
  // changed between: the txn's answer is the keys as they now are, and the decision is made again from them
  // (the lease may still be this one's, changed by another proclaim of this holder). The value goes to the
  // contender key, where etcd's Election keeps it, and to the guard, beside the owner.
  asio::awaitable<proclaim_reply> proclaim(std::string key, std::string owner, std::uint64_t token,
                                           std::string value, milliseconds timeout) override {
    const auto deadline = clock::now() + timeout;
    if (known_permit(key, token)) {
      // A permit's token is its slot key's mod_revision: a put of a new value would change it.
      proclaim_reply out;
      out.ec = error::invalid_config;
      out.diagnostic = "the etcd backend does not proclaim a semaphore's permit (docs/design.md)";
      co_return out;
    }
    const lock_keys lk(prefix_, key);
    json::object read{{"success", ownership_reads(lk)}};
    auto last = co_await call("/v3/kv/txn", read, deadline);
    for (;;) {
      if (last.ec) co_return fail<proclaim_reply>(last);
      ownership o = ownership_of(last.body, 0, lk);
      if (auto r = co_await resolve(lk, o, deadline); r.ec) co_return fail<proclaim_reply>(r);
      proclaim_reply out;
      if (refuse(out, o, owner, token)) co_return out;
      json::object txn{{"compare", json::array{same_mod(encode64(o.first.key), o.first.mod),
                                               same_mod(encode64(o.guard.key), o.guard.mod)}},
                       {"success", json::array{put_key(o.first.key, value, o.guard.lease),
                                               put_key(o.guard.key, entry_of(owner, value), o.guard.lease)}},
                       {"failure", ownership_reads(lk)}};
      auto r = co_await call("/v3/kv/txn", txn, deadline);
      if (r.ec) co_return fail<proclaim_reply>(r);
      if (succeeded(r)) co_return out;
      if (clock::now() >= deadline) {
        out.ec = error::request_timeout;
        out.diagnostic = "the key kept changing under the proclaim";
        co_return out;
      }
      last = std::move(r);
    }
  }

  asio::awaitable<record_write_reply> write_record(std::string key, std::string owner, std::uint64_t token,
                                                   std::string value, milliseconds timeout) override {
    const auto deadline = clock::now() + timeout;
    if (known_permit(key, token)) {
      record_write_reply out;
      out.ec = error::invalid_config;
      out.diagnostic =
          "the etcd backend does not write a lock's record for a semaphore's permit (docs/design.md)";
      co_return out;
    }
    const lock_keys lk(prefix_, key);
    const std::string rk = encode64(record_key(key));
    const std::string stored = encode64(std::to_string(token) + '\0' + owner + '\0' + value);
    auto reads = [&] {
      json::array out = ownership_reads(lk);
      out.push_back(json::object{{"request_range", json::object{{"key", rk}}}});
      return out;
    };
    const json::object first_read = read_txn(reads());
    auto last = co_await call("/v3/kv/txn", first_read, deadline);
    for (;;) {
      if (last.ec) co_return fail<record_write_reply>(last);
      const json::value* responses = path(last.body, {"responses"});
      if (!responses || !responses->is_array() || responses->as_array().size() != ownership_read_count + 1) {
        protocol(last, "txn answer lacks the lock's keys and the record");
        continue;
      }
      ownership o = ownership_of(last.body, 0, lk);
      if (auto r = co_await resolve(lk, o, deadline); r.ec) co_return fail<record_write_reply>(r);
      const json::value* rec = kv_of(responses->as_array()[ownership_read_count]);
      record_write_reply out;
      if (refuse(out, o, owner, token)) co_return out;
      std::uint64_t rec_mod = 0, rec_version = 0;
      if (rec) {
        uint_field(*rec, "mod_revision", rec_mod);
        uint_field(*rec, "version", rec_version);
        if (auto was = split_record(decode64(string_field(*rec, "value"))); was.token > token) {
          out.ec = error::stale_token;
          out.diagnostic = "the record was written with token " + std::to_string(was.token);
          co_return out;
        }
      }
      json::object txn{
          {"compare", json::array{same_mod(encode64(o.first.key), o.first.mod),
                                  same_mod(encode64(o.guard.key), o.guard.mod), same_mod(rk, rec_mod)}},
          {"success",
           json::array{json::object{{"request_put", json::object{{"key", rk}, {"value", stored}}}}}},
          {"failure", reads()}};
      auto r = co_await call("/v3/kv/txn", txn, deadline);
      if (r.ec) co_return fail<record_write_reply>(r);
      if (succeeded(r)) {
        out.version = rec_version + 1;  // the compare held: no other put came between
        co_return out;
      }
      if (clock::now() >= deadline) {
        out.ec = error::request_timeout;
        out.diagnostic = "the lock or its record kept changing under the write";
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

  // An operator's break (docs/protocol.md, "break") maps to revoking the holder's etcd lease: its contender
  // key and its guard go in one step, as when a waiter leaves, the next in line is woken by its watch, and
  // the next grant's guard is created at a later revision (a larger token). A lease ID belongs to one hold,
  // so a revoke after the holder released and another took the key cannot touch the new holder. The broken
  // holder learns it from its loss watch or next renew (`not_held`; etcd keeps no reason).
  asio::awaitable<break_reply> break_lease(std::string key, std::optional<std::uint64_t> token,
                                           milliseconds timeout) override {
    const auto deadline = clock::now() + timeout;
    const lock_keys lk(prefix_, key);
    http_result r;
    const lock_view v = co_await read_view(lk, deadline, r);
    if (r.ec) co_return fail<break_reply>(r);
    break_reply out;
    auto h = holder_of(v);
    if (!h) {
      // A semaphore's permit, named by its token (docs/protocol.md, "Semaphores").
      get_reply held;
      http_result pr;
      if (co_await permit_holders(key, deadline, held, pr)) {
        if (!token) {
          out.ec = error::bad_request;
          out.diagnostic =
              "the key has " + std::to_string(held.permits) + " permits: name the permit's token";
          co_return out;
        }
        permit_lookup p;
        co_await find_permit(key, *token, deadline, p);
        if (p.r.ec) co_return fail<break_reply>(p.r);
        if (!p.kv) {
          out.ec = error::token_mismatch;
          out.holder = held.holders.front();
          out.diagnostic = "no permit of the key has token " + std::to_string(*token);
          co_return out;
        }
        for (const auto& one : held.holders)
          if (one.token == *token) out.holder = one;
        json::object revoke_permit{{"ID", std::to_string(p.kv->lease)}};
        auto rv = co_await call("/v3/lease/revoke", revoke_permit, deadline);
        if (rv.ec && (rv.status == 404 || rv.diagnostic.find("not found") != std::string::npos)) {
          out.ec = error::not_held;
          out.diagnostic = "the permit's etcd lease ended before the break";
          co_return out;
        }
        if (rv.ec) co_return fail<break_reply>(rv);
        co_return out;
      }
      if (pr.ec) co_return fail<break_reply>(pr);
    }
    if (!h || h->lease == 0) {
      // No holder, or a key put without an etcd lease (by hand): nothing a revoke could end.
      out.ec = error::not_held;
      out.diagnostic = h ? "the lock's key in etcd has no etcd lease to revoke" : "the lock is not held";
      co_return out;
    }
    out.holder = h->info;
    out.holder.ttl_remaining = (co_await time_to_live(h->lease, deadline)).left;
    if (token && *token != h->info.token) {
      out.ec = error::token_mismatch;
      out.diagnostic = "the lock is held with token " + std::to_string(h->info.token);
      co_return out;
    }
    json::object revoke_body{{"ID", std::to_string(h->lease)}};
    auto rv = co_await call("/v3/lease/revoke", revoke_body, deadline);
    if (rv.ec && (rv.status == 404 || rv.diagnostic.find("not found") != std::string::npos)) {
      // The lease ended between the read and the revoke (released or expired): nothing was broken.
      out.ec = error::not_held;
      out.diagnostic = "the lock's etcd lease ended before the break";
      co_return out;
    }
    if (rv.ec) co_return fail<break_reply>(rv);
    co_return out;
  }

  asio::awaitable<get_reply> get(std::string key, std::optional<wait_for_change> wait,
                                 milliseconds timeout) override {
    const auto give_up = clock::now() + (wait ? wait->wait : milliseconds{0});
    const lock_keys lk(prefix_, key);
    for (;;) {
      const auto deadline = std::max(clock::now(), give_up) + timeout;
      get_reply out;
      http_result r;
      const lock_view v = co_await read_view(lk, deadline, r);
      if (r.ec) co_return fail<get_reply>(r);
      if (auto h = holder_of(v)) {
        out.holder = h->info;
        out.holder->ttl_remaining = (co_await time_to_live(h->lease, deadline)).left;  // 0 when unknown
      } else {
        // A semaphore's permits, if any: the lowest held slot, and all of them.
        http_result pr;
        co_await permit_holders(key, deadline, out, pr);
        if (pr.ec) co_return fail<get_reply>(pr);
      }
      std::uint64_t current = out.holder ? out.holder->token : 0;
      const bool value_changed =
          wait && wait->value &&
          (out.holder ? std::string_view(out.holder->value) : std::string_view()) != *wait->value;
      // Changed: no live lease has the token waited on any more (0: one is held now).
      const bool token_changed =
          wait &&
          (wait->token == 0 ? current != 0
                            : current != wait->token &&
                                  std::none_of(out.holders.begin(), out.holders.end(),
                                               [&](const holder_info& x) { return x.token == wait->token; }));
      if (!wait || token_changed || value_changed || clock::now() >= give_up) co_return out;
      // Watching the lock's keys from the revision after this read misses no change made since: a delete
      // (release or expiry) wakes the waiter at once. Any event wakes it, and the read above decides again.
      std::uint64_t seen = r_revision(r);
      if (seen != 0) {
        const std::string from64 = encode64(lk.guard), end64 = encode64(lk.queue_end);
        auto w = co_await watch(from64, seen + 1, give_up, end64);
        if (w == watch_end::cancelled) co_return aborted<get_reply>();
        if (w != watch_end::failed) continue;
      }
      // The watch could not be set up or broke: bounded polling, a holder change is seen within one period.
      asio::steady_timer t(ex_,
                           std::min<clock::duration>(std::chrono::milliseconds(100), give_up - clock::now()));
      co_await t.async_wait(asio::use_awaitable);
    }
  }

  // --- Semaphores (docs/design.md, "Semaphores on etcd") ---

  // A semaphore's permit: a try, and with `wait` a place among the key's waiters. 1 permit is a lock's
  // acquire, as before.
  asio::awaitable<acquire_reply> acquire_with(acquire_request q) override {
    if (q.permits <= 1) co_return co_await backend::acquire_with(std::move(q));
    acquire_reply out;
    if (q.lock_delay > milliseconds{0}) {
      out.ec = error::invalid_config;
      out.diagnostic =
          "lock-delay is not supported by the etcd backend (docs/design.md, \"Lock-delay on etcd\")";
      co_return out;
    }
    if (has_control_characters(q.key)) {
      out.ec = error::invalid_config;
      out.diagnostic = "a key with control characters cannot name a semaphore";
      co_return out;
    }
    std::uint64_t lease = 0;
    try {
      const auto per_call =
          q.wait ? std::max<milliseconds>(q.timeout - *q.wait, milliseconds(1000)) : q.timeout;
      out = co_await try_permit(q, clock::now() + per_call, lease);
      if (out.ec == error::held && q.wait) {
        if (lease != 0) co_await revoke(lease, clock::now() + per_call);
        lease = 0;
        out = co_await wait_for_permit(q, per_call, lease);
      }
    } catch (const boost::system::system_error& e) {
      out = {};
      out.ec = e.code();
      out.diagnostic = "the wait was cancelled";
    }
    if ((out.ec || out.token == 0) && lease != 0)
      asio::co_spawn(ex_, leave_queue(shared_from_this(), lease), asio::detached);
    if (!out.ec) {
      permits_[prefix_ + q.key][out.token] = out.slot;
      permit_counts_[prefix_ + q.key] = q.permits;
    }
    co_return out;
  }

  // A semaphore's keys as read at one revision: its slots, its waiters (by create_revision), the count they
  // carry (0: none, or keys of several counts), and the lock's guard and first in line.
  struct permit_view {
    std::map<std::uint32_t, stored_kv> slots;
    std::vector<stored_kv> waiters;
    std::uint32_t permits = 0;
    bool mixed = false;  // keys of different counts (never made by this backend; refused all the same)
    stored_kv guard, first;
    std::uint64_t revision = 0;
  };

  json::array permit_reads(const lock_keys& lk) const {
    return json::array{permit_range_read(lk, false), key_read(lk.guard), in_line_read(lk, 0, true)};
  }

  // Reads a semaphore's keys (permit_reads()) from `r`, an answer whose responses start at `at`.
  permit_view read_permits(const http_result& r, std::size_t at, const lock_keys& lk) const {
    permit_view v;
    v.revision = r_revision(r);
    const std::string base = lk.guard + '\x01';
    if (const json::value* range = response_at(r.body, at))
      if (const json::value* kvs = path(*range, {"response_range", "kvs"}); kvs && kvs->is_array())
        for (const auto& kv : kvs->as_array()) {
          stored_kv one = read_kv(&kv);
          const auto n = parse_permit_name(one.key, base);
          if (!n.kind) continue;
          if (v.permits != 0 && v.permits != n.permits) v.mixed = true;
          v.permits = n.permits;
          if (n.kind == 's')
            v.slots[n.slot] = std::move(one);
          else
            v.waiters.push_back(std::move(one));
        }
    std::sort(v.waiters.begin(), v.waiters.end(),
              [](const stored_kv& a, const stored_kv& b) { return a.create < b.create; });
    v.guard = response_kv(r.body, at + 1);
    v.first = first_in_line_of(response_at(r.body, at + 2), lk);
    return v;
  }

  // Why `q` may not take a permit of the key as read: a lock holds or awaits it, or another count does.
  static bool mismatched(const permit_view& v, std::uint32_t permits, acquire_reply& out) {
    if (v.guard.present || v.first.present) {  // `first` resolved by the caller
      out.ec = error::permits_mismatch;
      out.permits = 1;
      out.diagnostic = "the key is held or awaited as a lock";
      return true;
    }
    if (v.mixed || (v.permits != 0 && v.permits != permits)) {
      out.ec = error::permits_mismatch;
      out.permits = v.permits;
      out.diagnostic = "the key is held or awaited with " + std::to_string(v.permits) + " permits";
      return true;
    }
    return false;
  }

  // The holders of a full semaphore, in slot order, with the TTL their etcd leases have left; `out.holder`
  // the one that expires first.
  asio::awaitable<void> report_held(const permit_view& v, std::uint32_t permits, clock::time_point deadline,
                                    acquire_reply& out) {
    out.ec = error::held;
    out.permits = permits;
    out.diagnostic = "every permit of the key is held";
    bool first = true;
    for (const auto& [slot, kv] : v.slots) {
      auto e = split_entry(kv.value);
      holder_info h{std::move(e.owner), kv.mod, milliseconds(0), std::move(e.value)};
      h.slot = slot;
      h.ttl_remaining = (co_await time_to_live(kv.lease, deadline)).left;
      if (first || h.ttl_remaining < out.holder.ttl_remaining) out.holder = h;
      first = false;
      out.holders.push_back(std::move(h));
    }
  }

  // One try: the lowest free slot not promised to a waiter, in one txn conditional on nothing of the
  // semaphore having changed since the read (so the count, the waiters and the slots are exactly as read)
  // and no lock's guard. The same owner holding a permit gets its slot again with a newer token: its key put
  // over, conditional on its mod_revision. `lease` is the etcd lease granted for the permit (0 once it holds
  // it).
  asio::awaitable<acquire_reply> try_permit(const acquire_request& q, clock::time_point deadline,
                                            std::uint64_t& lease) {
    const lock_keys lk(prefix_, q.key);
    const permit_keys pk(prefix_, q.key);
    acquire_reply out;
    const auto ttl_s = std::max<std::int64_t>(1, (q.ttl.count() + 999) / 1000);
    if (auto g = co_await grant(ttl_s, deadline, lease); g.ec) co_return fail<acquire_reply>(g);
    for (;;) {
      const json::object read = read_txn(permit_reads(lk));
      auto r = co_await call("/v3/kv/txn", read, deadline);
      if (r.ec) co_return fail<acquire_reply>(r);
      permit_view v = read_permits(r, 0, lk);
      if (!v.first.resolved) v.first = co_await first_in_line(lk, deadline, r);
      if (r.ec) co_return fail<acquire_reply>(r);
      if (mismatched(v, q.permits, out)) co_return out;
      std::optional<std::uint32_t> slot;
      const stored_kv* again = nullptr;
      for (const auto& [s, kv] : v.slots)
        if (kv.lease == lease) {
          // A txn applied whose answer was lost, sent again: ours.
          out.token = kv.mod;
          out.slot = s;
          out.permits = q.permits;
          lease = 0;
          co_return out;
        } else if (split_entry(kv.value).owner == q.owner) {
          slot = s;
          again = &kv;
        }
      if (!slot) {
        // Waiters come first: a try takes a free slot only beyond those they are due.
        std::vector<std::uint32_t> free;
        for (std::uint32_t s = 0; s < q.permits; ++s)
          if (!v.slots.contains(s)) free.push_back(s);
        if (free.size() <= v.waiters.size()) {
          co_await report_held(v, q.permits, deadline, out);
          co_return out;
        }
        slot = free[v.waiters.size()];
      }
      json::object unchanged{{"key", encode64(pk.base)},
                             {"range_end", encode64(pk.end)},
                             {"target", "MOD"},
                             {"result", "LESS"},
                             {"mod_revision", std::to_string(v.revision + 1)}};
      json::array compare{std::move(unchanged), same_create(encode64(lk.guard), 0)};
      const std::string key = pk.slot(q.permits, *slot);
      std::uint64_t old_lease = 0;
      if (again) {
        // A re-acquire never makes the permit end sooner: the new lease lasts at least what the old has left.
        auto old = co_await time_to_live(again->lease, deadline);
        if (old.r.ec) co_return fail<acquire_reply>(old.r);
        if (const auto left_s = old.left.count() / 1000 + 1; old.left.count() > 0 && left_s > ttl_s) {
          co_await revoke(lease, deadline);
          if (auto g = co_await grant(left_s, deadline, lease); g.ec) co_return fail<acquire_reply>(g);
        }
        compare.push_back(same_mod(encode64(key), again->mod));
        old_lease = again->lease;
      } else {
        compare.push_back(same_create(encode64(key), 0));
      }
      json::object txn{{"compare", std::move(compare)},
                       {"success", json::array{put_key(key, entry_of(q.owner, q.value), lease)}}};
      auto t = co_await call("/v3/kv/txn", txn, deadline);
      if (t.ec) co_return fail<acquire_reply>(t);
      if (succeeded(t)) {
        if (!header_revision(t.body, out.token)) {
          protocol(t, "txn answer has no revision");
          co_return fail<acquire_reply>(t);
        }
        out.slot = *slot;
        out.permits = q.permits;
        lease = 0;
        if (old_lease != 0)
          co_await revoke(old_lease, deadline);  // the superseded permit's lease, if its own
        co_return out;
      }
      if (clock::now() >= deadline) {
        out.ec = error::request_timeout;
        out.diagnostic = "the semaphore's keys kept changing under the acquire";
        co_return out;
      }
    }
  }

  // A queued permit: a waiter key under its own etcd lease, kept alive while it waits; the waiters with the
  // lowest create_revisions are admitted, one per free slot (the i-th waiter takes the i-th free slot, its
  // key deleted and the slot put in one txn). Any change of the semaphore's keys (a watch on them all, from
  // the revision after the read) wakes the waiters, which read again. Leaving revokes the lease: the waiter
  // key, and a slot claimed as it left, go in one step.
  asio::awaitable<acquire_reply> wait_for_permit(const acquire_request& q, clock::duration per_call,
                                                 std::uint64_t& lease) {
    const auto start = clock::now();
    const auto give_up = start + *q.wait;
    const lock_keys lk(prefix_, q.key);
    const permit_keys pk(prefix_, q.key);
    const auto ttl_s = std::max<std::int64_t>(1, (q.ttl.count() + 999) / 1000);
    const auto keep_alive_every = std::chrono::milliseconds(ttl_s * 1000 / 3);
    auto refreshed = clock::now();
    if (auto g = co_await grant(ttl_s, start + per_call, lease); g.ec) co_return fail<acquire_reply>(g);
    const std::string mine = pk.waiter(q.permits, lease);
    json::object enqueue{{"compare", json::array{same_create(encode64(mine), 0)}},
                         {"success", json::array{put_key(mine, "", lease)}}};
    if (auto e = co_await call("/v3/kv/txn", enqueue, start + per_call); e.ec)
      co_return fail<acquire_reply>(e);
    for (;;) {
      if (co_await cancelled()) co_return aborted<acquire_reply>();
      const auto deadline = clock::now() + per_call;
      const json::object read = read_txn(permit_reads(lk));
      auto r = co_await call("/v3/kv/txn", read, deadline);
      if (r.ec) co_return fail<acquire_reply>(r);
      permit_view v = read_permits(r, 0, lk);
      if (!v.first.resolved) v.first = co_await first_in_line(lk, deadline, r);
      if (r.ec) co_return fail<acquire_reply>(r);
      acquire_reply out;
      for (const auto& [s, kv] : v.slots)
        if (kv.lease == lease) {  // a claim applied whose answer was lost
          out.token = kv.mod;
          out.slot = s;
        }
      if (out.token == 0) {
        if (mismatched(v, q.permits, out)) co_return out;
        const auto me = std::find_if(v.waiters.begin(), v.waiters.end(),
                                     [&](const stored_kv& w) { return w.key == mine; });
        if (me == v.waiters.end()) {
          out.ec = error::connection_failed;
          out.diagnostic = "the place among the waiters was lost (its etcd lease ended while it waited)";
          co_return out;
        }
        const auto ahead = static_cast<std::size_t>(me - v.waiters.begin());
        std::vector<std::uint32_t> free;
        for (std::uint32_t s = 0; s < q.permits; ++s)
          if (!v.slots.contains(s)) free.push_back(s);
        if (ahead < free.size()) {
          const std::string key = pk.slot(q.permits, free[ahead]);
          json::object claim{
              {"compare", json::array{same_create(encode64(key), 0), same_create(encode64(mine), me->create),
                                      same_create(encode64(lk.guard), 0)}},
              {"success", json::array{put_key(key, entry_of(q.owner, q.value), lease), delete_key(mine)}}};
          auto c = co_await call("/v3/kv/txn", claim, deadline);
          if (c.ec) co_return fail<acquire_reply>(c);
          if (!succeeded(c)) continue;  // someone came first: read again
          if (!header_revision(c.body, out.token)) {
            protocol(c, "txn answer has no revision");
            co_return fail<acquire_reply>(c);
          }
          out.slot = free[ahead];
        }
      }
      if (out.token != 0) {
        const auto sent = clock::now();
        if (co_await keep_alive(lease, deadline) > 0) refreshed = sent;
        lease = 0;
        out.permits = q.permits;
        out.queued = std::chrono::duration_cast<milliseconds>(refreshed - start);
        co_return out;
      }
      if (clock::now() >= give_up) {
        co_await report_held(v, q.permits, deadline, out);
        out.diagnostic = "the wait passed among the semaphore's waiters";
        co_return out;
      }
      const auto until = std::min<clock::time_point>(give_up, refreshed + keep_alive_every);
      if (co_await watch_or_pause(encode64(pk.base), v.revision + 1, until, encode64(pk.end)) ==
          watch_end::cancelled)
        co_return aborted<acquire_reply>();
      if (co_await cancelled()) co_return aborted<acquire_reply>();
      if (clock::now() >= refreshed + keep_alive_every) {
        const auto sent = clock::now();
        const auto left = co_await keep_alive(lease, clock::now() + per_call);
        if (left > 0) refreshed = sent;
      }
    }
  }

  // The permit of `key` granted with `token` (its slot key's mod_revision), as read now: `found` false when
  // no live permit has it; `v` the whole semaphore.
  struct permit_lookup {
    http_result r;
    permit_view v;
    const stored_kv* kv = nullptr;
    std::uint32_t slot = 0;
  };
  asio::awaitable<void> find_permit(const std::string& key, std::uint64_t token, clock::time_point deadline,
                                    permit_lookup& out) {
    const lock_keys lk(prefix_, key);
    const json::object read = read_txn(permit_reads(lk));
    out.r = co_await call("/v3/kv/txn", read, deadline);
    if (out.r.ec) co_return;
    out.v = read_permits(out.r, 0, lk);
    out.kv = nullptr;
    for (const auto& [s, kv] : out.v.slots)
      if (kv.mod == token) {
        out.kv = &kv;
        out.slot = s;
      }
  }

  // Renew's refusal for a permit, in the protocol's order for a semaphore key; false when `owner` holds the
  // permit `token`.
  template <class Reply>
  static bool refuse_permit(Reply& out, const permit_lookup& p, const std::string& owner) {
    if (p.kv && split_entry(p.kv->value).owner == owner) return false;
    if (p.kv) {
      out.lost_reason = "owner_mismatch";
    } else {
      const bool owner_holds = std::any_of(p.v.slots.begin(), p.v.slots.end(), [&](const auto& e) {
        return split_entry(e.second.value).owner == owner;
      });
      out.lost_reason = owner_holds ? "token_mismatch" : "not_held";
    }
    out.ec = error::lease_lost;
    out.diagnostic = "the semaphore's slot key no longer carries this permit";
    return true;
  }

  // Whether `key` names a semaphore this backend granted `token` of (it then skips the lock's reads).
  bool known_permit(const std::string& key, std::uint64_t token) const {
    auto it = permits_.find(prefix_ + key);
    return it != permits_.end() && it->second.contains(token);
  }
  void forget_permit(const std::string& key, std::uint64_t token) {
    auto it = permits_.find(prefix_ + key);
    if (it == permits_.end()) return;
    it->second.erase(token);
    if (it->second.empty()) permits_.erase(it);
  }

  asio::awaitable<renew_reply> renew_permit(const std::string& key, const std::string& owner,
                                            std::uint64_t token, clock::time_point deadline) {
    permit_lookup p;
    co_await find_permit(key, token, deadline, p);
    if (p.r.ec) co_return fail<renew_reply>(p.r);
    renew_reply out;
    if (refuse_permit(out, p, owner)) co_return out;
    const auto left = co_await keep_alive(p.kv->lease, deadline);
    if (left < 0) {
      out.ec = error::request_timeout;
      out.diagnostic = "no answer to the keep-alive";
    } else if (left == 0) {
      out.ec = error::lease_lost;
      out.lost_reason = "expired";
      out.diagnostic = "etcd no longer has the lease";
    }
    co_return out;
  }

  asio::awaitable<release_reply> release_permit(const std::string& key, const std::string& owner,
                                                std::uint64_t token, clock::time_point deadline) {
    for (;;) {
      permit_lookup p;
      co_await find_permit(key, token, deadline, p);
      if (p.r.ec) co_return fail<release_reply>(p.r);
      release_reply out;
      if (!p.kv) {
        out.outcome = release_outcome::already_free;
        forget_permit(key, token);
        co_return out;
      }
      if (split_entry(p.kv->value).owner != owner) {
        out.outcome = release_outcome::not_owner;
        co_return out;
      }
      json::object txn{{"compare", json::array{same_mod(encode64(p.kv->key), p.kv->mod)}},
                       {"success", json::array{delete_key(p.kv->key)}}};
      auto r = co_await call("/v3/kv/txn", txn, deadline);
      if (r.ec) co_return fail<release_reply>(r);
      if (succeeded(r)) {
        co_await revoke(p.kv->lease, deadline);
        forget_permit(key, token);
        co_return out;
      }
      if (clock::now() >= deadline) {
        out.ec = error::request_timeout;
        out.diagnostic = "the permit's key kept changing under the release";
        co_return out;
      }
    }
  }

  // A semaphore key's holders for get(): the lowest held slot and every one, with their TTLs.
  asio::awaitable<bool> permit_holders(const std::string& key, clock::time_point deadline, get_reply& out,
                                       http_result& r) {
    const lock_keys lk(prefix_, key);
    const json::object read = read_txn(permit_range_read(lk, false));
    r = co_await call("/v3/kv/txn", read, deadline);
    if (r.ec) co_return false;
    // Only the range: the guard and the line were read by the caller.
    permit_view v;
    v.revision = r_revision(r);
    const std::string base = lk.guard + '\x01';
    if (const json::value* range = response_at(r.body, 0))
      if (const json::value* kvs = path(*range, {"response_range", "kvs"}); kvs && kvs->is_array())
        for (const auto& kv : kvs->as_array()) {
          stored_kv one = read_kv(&kv);
          const auto n = parse_permit_name(one.key, base);
          if (n.kind != 's') continue;
          v.permits = n.permits;
          v.slots[n.slot] = std::move(one);
        }
    if (v.slots.empty()) co_return false;
    out.permits = v.permits;
    for (const auto& [slot, kv] : v.slots) {
      auto e = split_entry(kv.value);
      holder_info h{std::move(e.owner), kv.mod, milliseconds(0), std::move(e.value)};
      h.slot = slot;
      h.ttl_remaining = (co_await time_to_live(kv.lease, deadline)).left;
      out.holders.push_back(std::move(h));
    }
    out.holder = out.holders.front();
    co_return true;
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
    if (auto p = permits_.find(k); p != permits_.end() && p->second.contains(token)) {
      // A permit: its slot key alone (the count is in its name; any event on it after the grant ends it).
      const auto n = permit_counts_.contains(k) ? permit_counts_.at(k) : 0;
      if (n < 2) return nullptr;
      k = permit_keys(prefix_, key).slot(n, p->second.at(token));
      held_key h{id, owner, token, std::move(on_lost)};
      h.permit = true;
      held_.emplace(k, std::move(h));
    } else {
      held_.emplace(k, held_key{id, owner, token, std::move(on_lost)});
      // The contender key is named after the guard's etcd lease, which a guard event or one read tells.
      asio::co_spawn(ex_, learn_lease(shared_from_this(), k, id, token), asio::detached);
    }
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
  // Renew's refusal, in its order, for the lock's keys as read; false when `owner` holds it under `token`:
  // the guard was created at `token`, names `owner`, and its etcd lease's contender key is first in line.
  // A guard whose contender key is gone is not held: etcd's tools could take the lock.
  template <class Reply>
  static bool refuse(Reply& out, const ownership& o, const std::string& owner, std::uint64_t token) {
    const bool held = o.held_with(token);
    if (held && split_entry(o.guard.value).owner == owner) return false;
    if (held) {
      out.lost_reason = "owner_mismatch";
    } else if (o.guard.present && o.guard.create == token) {
      out.lost_reason = "not_held";
    } else {
      auto h = holder_of(lock_view{o.first, o.guard});
      out.lost_reason = !h                       ? "not_held"
                        : h->info.owner != owner ? "owner_mismatch"
                        : h->info.token != token ? "token_mismatch"
                                                 : "not_held";
    }
    out.ec = error::lease_lost;
    out.diagnostic = o.guard.present && o.guard.create == token
                         ? "the lock's key in etcd's line no longer carries this lease"
                         : "the lock's guard key no longer carries this lease's token";
    return true;
  }

  template <class Reply>
  static Reply fail(const http_result& r) {
    Reply out;
    out.ec = r.ec;
    out.diagnostic = r.diagnostic;
    return out;
  }
  template <class Reply>
  static Reply aborted() {
    Reply out;
    out.ec = asio::error::operation_aborted;
    out.diagnostic = "the wait was cancelled";
    return out;
  }
  static void protocol(http_result& r, std::string what) {
    r.ec = error::protocol_error;
    r.diagnostic = std::move(what);
  }
  static asio::awaitable<bool> cancelled() {
    co_return (co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none;
  }

  // Free: nobody in line and no guard (the range compare holds for an empty range only). Then the contender
  // key and the guard are put in one txn; else the first in line and the guard are read.
  static json::object try_txn(const lock_keys& lk, std::uint64_t lease, const std::string& owner,
                              const std::string& value) {
    json::object empty_line = same_create(encode64(lk.queue), 0);
    empty_line["range_end"] = encode64(lk.queue_end);
    return json::object{
        {"compare", json::array{std::move(empty_line), same_create(encode64(lk.guard), 0), no_permits(lk)}},
        {"success", json::array{put_key(lk.contender(lease), value, lease),
                                put_key(lk.guard, entry_of(owner, value), lease)}},
        {"failure", json::array{in_line_read(lk, 0, true), key_read(lk.guard), permit_range_read(lk, true)}}};
  }

  // In line (etcd's Mutex.Lock): the contender key, unless it is there already (a retried txn), and the
  // place as it then is (queue_place::read()).
  static json::object enqueue_txn(const lock_keys& lk, std::uint64_t lease, const std::string& value) {
    const std::string mine = lk.contender(lease);
    return json::object{{"compare", json::array{same_create(encode64(mine), 0)}},
                        {"success", json::array{put_key(mine, value, lease), in_line_read(lk, 0, true),
                                                key_read(lk.guard), permit_range_read(lk, true)}},
                        {"failure", json::array{key_read(mine), in_line_read(lk, 0, true), key_read(lk.guard),
                                                permit_range_read(lk, true)}}};
  }

  // A waiter's place: its contender key, the first in line and the guard, at `revision`.
  struct queue_place {
    queue_place(lock_keys k, std::uint64_t l, clock::time_point d)
        : lk(std::move(k)), lease(l), deadline(d) {}
    lock_keys lk;
    std::uint64_t lease;
    clock::time_point deadline;
    stored_kv mine, first, guard;
    std::uint64_t revision = 0;
    std::uint32_t permits = 0;  // a semaphore's count, when the key has semaphore keys (0: none)

    json::array reads() const {
      return json::array{key_read(lk.contender(lease)), in_line_read(lk, 0, true), key_read(lk.guard),
                         permit_range_read(lk, true)};
    }
    // From an answer to enqueue_txn() (`created`: its put was applied) or to reads().
    bool read(http_result& r, bool created) {
      const json::value* responses = path(r.body, {"responses"});
      if (!responses || !responses->is_array() || responses->as_array().size() != 4) {
        protocol(r, "txn answer lacks the lock's keys");
        return false;
      }
      permits = permits_in(response_at(r.body, 3), lk);
      revision = r_revision(r);
      if (created) {
        mine = {};
        mine.present = true;
        mine.key = lk.contender(lease);
        mine.create = revision;
        mine.lease = lease;
      } else {
        mine = response_kv(r.body, 0);
      }
      first = first_in_line_of(response_at(r.body, 1), lk);
      guard = response_kv(r.body, 2);
      return true;
    }
  };

  // The grant of a waiter first in line: the guard, while the waiter's key is still the one it put and no
  // guard exists; else the place as it now is.
  static json::object claim_txn(const queue_place& place, const std::string& owner,
                                const std::string& value) {
    return json::object{
        {"compare", json::array{same_create(encode64(place.mine.key), place.mine.create),
                                same_create(encode64(place.lk.guard), 0), no_permits(place.lk)}},
        {"success", json::array{put_key(place.lk.guard, entry_of(owner, value), place.lease)}},
        {"failure", place.reads()}};
  }

  // Tries once the way etcd's TryLock does (for a range that holds other locks' keys, where try_txn()'s
  // compare cannot tell): in line, then the guard if first, else out of line again. out.token is set when
  // granted; 0 otherwise, with nothing left behind.
  asio::awaitable<http_result> try_in_line(const lock_keys& lk, std::uint64_t lease, const std::string& owner,
                                           const std::string& value, clock::time_point deadline,
                                           acquire_reply& out) {
    queue_place place{lk, lease, deadline};
    const json::object enqueue = enqueue_txn(lk, lease, value);
    auto r = co_await call("/v3/kv/txn", enqueue, deadline);
    if (r.ec || !place.read(r, succeeded(r))) co_return r;
    if (!place.first.resolved) place.first = co_await first_in_line(lk, deadline, r);
    if (r.ec) co_return r;
    if (place.mine.present && place.first.present && place.first.create == place.mine.create &&
        !place.guard.present) {
      const json::object claim = claim_txn(place, owner, value);
      r = co_await call("/v3/kv/txn", claim, deadline);
      if (r.ec) co_return r;
      if (succeeded(r) ? header_revision(r.body, out.token)
                       : place.read(r, false) && place.guard.lease == lease) {
        if (out.token == 0) out.token = place.guard.create;  // a claim applied whose answer was lost
        co_return r;
      }
    }
    json::object drop{{"compare", json::array{same_create(encode64(lk.contender(lease)), place.mine.create)}},
                      {"success", json::array{delete_key(lk.contender(lease))}}};
    co_return co_await call("/v3/kv/txn", drop, deadline);
  }

  // The first in line, read whole (a page held only keys of locks named below this one).
  // The guard and the first in line as a reader sees them (get's read, and a break's): one txn, and a second
  // read of the line when the first could not resolve it. `r` is the last read's answer (its revision is
  // where a watch starts); r.ec says the read failed, and the view is empty then.
  asio::awaitable<lock_view> read_view(const lock_keys& lk, clock::time_point deadline, http_result& r) {
    const json::object body7 = read_txn(view_reads(lk));
    r = co_await call("/v3/kv/txn", body7, deadline);
    if (r.ec) co_return lock_view{};
    lock_view v{first_in_line_of(response_at(r.body, 0), lk), response_kv(r.body, 1)};
    if (!v.first.resolved) v.first = co_await first_in_line(lk, deadline, r);
    co_return r.ec ? lock_view{} : v;
  }

  asio::awaitable<stored_kv> first_in_line(const lock_keys& lk, clock::time_point deadline, http_result& r) {
    const json::object body9 = read_txn(in_line_read(lk, 0, false));
    r = co_await call("/v3/kv/txn", body9, deadline);
    co_return r.ec ? stored_kv{} : first_in_line_of(response_at(r.body, 0), lk);
  }

  // The contender just before the one created at `rev` (absent: none); `r` holds the answer.
  asio::awaitable<stored_kv> in_line_before(const lock_keys& lk, std::uint64_t rev,
                                            clock::time_point deadline, http_result& r) {
    const json::object body10 = read_txn(in_line_read(lk, rev, true));
    r = co_await call("/v3/kv/txn", body10, deadline);
    if (r.ec) co_return stored_kv{};
    auto out = first_in_line_of(response_at(r.body, 0), lk);
    if (out.resolved) co_return out;
    const json::object body11 = read_txn(in_line_read(lk, rev, false));
    r = co_await call("/v3/kv/txn", body11, deadline);
    co_return r.ec ? stored_kv{} : first_in_line_of(response_at(r.body, 0), lk);
  }

  // /v3/lease/grant of `ttl_s` seconds into `lease`.
  asio::awaitable<http_result> grant(std::int64_t ttl_s, clock::time_point deadline, std::uint64_t& lease) {
    json::object body{{"TTL", std::to_string(ttl_s)}};
    auto g = co_await call("/v3/lease/grant", body, deadline);
    lease = 0;
    if (!g.ec && (!uint_field(g.body, "ID", lease) || lease == 0))
      protocol(g, "lease grant answer has no ID");
    co_return g;
  }

  // One keep-alive: the seconds etcd now gives the lease, 0 when it has no such lease, -1 without an answer.
  asio::awaitable<std::int64_t> keep_alive(std::uint64_t lease, clock::time_point deadline) {
    json::object body{{"ID", std::to_string(lease)}};
    auto ka = co_await call("/v3/lease/keepalive", body, deadline);
    if (ka.ec) co_return -1;
    std::uint64_t left = 0;
    const json::value* result = path(ka.body, {"result"});
    if (!result || !uint_field(*result, "TTL", left)) co_return 0;
    co_return static_cast<std::int64_t>(std::min<std::uint64_t>(left, INT64_MAX));
  }

  // A waiter's etcd lease handed back as it leaves: its contender key, and a guard put as it left, go with
  // it in one step. Tried a few times within the request timeout; if etcd cannot be reached, the lease ends
  // at its TTL, and a grant nobody was told of lasts at most that long.
  asio::awaitable<void> leave_queue(std::shared_ptr<etcd_backend> /*kept alive*/, std::uint64_t lease) {
    const auto deadline = clock::now() + watch_open_timeout_;
    for (int attempt = 0; attempt < 3 && clock::now() < deadline; ++attempt) {
      json::object body{{"ID", std::to_string(lease)}};
      auto r = co_await call("/v3/lease/revoke", body, deadline);
      // Revoked, or already gone (etcd answers "requested lease not found").
      if (!r.ec || r.status == 404 || r.diagnostic.find("not found") != std::string::npos) co_return;
    }
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

  // A waiter's step: watch() and, when the watch could not be set up or broke, a pause of at most 100 ms
  // (bounded by `until`) before the caller reads again, so a change is seen within 100 ms by polling.
  asio::awaitable<watch_end> watch_or_pause(const std::string& k, std::uint64_t from, clock::time_point until,
                                            const std::string& range_end = {}) {
    const auto w = co_await watch(k, from, until, range_end);
    if (w == watch_end::failed) {
      asio::steady_timer t(ex_,
                           std::min<clock::duration>(std::chrono::milliseconds(100),
                                                     std::max(until - clock::now(), clock::duration(0))));
      co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    co_return w;
  }

  // One watch on `k` from revision `from` on the current member, for a waiter: ends at the first event, at
  // `until`, or when the stream fails (the caller then polls).
  asio::awaitable<watch_end> watch(const std::string& k, std::uint64_t from, clock::time_point until,
                                   const std::string& range_end = {}) {
    using namespace asio::experimental::awaitable_operators;
    constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
    watch_stream w(ex_);
    auto work = [&]() -> asio::awaitable<watch_end> {
      json::object request{{"key", k}, {"start_revision", std::to_string(from)}};
      if (!range_end.empty()) request["range_end"] = range_end;
      json::object create{{"create_request", std::move(request)}};
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
    std::uint64_t lease = 0;  // the guard's etcd lease, once known: it names the contender key
    bool permit = false;      // a semaphore's slot key: any event on it after the grant ends the permit
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

  // Reads the guard of the watched lease `id` and notes its etcd lease, if it is still the one created at
  // `token`. Until then (or if the read fails) the watch sees the guard alone; the next renew sees the rest.
  asio::awaitable<void> learn_lease(std::shared_ptr<etcd_backend>, std::string k, std::uint64_t id,
                                    std::uint64_t token) {
    json::object read{{"key", encode64(k)}};
    auto r = co_await call("/v3/kv/range", read, clock::now() + watch_open_timeout_);
    if (r.ec) co_return;
    const stored_kv g = read_kv(first_kv(r.body, false));
    if (!g.present || g.create != token) co_return;
    auto [first, last] = held_.equal_range(k);
    for (auto it = first; it != last; ++it)
      if (it->second.id == id && it->second.lease == 0) it->second.lease = g.lease;
  }

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
                                                        {"progress_notify", true},
                                                        {"prev_kv", true}}}};
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

  // Declares lost every watched lease whose keys one of `events` changed after its grant: its guard deleted
  // or written by another owner or without its lease, or its contender key deleted or written without its
  // lease. The stream sends each event's previous key-value (prev_kv), which says whose a deleted or
  // replaced key was: the guard created at the token is this lease's, exactly.
  void on_watch_events(const json::array& events) {
    std::vector<std::pair<std::function<void(std::string_view)>, std::string>> lost;
    for (const auto& ev : events) {
      const stored_kv now = read_kv(path(ev, {"kv"}));
      const stored_kv before = read_kv(path(ev, {"prev_kv"}));
      if (!now.present) continue;
      next_rev_ = std::max(next_rev_, now.mod + 1);
      const bool deleted = string_field(ev, "type") == "DELETE";  // PUT, etcd's 0, is left out of the JSON
      const std::string at = " at etcd revision " + std::to_string(now.mod) + " (seen by the key watch)";
      // A contender key P+K/<lease> of a watched lock P+K.
      if (const auto slash = now.key.rfind('/'); slash != std::string::npos) {
        auto [first, last] = held_.equal_range(now.key.substr(0, slash));
        for (auto it = first; it != last;) {
          const held_key& h = it->second;
          const bool mine =
              h.lease != 0 && now.key.compare(slash + 1, std::string::npos, lock_keys::hex(h.lease)) == 0;
          if (!mine || now.mod <= h.token || (!deleted && now.lease == h.lease)) {
            ++it;  // another contender, history from before the grant, or a proclaim
            continue;
          }
          lost.emplace_back(std::move(it->second.on_lost),
                            deleted ? "not_held: the lock's key in etcd's line was deleted" + at
                                    : "owner_mismatch: the lock's key in etcd's line was written over" + at);
          it = held_.erase(it);
        }
      }
      // The guard P+K, or a permit's slot key.
      auto [first, last] = held_.equal_range(now.key);
      for (auto it = first; it != last;) {
        held_key& h = it->second;
        if (h.permit) {
          if (now.mod <= h.token) {
            ++it;  // history from before the grant, or the grant itself
            continue;
          }
          lost.emplace_back(std::move(it->second.on_lost),
                            deleted ? "not_held: the permit's slot key was deleted" + at
                                    : "owner_mismatch: the permit's slot key was written over" + at);
          it = held_.erase(it);
          continue;
        }
        const bool was_ours = before.present && before.create == h.token;
        if (h.lease == 0) {
          if (was_ours) h.lease = before.lease;
          if (!deleted && now.create == h.token) h.lease = now.lease;
        }
        const bool still_ours = !deleted && now.create == h.token && now.lease == before.lease &&
                                split_entry(now.value).owner == h.owner;
        if (now.mod <= h.token || !was_ours || still_ours) {
          ++it;  // history, another holder's guard, or a proclaim
          continue;
        }
        lost.emplace_back(std::move(it->second.on_lost),
                          deleted ? "not_held: the key was deleted" + at
                          : split_entry(now.value).owner != h.owner
                              ? "owner_mismatch: another owner wrote the key" + at
                              : "owner_mismatch: the key was written over, not by this lease," + at);
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
  // The permits this backend granted, by etcd key of their semaphore (P+K): token -> slot. Renew, release and
  // the loss watch go to a permit's own keys without reading the lock's first; a permit of another process
  // (the CLI's renew) is found after the lock's reads find no lock.
  std::unordered_map<std::string, std::map<std::uint64_t, std::uint32_t>> permits_;
  std::unordered_map<std::string, std::uint32_t> permit_counts_;  // P+K -> the count of its permits granted
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
