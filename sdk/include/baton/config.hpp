// SPDX-License-Identifier: Apache-2.0
#pragma once
// Configuration of a Baton client and of the leases it takes. Plain aggregates with documented defaults,
// validated once (validate()) with a clear error.

#include "baton/bounded_string.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace baton {

using std::chrono::milliseconds;

/// How transport errors and timeouts are retried. Every protocol request is safe to retry.
struct retry_policy {
  /// First backoff after a failure; doubles after each further failure, up to max_backoff.
  milliseconds initial_backoff{50};
  milliseconds max_backoff{2'000};
  /// Each backoff is drawn uniformly from [backoff * (1 - jitter), backoff], so clients that failed together
  /// do not retry together.
  double jitter = 0.5;
  /// Attempts of one request before its error is reported (acquire's one try, release, get). Renewal is
  /// bounded by the lease's local deadline instead.
  int max_attempts = 4;
};

/// What happened to a lease, for metrics and logs (client_config::on_event).
struct lease_event {
  /// acquire_retry: an acquire try or its long-poll failed without an answer and will be retried.
  /// acquire_abandoned: a cancelled (or shut down) acquire's request was granted, or may have been, after its
  /// caller gave up; the grant was released (token: the one released, 0 if none was found).
  /// server_warning: the lock server has a known defect that can cost a holder its lock (an etcd that revokes
  /// live leases: client_config::etcd_lease_revocation_bug); `reason` says which and what to do, `key` is
  /// empty and `token` 0. Once per server member and client.
  enum class kind {
    acquired,
    acquire_refused,
    acquire_retry,
    acquire_abandoned,
    renewed,
    renew_retry,
    lost,
    released,
    server_warning
  };
  kind what;
  std::string_view key;
  std::uint64_t token = 0;
  /// renewed: request round trip; acquired: round trip of the successful try.
  std::chrono::microseconds latency{0};
  /// acquire_retry, acquire_abandoned, renew_retry, lost: why.
  std::string_view reason;
};

/// The kind's name ("acquire_retry"), for logs and metrics labels; operator<< writes the same.
std::string_view to_string(lease_event::kind k) noexcept;
std::ostream& operator<<(std::ostream& os, lease_event::kind k);

/// TLS settings for `https://` and `etcds://` servers. The server's certificate is always verified: against
/// `ca_file` when given, else the system's CA store; and it must name the host of the URL (DNS name or IP
/// address). Files are read when the client is created, and again by client::reload_tls().
struct tls_config {
  /// PEM bundle of the CAs to trust instead of the system store. Empty: the system store.
  std::string ca_file{};
  /// Client certificate chain (PEM) for servers that require mutual TLS; needs key_file. Empty: none.
  std::string cert_file{};
  /// Private key (PEM) of cert_file.
  std::string key_file{};

  bool empty() const { return ca_file.empty() && cert_file.empty() && key_file.empty(); }
};

/// What an etcd:// or etcds:// client does with a member whose etcd can revoke live leases
/// (client_config::etcd_lease_revocation_bug).
enum class etcd_bug_policy {
  /// Go on, and say so once per member: a lease_event of kind server_warning to on_event (each client's
  /// handler hears it once per member), or, when no on_event is set, one line on stderr (`baton: warning:
  /// ...`) once per member in the whole process, however many clients talk to it.
  warn,
  /// Refuse the member, as one older than etcd 3.4: every request that reaches it fails with
  /// error::invalid_config, naming the member and its version.
  refuse,
};

struct client_config {
  /// The lock server: `http://host:port` or `https://host:port`; for etcd, `etcd://host:port[,host:port...]`
  /// or, over TLS, `etcds://...` (docs/sdk.md).
  std::string server_url = "http://127.0.0.1:7070";
  /// Certificates for https:// and etcds:// (setting them with a plain URL is an error).
  tls_config tls{};
  /// Bound on one request's round trip (connect included). Long-polls get this on top of their wait.
  milliseconds request_timeout{2'000};
  retry_policy retry{};
  /// Prefix of every owner string this client uses; each acquisition appends `#<random>`.
  /// Default (empty): `<hostname>:<pid>`.
  std::string identity{};
  /// Renewals of this client's leases that fall due within this window of each other are sent together, in
  /// one request to a server that renews batches (docs/sdk.md, "Batch renewal"); a renewal waits at most this
  /// long for others to join. Unset (the default): each lease's renew period / 1,000, at least 2 ms and at
  /// most request_timeout / 4 (20 ms for a 60 s TTL renewed every 20 s). 0: every lease renews on its own.
  /// When set, at most request_timeout / 4.
  std::optional<milliseconds> renew_batch_window{};
  /// Idle keep-alive connections kept open to the server.
  std::size_t max_idle_connections = 16;
  /// Connections open at once (per server member); further requests wait for a free one within their
  /// timeout. Bounds descriptors during an outage, when every retry would otherwise open a new connection.
  std::size_t max_connections = 64;
  /// Bearer token sent as `Authorization: Bearer <token>` with every request to batond (docs/security.md);
  /// empty: none. A secret: the SDK never logs it or puts it in an error message. Not used by the etcd
  /// backend, which takes etcd's own credentials from the URL.
  std::string bearer_token{};
  /// etcd:// and etcds:// only: a file holding the password of the URL's user (`etcd://user@host:2379`), so
  /// the password need not stand in the URL. Read when the client is created; one trailing newline (`\n` or
  /// `\r\n`) is stripped, everything else is the password. Empty (default): the password is the URL's
  /// (`etcd://user:password@...`, percent-decoded: `p%40ss` is `p@ss`). Setting it with a batond URL, with a
  /// URL without a user, or with a URL that also holds a password is error::invalid_config, as is a file
  /// that cannot be read or is empty.
  std::string etcd_password_file{};
  /// etcd:// and etcds:// only (other backends ignore it): what to do with a member running an etcd whose
  /// leader can revoke live leases after its disk stalls for longer than a TTL (etcd 3.4 before 3.4.31 and
  /// 3.5 before 3.5.13, etcd issues 12528 and 15247; Debian 12 ships 3.4.23). The first request to each
  /// member reads its version (GET /version). Default warn: refusing would stop every client of Debian 12's
  /// etcd, and with either setting the SDK watches its keys (over TLS too), so such a revocation is a loss
  /// within milliseconds (docs/sdk.md, etcd). refuse: no lease from such a member. Read when the client is
  /// made. `baton --etcd-lease-revocation-bug` and baton-agent's `etcd_lease_revocation_bug` set it.
  etcd_bug_policy etcd_lease_revocation_bug = etcd_bug_policy::warn;
  /// Called on the client's executor for every lease event; must not block. Optional.
  std::function<void(const lease_event&)> on_event{};

  /// Throws baton::exception(error::invalid_config) naming the bad field.
  void validate() const;
};

struct lease_options {
  /// The lease's time to live on the server.
  milliseconds ttl{10'000};
  /// Renew period; 0 means ttl / 3.
  milliseconds renew_every{0};
  /// Each renew period is drawn uniformly from renew_every * [1 - jitter, 1 + jitter].
  double jitter = 0.2;
  /// The owner string to acquire as. Empty (default): `<identity>#<random>`, new for each acquisition. Give
  /// one to take a lease as a known owner (the CLI's --owner): acquiring again with the same owner supersedes
  /// that owner's earlier lease with a newer token.
  bounded_string<256> owner{};
  /// Published with the lease for anyone who reads the lock (docs/protocol.md, "value"): a leader's address,
  /// say. At most 1024 bytes, no control characters; empty (default): none. Needs a server that keeps values
  /// (batond, etcd); another backend refuses a non-empty one with error::invalid_config.
  bounded_string<1024> value{};
  /// The local deadline is (time the acquire/renew was sent) + ttl - safety_margin. It covers clock-rate
  /// drift between client and server and the time guarded work needs to stop. 0 means ttl / 10 (at least 1
  /// ms).
  milliseconds safety_margin{0};
  /// Lock-delay (docs/protocol.md, "Lock-delay"): when this lease ends by expiry or an operator's break (not
  /// by release), the server keeps the key from everyone for this long, so that writes a stalled holder
  /// still has in flight to a resource that cannot check fencing tokens land or fail before the next holder
  /// starts. It narrows that window; only fencing closes it (docs/fencing.md). 0 (default): none. The
  /// server bounds it (batond: `--max-lock-delay-ms`, 60 s by default; a longer one is refused with
  /// error::bad_request); a server without feature `lock_delay`, or the etcd backend, refuses a non-zero one
  /// with error::invalid_config, nothing sent.
  milliseconds lock_delay{0};

  milliseconds effective_renew_every() const { return renew_every.count() > 0 ? renew_every : ttl / 3; }
  milliseconds effective_safety_margin() const {
    return safety_margin.count() > 0 ? safety_margin : std::max(ttl / 10, milliseconds{1});
  }
  /// Throws baton::exception(error::invalid_config) naming the bad field.
  void validate() const;
};
// Every field trivially copyable and destructible: GCC 12 cannot hurt a lease_options temporary in a
// co_await expression (baton/bounded_string.hpp).
static_assert(std::is_trivially_copyable_v<lease_options> && std::is_trivially_destructible_v<lease_options>);

/// `<hostname>:<pid>`.
std::string default_identity();

/// True when `text` holds a control character as the protocol counts them in owners and values (and batond
/// refuses them): C0 (U+0000–U+001F), DEL (U+007F) or C1 (U+0080–U+009F, in UTF-8 the bytes C2 80–C2 9F).
bool has_control_characters(std::string_view text) noexcept;

/// True for the URL schemes that speak TLS: `https://` and `etcds://`.
bool uses_tls(std::string_view server_url);

/// `text` with the credentials of every URL in it replaced by `***` (`etcd://user:password@host:2379` becomes
/// `etcd://***@host:2379`): the form in which a server URL, or a message that quotes one, may be logged or
/// shown. A URL's credentials end at the last `@` before the first `/` after `://` (RFC 3986); in free text
/// that can reach past the URL, which hides more than needed but never shows a password without a `/`.
/// Pure and thread-safe.
std::string without_credentials(std::string_view text);

}  // namespace baton
