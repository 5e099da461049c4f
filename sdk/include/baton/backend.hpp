// SPDX-License-Identifier: Apache-2.0
#pragma once
// The wire protocol behind an interface: the lease code speaks to a backend, and a backend speaks to a lock
// server. The HTTP backend speaks docs/protocol.md; others (etcd, TLS) drop in without touching lease code.

#include "baton/config.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace baton {

/// Who holds a lock, as the server reported it.
struct holder_info {
  std::string owner;
  std::uint64_t token = 0;
  milliseconds ttl_remaining{0};
  /// The value published with the lease (docs/protocol.md, "value"); empty when none, or when the server
  /// predates values.
  std::string value{};
  /// Non-zero: no lease holds the key, but it is in lock-delay for this much longer after the lease `token`
  /// ended by expiry or a break (docs/protocol.md, "Lock-delay"); owner and value are empty.
  milliseconds lock_delay_remaining{0};
  /// The permit's slot on a key of several permits (docs/protocol.md, "Semaphores"); 0 for a lock.
  std::uint32_t slot = 0;
};

/// One acquire (docs/protocol.md, "acquire", "queued acquire", "Lock-delay", "Semaphores"): what
/// backend::acquire_with() sends. Plain data; the strings are the request's own.
struct acquire_request {
  std::string key;
  std::string owner;
  milliseconds ttl{0};
  /// Published with the lease; empty: none.
  std::string value{};
  /// Non-zero: the lease's lock-delay.
  milliseconds lock_delay{0};
  /// Set: a queued acquire that may wait this long at the server.
  std::optional<milliseconds> wait{};
  /// The key's permit count: 1 is a lock (nothing more is sent); more is a semaphore of that many permits.
  std::uint32_t permits = 1;
  /// Bound on the whole call (it should cover `wait`).
  milliseconds timeout{0};
};

/// ec: empty on success; error::held when refused (holder filled in); transport and server errors otherwise.
struct acquire_reply {
  boost::system::error_code ec;
  std::string diagnostic;
  std::uint64_t token = 0;
  holder_info holder;
  /// A queued acquire's grant (backend::acquire_queued): how long the request waited at the server before
  /// it was granted. The lease's TTL runs from the grant, so the client counts it from its send time plus
  /// this. 0 for any other grant.
  milliseconds queued{0};
  /// A grant's slot (0 for a lock).
  std::uint32_t slot = 0;
  /// The key's permit count: in a grant, and with error::held or error::permits_mismatch (the count in use);
  /// 1 for a lock, or when the server did not say.
  std::uint32_t permits = 1;
  /// error::held on a key of several permits: every live permit, in slot order (`holder` is the one that
  /// expires first). Empty for a lock.
  std::vector<holder_info> holders{};
};

/// ec: empty on success; error::lease_lost when the server refused (lost_reason says why).
struct renew_reply {
  boost::system::error_code ec;
  std::string diagnostic;
  std::string lost_reason;
};

/// What proclaim() answers: a renew's reply (ec empty: the value was replaced; error::lease_lost: refused,
/// lost_reason says why; any other error as for a renew).
using proclaim_reply = renew_reply;

/// A lock's record (docs/protocol.md, "record"): a value the server keeps for a key beyond any lease, which
/// only the key's live holder replaces.
struct lock_record {
  std::string value;
  /// The token and owner of the write that set it.
  std::uint64_t token = 0;
  /// Writes of the record so far (1 after the first; a retried write counts again).
  std::uint64_t version = 0;
  std::string owner;
};

/// What write_record() answers. ec empty: the record was replaced, `version` is its version now;
/// error::lease_lost: refused by the lease (lost_reason as a renew's); error::stale_token: the record was
/// written with a larger token; anything else as for a renew, the outcome then unknown.
struct record_write_reply {
  boost::system::error_code ec;
  std::string diagnostic;
  std::string lost_reason;
  std::uint64_t version = 0;
};

/// What read_record() answers. ec empty when the server answered; `record` empty when the key has none.
struct record_read_reply {
  boost::system::error_code ec;
  std::string diagnostic;
  std::optional<lock_record> record;
};

/// One lease of a batch renewal: renew `key` if `owner` holds it with `token`, for `ttl` from now.
struct renew_entry {
  std::string key;
  std::string owner;
  std::uint64_t token = 0;
  milliseconds ttl{0};
};

enum class release_outcome {
  released,      // this owner+token held the lock; it is free now
  already_free,  // nobody held it any more (expired or released before): a retried release lands here too
  not_owner,     // another owner or a newer token holds it; nothing changed
};

/// "released", "already_free" or "not_owner" (the protocol's own spelling of the outcome); operator<< writes
/// the same.
std::string_view to_string(release_outcome o) noexcept;
std::ostream& operator<<(std::ostream& os, release_outcome o);

/// ec: empty when the server answered (outcome says what happened, not_owner included); errors otherwise.
struct release_reply {
  boost::system::error_code ec;
  std::string diagnostic;
  release_outcome outcome = release_outcome::released;
};

/// ec: empty when the server answered; holder empty when the lock is free. On a key of several permits,
/// `holder` is the lowest held slot, `permits` the key's count and `holders` every live permit in slot order.
struct get_reply {
  boost::system::error_code ec;
  std::string diagnostic;
  std::optional<holder_info> holder;
  std::uint32_t permits = 1;
  std::vector<holder_info> holders{};
};

/// What client::reload_tls() did.
struct tls_reload_result {
  /// Empty: new connections use the files just read. error::invalid_config: nothing changed, and
  /// `diagnostic` names the setting, the file and why (`tls.key_file "/etc/baton/client.key": does not belong
  /// to the certificate in "/etc/baton/client.pem"`), or says that the client does not use TLS.
  boost::system::error_code ec;
  std::string diagnostic;
  /// The client certificate new connections present from now on (after a failure: the one they still
  /// present); empty without one. `subject` in RFC 2253 form ("CN=worker-7"), `not_after` as
  /// "2026-12-03T20:30:00Z", `sha256` as `openssl x509 -noout -fingerprint -sha256` prints it ("AB:01:...").
  std::string subject;
  std::string not_after;
  std::string sha256;
};

/// One held lock of a listing (docs/protocol.md, "list").
struct listed_lock {
  std::string key;
  /// "lock"; "lock_delay" for a key that no lease holds but that is in lock-delay (holder.owner empty,
  /// holder.token the lease it follows, holder.lock_delay_remaining and ttl_remaining its remaining time);
  /// "permit" for one live permit of a key of several (holder.slot its slot, `permits` the key's count; a
  /// key's permits are listed in slot order). Other kinds may come from later servers: a caller skips kinds
  /// it does not know.
  std::string kind;
  /// Owner, token, TTL left by the server's clock at the listing, and value.
  holder_info holder;
  /// The authenticated client that holds it (empty without authentication, or on etcd).
  std::string client;
  /// Queued acquires waiting for the key (0 where the backend does not know).
  std::uint64_t waiters = 0;
  /// The key's permit count (kind "permit"); 1 otherwise.
  std::uint32_t permits = 1;
};

/// One page of a listing: locks in key order, and the cursor of the next page (`after`), empty after the
/// last.
struct lock_page {
  std::vector<listed_lock> locks;
  std::string next;
};

/// What list() answers: ec empty, `page` filled; invalid_config when the backend or server cannot list.
struct list_reply {
  boost::system::error_code ec;
  std::string diagnostic;
  lock_page page;
};

/// What break_lease() answers. ec empty: the lease described by `holder` was ended. error::not_held: no
/// lease held the key. error::token_mismatch: another token holds it (`holder` names it); nothing changed.
/// invalid_config when the backend or server cannot break; anything else: the outcome is unknown.
struct break_reply {
  boost::system::error_code ec;
  std::string diagnostic;
  holder_info holder;
  std::string client;
};

/// A long-poll: answer once the holder's token differs from `token` (0 = free), or, when `value` is set,
/// the holder's value differs from it ("" when free: a proclaim is a change), or after `wait`. A value is
/// waited on only by backends that support proclaim (the HTTP backend sends it, as `value=`, only to a
/// server that advertises the feature; otherwise it waits for a change of token alone).
struct wait_for_change {
  std::uint64_t token = 0;
  milliseconds wait{30'000};
  std::optional<std::string> value{};
};

/// A lease watched for loss (backend::watch_loss()): destroying it ends the watch, and its callback is not
/// called after that. Destroy it on the backend's executor.
class loss_watch {
 public:
  virtual ~loss_watch() = default;
};

/// One lock server connection (pool). Each call is one request, bounded by `timeout`, without retries: the
/// caller decides what to retry. Timeouts report error::request_timeout. Every call supports terminal
/// cancellation (the request is abandoned and its connection closed). Calls must be made from the
/// executor the backend was created with; a backend is not thread-safe.
class backend {
 public:
  virtual ~backend() = default;

  /// Acquires as `owner`, publishing `value` with the lease (empty: none; a same-owner re-acquire replaces
  /// it). A backend that cannot keep values refuses a non-empty one with error::invalid_config.
  virtual boost::asio::awaitable<acquire_reply> acquire(std::string key, std::string owner, milliseconds ttl,
                                                        std::string value, milliseconds timeout) = 0;
  virtual boost::asio::awaitable<renew_reply> renew(std::string key, std::string owner, std::uint64_t token,
                                                    milliseconds ttl, milliseconds timeout) = 0;
  virtual boost::asio::awaitable<release_reply> release(std::string key, std::string owner,
                                                        std::uint64_t token, milliseconds timeout) = 0;
  /// A queued acquire (docs/protocol.md, "queued acquire"): waits at the server, in the key's queue, first
  /// come first served, up to `wait`, and answers as acquire() does: a grant (with `queued`), or error::held
  /// naming the holder once `wait` passed. `timeout` should cover `wait`. Cancellation (terminal) closes the
  /// request's connection, which gives its place up at the server (and a grant it was not yet told of); its
  /// outcome is then unknown, as for any acquire without an answer. A backend may answer `held` before
  /// `wait` passed when it bounds one request's wait (the HTTP backend asks batond for at most 30 s): the
  /// caller queues again. The etcd backend queues as etcd's own Mutex does (its keys, docs/sdk.md), keeping
  /// the place's etcd lease alive while it waits; leaving revokes that lease. error::invalid_config, with
  /// nothing sent, when the backend or the server does not queue: the default, and the HTTP backend when the
  /// server does not advertise feature `acquire_queue` (the client then waits with the long-poll).
  virtual boost::asio::awaitable<acquire_reply> acquire_queued(std::string key, std::string owner,
                                                               milliseconds ttl, std::string value,
                                                               milliseconds wait, milliseconds timeout);
  /// acquire(), and with `wait` acquire_queued(), for a lease with a lock-delay (docs/protocol.md,
  /// "Lock-delay"; lease_options::lock_delay): once the lease ends by expiry or a break the key stays
  /// unavailable for `lock_delay`. The client calls these only for a non-zero delay, so a backend (or a
  /// wrapper) that knows nothing of lock-delay keeps its acquire() and acquire_queued() for every other
  /// lease. The default refuses with error::invalid_config, nothing sent (the etcd backend keeps it); the
  /// memory backend keeps lock-delay as batond does; the HTTP backend sends `lock_delay_ms` to a server that
  /// advertises feature `lock_delay` and refuses so otherwise (an older batond would ignore the field and
  /// grant a lease without the delay). Errors, cancellation and threads as for acquire().
  virtual boost::asio::awaitable<acquire_reply> acquire_with_delay(std::string key, std::string owner,
                                                                   milliseconds ttl, std::string value,
                                                                   milliseconds lock_delay,
                                                                   std::optional<milliseconds> wait,
                                                                   milliseconds timeout);
  /// Any acquire, in one call: plain, queued (`wait`), with a lock-delay, of a semaphore's permit (`permits`
  /// above 1; docs/protocol.md, "Semaphores"). The client sends every acquire through it. A grant carries its
  /// slot and the key's permit count; error::held carries every holder of a semaphore key;
  /// error::permits_mismatch (the reply's `permits` the count in use) refuses a count other than the one
  /// the key's holders and waiters use, changing nothing. The default keeps a backend written before this
  /// call working: a request of 1 permit goes to acquire_with_delay() (a lock-delay), acquire_queued()
  /// (`wait`) or acquire(); more permits are refused with error::invalid_config, nothing sent. The HTTP
  /// backend sends `permits` only when above 1, and then only to a server that advertises feature
  /// `semaphores`; the etcd and memory backends keep semaphores of their own. Errors, cancellation and
  /// threads as for acquire().
  virtual boost::asio::awaitable<acquire_reply> acquire_with(acquire_request request);
  /// Renews many leases: one answer per entry, in order, each what renew() of that entry would answer (ec
  /// empty: renewed; error::lease_lost: refused, with lost_reason; any other error: outcome unknown, as for
  /// a renew whose answer was lost). `timeout` bounds the whole call; entries not sent in time get
  /// error::request_timeout. Cancellation (terminal) abandons the entries not yet answered; like any renew,
  /// an abandoned one may or may not have taken effect. The default implementation renews the entries one by
  /// one with renew(); the HTTP backend sends `POST /v1/renew` when the server advertises `renew_batch`, and
  /// the etcd backend reads the keys in one txn before each lease's keep-alive (docs/protocol.md, "renew
  /// batch"). The entries are read, not taken: they must stay valid and unchanged until the call completes
  /// (a caller that renews the same leases again reuses them, and their strings' memory).
  virtual boost::asio::awaitable<std::vector<renew_reply>> renew_batch(std::span<const renew_entry> entries,
                                                                       milliseconds timeout);
  /// Replaces the value published with the lease `owner` holds on `key` with `token` (docs/protocol.md,
  /// "proclaim"), keeping its token and its expiry: a leader publishes a new address without a new token.
  /// Conditional exactly as renew(): ec empty, the value is replaced; error::lease_lost when the lease is not
  /// held by that owner with that token (lost_reason as a renew's: `not_held`, `owner_mismatch`,
  /// `token_mismatch`), and nothing changed; transport and server errors as for renew(), the outcome then
  /// unknown (a proclaim is idempotent: send it again while the lease lasts). error::invalid_config, with
  /// nothing sent, when the backend or the server cannot do it: the default (a backend of the other calls
  /// only), and the HTTP backend when the server does not advertise feature `proclaim`. Never a same-owner
  /// re-acquire instead, which would change the token.
  virtual boost::asio::awaitable<proclaim_reply> proclaim(std::string key, std::string owner,
                                                          std::uint64_t token, std::string value,
                                                          milliseconds timeout);
  /// Replaces the lock's record of `key` (docs/protocol.md, "record") if `owner` holds `key` with `token` now
  /// (renew's condition; the lease itself is not renewed or changed) and no write with a larger token set
  /// it. Durable before it answers. A retry is harmless: it sets the same value (and counts a version).
  /// error::invalid_config, with nothing sent, when the backend or the server cannot: the default, and the
  /// HTTP backend when the server does not advertise feature `lock_record` or the value is over its
  /// `record_max_bytes`.
  virtual boost::asio::awaitable<record_write_reply> write_record(std::string key, std::string owner,
                                                                  std::uint64_t token, std::string value,
                                                                  milliseconds timeout);
  /// Reads the lock's record of `key`; error::invalid_config as write_record().
  virtual boost::asio::awaitable<record_read_reply> read_record(std::string key, milliseconds timeout);
  /// A page of the held locks whose key starts with `prefix`, after the key `after` (empty: from the first),
  /// at most `limit` (docs/protocol.md, "list"). error::invalid_config, with nothing sent, when the backend
  /// or the server cannot: the default, and the HTTP backend when the server does not advertise `list_locks`.
  virtual boost::asio::awaitable<list_reply> list(std::string prefix, std::string after, std::size_t limit,
                                                  milliseconds timeout);
  /// An operator's break of the lease on `key` (docs/protocol.md, "break"); with `token`, only the lease
  /// with that token. Not retried by the caller: without `token` a retry could break the next holder.
  /// error::invalid_config, with nothing sent, when the backend or server cannot: the default, and the HTTP
  /// backend when the server does not advertise `break_lease`.
  virtual boost::asio::awaitable<break_reply> break_lease(std::string key, std::optional<std::uint64_t> token,
                                                          milliseconds timeout);
  /// Reads the holder; with `wait`, long-polls (the timeout should cover the wait).
  virtual boost::asio::awaitable<get_reply> get(std::string key, std::optional<wait_for_change> wait,
                                                milliseconds timeout) = 0;
  /// Asks to be told as soon as the server shows that `owner` no longer holds `key` under `token` through a
  /// change this client did not make (the key deleted, written over, or created anew), instead of at the next
  /// renew. `on_lost(reason)` is called at most once, on the backend's executor, with a renew's lost_reason
  /// first (`not_held`, `owner_mismatch`, `token_mismatch`), then what was seen. The lease code watches each
  /// lease while it is active and ends the watch before it releases the lease. Returns null when the backend
  /// does not watch: the default, and the HTTP backend (batond ends a lease only at its TTL or by a request
  /// naming its owner and token); the next renew then finds a loss, as it always does. The etcd backend
  /// watches every lease of a client through one watch stream (over etcds://, a TLS one).
  virtual std::unique_ptr<loss_watch> watch_loss(const std::string& key, const std::string& owner,
                                                 std::uint64_t token,
                                                 std::function<void(std::string_view reason)> on_lost);
  /// Closes idle connections (and the etcd backend's loss watch, which opens again while leases are watched).
  /// Requests in flight finish normally.
  virtual void close() = 0;
  /// Reads `tls` (nullopt: the files in use, again) into a complete new TLS context; on success the
  /// connections made from then on use it (client::reload_tls()). Thread-safe; must not throw. The default,
  /// for a backend without TLS files: error::invalid_config, saying so. The SDK's https:// and etcds://
  /// backends read the files again.
  virtual tls_reload_result reload_tls(std::optional<tls_config> tls);
};

/// A backend that wraps another, to observe or route its requests: every virtual of backend (batch renewal,
/// the loss watch and TLS reload included) forwards to `inner()` unchanged. Derive from it and override only
/// what the wrapper changes, so that a member added to backend is forwarded too instead of falling back to
/// its default (a wrapper that forgot renew_batch renewed every lease one by one).
class forwarding_backend : public backend {
 public:
  explicit forwarding_backend(std::shared_ptr<backend> inner) : inner_(std::move(inner)) {}

  boost::asio::awaitable<acquire_reply> acquire(std::string key, std::string owner, milliseconds ttl,
                                                std::string value, milliseconds timeout) override;
  boost::asio::awaitable<renew_reply> renew(std::string key, std::string owner, std::uint64_t token,
                                            milliseconds ttl, milliseconds timeout) override;
  boost::asio::awaitable<release_reply> release(std::string key, std::string owner, std::uint64_t token,
                                                milliseconds timeout) override;
  boost::asio::awaitable<acquire_reply> acquire_queued(std::string key, std::string owner, milliseconds ttl,
                                                       std::string value, milliseconds wait,
                                                       milliseconds timeout) override;
  boost::asio::awaitable<acquire_reply> acquire_with_delay(std::string key, std::string owner,
                                                           milliseconds ttl, std::string value,
                                                           milliseconds lock_delay,
                                                           std::optional<milliseconds> wait,
                                                           milliseconds timeout) override;
  /// A request of 1 permit goes through this wrapper's own acquire(), acquire_queued() or
  /// acquire_with_delay() (so a wrapper that overrides those sees every lock's acquire); one of more permits
  /// is forwarded to `inner()->acquire_with()`.
  boost::asio::awaitable<acquire_reply> acquire_with(acquire_request request) override;
  boost::asio::awaitable<std::vector<renew_reply>> renew_batch(std::span<const renew_entry> entries,
                                                               milliseconds timeout) override;
  boost::asio::awaitable<proclaim_reply> proclaim(std::string key, std::string owner, std::uint64_t token,
                                                  std::string value, milliseconds timeout) override;
  boost::asio::awaitable<record_write_reply> write_record(std::string key, std::string owner,
                                                          std::uint64_t token, std::string value,
                                                          milliseconds timeout) override;
  boost::asio::awaitable<record_read_reply> read_record(std::string key, milliseconds timeout) override;
  boost::asio::awaitable<list_reply> list(std::string prefix, std::string after, std::size_t limit,
                                          milliseconds timeout) override;
  boost::asio::awaitable<break_reply> break_lease(std::string key, std::optional<std::uint64_t> token,
                                                  milliseconds timeout) override;
  boost::asio::awaitable<get_reply> get(std::string key, std::optional<wait_for_change> wait,
                                        milliseconds timeout) override;
  std::unique_ptr<loss_watch> watch_loss(const std::string& key, const std::string& owner,
                                         std::uint64_t token,
                                         std::function<void(std::string_view reason)> on_lost) override;
  void close() override;
  tls_reload_result reload_tls(std::optional<tls_config> tls) override;

  const std::shared_ptr<backend>& inner() const noexcept { return inner_; }

 private:
  std::shared_ptr<backend> inner_;
};

/// The backend for `config.server_url` (http:// speaks docs/protocol.md). Throws baton::exception with
/// error::invalid_config for an unsupported or malformed URL.
std::shared_ptr<backend> make_backend(const boost::asio::any_io_executor& ex, const client_config& config);

}  // namespace baton
