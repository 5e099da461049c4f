// SPDX-License-Identifier: Apache-2.0
#pragma once
// The lock table: the whole lock semantics of the protocol, with no sockets, no disk and no clock of its own.
// Every operation takes `now` from the server's monotonic clock, so tests drive time by hand.
// Not thread-safe: the caller serialises access (see lock_service).

#include "expiry_index.hpp"
#include "permit_index.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace baton::server {

using clock = std::chrono::steady_clock;
using time_point = clock::time_point;
using std::chrono::milliseconds;

struct lease_record;
/// A lease in the table: its key and its record.
using lease_entry = std::pair<const std::string, lease_record>;

/// A held lock as the table records it. A million of them are held at once (docs/benchmarks.md, "A
/// million held leases"), so what most leases lack costs a pointer: the client and the value live in a
/// block of their own, allocated only for a lease that has one or the other.
struct lease_record {
  std::string owner;
  std::uint64_t token = 0;
  time_point expires{};
  /// The longest TTL ever granted to this lease (acquire or renew). After a restart the lease is restored
  /// for this long, counted from the restart, so the server never ends a lease before its holder may.
  milliseconds restore_ttl{0};
  /// Log position of the last record this lease's state rests on (its acquire, or the extend that raised
  /// restore_ttl); set by the caller through mark_logged(). An answer about the lease waits until the log
  /// is durable up to here, so a renew is memory-only exactly when nothing about the lease is pending.
  std::uint64_t log_seq = 0;
  /// The table's links in its expiry index (expiry_index.hpp); only the table sets them.
  lease_entry* expiry_prev = nullptr;
  lease_entry* expiry_next = nullptr;

  /// The authenticated client that took the lease (empty without authentication). Part of the holder's
  /// identity: only the same client with the same owner string may renew, release or re-acquire it.
  std::string_view client() const { return extras_ ? std::string_view(extras_->client) : std::string_view(); }
  /// The value published with the lease (docs/protocol.md; empty: none). Set by each grant, kept by renew.
  std::string_view value() const { return extras_ ? std::string_view(extras_->value) : std::string_view(); }
  /// The lease's lock-delay (docs/protocol.md, "Lock-delay"; 0: none): once the lease ends by expiry or
  /// by a break, its key stays unavailable for this long. Kept in the extras block, so the option costs a
  /// lease that does not use it nothing.
  milliseconds lock_delay() const { return extras_ ? extras_->lock_delay : milliseconds{0}; }
  void set_client(std::string_view client) { set(&extras::client, client); }
  void set_value(std::string_view value) { set(&extras::value, value); }
  void set_lock_delay(milliseconds delay) {
    if (!extras_) {
      if (delay <= milliseconds{0}) return;
      extras_ = std::make_unique<extras>();
    }
    extras_->lock_delay = std::max(delay, milliseconds{0});
    trim();
  }

 private:
  struct extras {
    std::string client;
    std::string value;
    milliseconds lock_delay{0};
  };
  void set(std::string extras::*field, std::string_view text) {
    if (!extras_) {
      if (text.empty()) return;
      extras_ = std::make_unique<extras>();
    }
    ((*extras_).*field).assign(text);
    trim();
  }
  void trim() {
    if (extras_->client.empty() && extras_->value.empty() && extras_->lock_delay == milliseconds{0})
      extras_.reset();
  }
  std::unique_ptr<extras> extras_;
};

/// `now + ttl`, saturated at the clock's largest time point (a huge TTL must not overflow).
time_point deadline_after(time_point now, milliseconds ttl);

/// One live permit of a key of more than one permit, as a reader sees it (lease_view::holders).
struct permit_holder {
  std::uint32_t slot = 0;
  std::string owner;
  std::string client;
  std::uint64_t token = 0;
  time_point expires{};
  milliseconds remaining{0};
  std::string value{};
};

/// What a reader sees of a held lock.
struct lease_view {
  std::string owner;
  std::string client;
  std::uint64_t token = 0;
  time_point expires{};
  milliseconds remaining{0};
  std::string value{};
  /// The lease's lock-delay option (0: none).
  milliseconds lock_delay{0};
  /// A key of more than one permit (docs/protocol.md, "semaphores"): its count, the slot of the lease shown
  /// above, and the live permits in slot order: the first lock_table::max_holders_shown of them, of
  /// `holders_total`. 0, 0, none and 0 for a plain lock.
  std::uint32_t permits = 0;
  std::uint32_t slot = 0;
  std::vector<permit_holder> holders{};
  std::size_t holders_total = 0;
};

/// A lock removed by expire(): its table key (a permit's is permit_key()) and token.
struct expired_lock {
  std::string key;
  std::uint64_t token;
};

/// A key in lock-delay: the lease `token` ended by expiry or a break, and nobody may take the key before
/// `until` (docs/protocol.md, "Lock-delay").
struct key_delay {
  std::uint64_t token = 0;
  /// The delay the lease asked for: what a restart begins again in full (docs/design.md, "Lock-delay").
  milliseconds delay{0};
  time_point until{};
};

/// A key whose lock-delay is over (lock_table::end_delays): `token` is the lease it followed.
struct ended_delay {
  std::string key;
  std::uint64_t token;
};

struct acquire_granted {
  std::uint64_t token = 0;
  /// Token of the lease this grant replaced (an expired lease, or the same owner's active one); 0 if none.
  std::uint64_t replaced_token = 0;
  /// The TTL to log with the grant: the one asked for, or the longer restore TTL of the same owner's
  /// unexpired lease it superseded (a delayed copy of an earlier acquire must not shorten a lease).
  milliseconds restore_ttl{0};
  /// The lease's lock-delay (0: none): logged after the grant when it is not 0.
  milliseconds lock_delay{0};
  /// The key's permit count and the slot granted (1 and 0 for a plain lock); the lease's table key is
  /// permit_key(key, permits, slot).
  std::uint32_t permits = 1;
  std::uint32_t slot = 0;
  /// Expired leases of the key's former permit count that the grant removed from the table (a count is
  /// set again only once nothing holds the key): each must be logged as expired before the grant.
  std::vector<expired_lock> retired{};
  /// Lock-delays of the key's former count, all over, that the grant ended (a retired lease's among them):
  /// each must be logged as over (a lock_delay record of 0 ms) after `retired` and before the grant, or a
  /// replay would begin them again beside the new count's leases (docs/design.md, "Semaphores").
  std::vector<ended_delay> ended_delays{};
};
struct acquire_refused {
  /// The unexpired holder; empty (token 0) when the key is refused for its lock-delay.
  lease_view holder;
  /// Non-zero: no lease holds the key, but the lease `holder.token` ended by expiry or a break less than its
  /// lock-delay ago, and the key is refused for this much longer.
  milliseconds lock_delay_remaining{0};
};
/// The key is in use (a live holder) with another permit count than the acquire asked for: nothing changed.
/// lock_service also answers so while queued acquires of another count wait for the key.
struct acquire_mismatch {
  std::uint32_t permits = 0;
};
using acquire_result = std::variant<acquire_granted, acquire_refused, acquire_mismatch>;

/// Why a renew was refused. A lease past its expiry is exactly like an absent one (not_held): the answer
/// never depends on whether the expiry sweep has removed it yet.
/// `broken`: the request's token is the one an operator's break ended on this key (break_lease); the table
/// remembers the last few broken tokens so the holder is told why, in memory only (docs/design.md).
enum class lost_reason { not_held, owner_mismatch, token_mismatch, broken };
std::string_view to_string(lost_reason r);

struct renew_ok {
  /// True when the TTL grew beyond any granted before: the new restore TTL must be logged before the
  /// answer, or a restart could end the lease earlier than the holder expects.
  bool restore_ttl_grew = false;
  /// The lease's log_seq before this renew: the answer must wait until it is durable too (an earlier
  /// renew's extend record may still be in flight).
  std::uint64_t log_seq = 0;
  /// The lease's table key is permit_key(key, permits, slot) (1 and 0: the key itself).
  std::uint32_t permits = 1;
  std::uint32_t slot = 0;
};
struct renew_refused {
  lost_reason reason;
};
using renew_result = std::variant<renew_ok, renew_refused>;

struct proclaim_ok {
  /// The lease's restore TTL: logged with the new value, so replaying the record restores the lease as it is.
  milliseconds restore_ttl{0};
  /// The lease's table key is permit_key(key, permits, slot).
  std::uint32_t permits = 1;
  std::uint32_t slot = 0;
};
/// A proclaim is refused exactly as a renew would be, for the same reasons in the same order.
using proclaim_result = std::variant<proclaim_ok, renew_refused>;

/// The lock's record (docs/protocol.md, "record"): a value the table keeps for a key beyond any lease,
/// replaced only by the key's live holder. Records are never removed (no delete in this round).
struct lock_record {
  std::string value;
  /// The holder (owner, authenticated client) and token of the write that set it.
  std::string owner;
  std::string client;
  std::uint64_t token = 0;
  /// Writes of this record so far (1 after the first).
  std::uint64_t version = 0;
};

struct record_written {
  std::uint64_t token = 0;
  std::uint64_t version = 0;
};
/// The writer holds the key, but the record was last written with a larger token. Tokens only grow, so a
/// live holder cannot normally meet this; it is checked anyway, so a record's token never goes down.
struct record_stale {
  std::uint64_t record_token = 0;
};
/// The write would add a record past the table's limit (set_record_limit); nothing changed.
struct record_limit_reached {
  std::size_t limit = 0;
};
/// A write is refused exactly as a renew would be (renew_refused, the same reasons in the same order),
/// then for a stale token, then for the limit.
using record_write_result = std::variant<record_written, renew_refused, record_stale, record_limit_reached>;

enum class release_outcome {
  released,      // this owner+token held it; it is free now
  already_free,  // nobody held it, or its lease had expired (whoever held it): a retry after a lost
                 // reply lands here
  not_owner,     // another owner or token holds it: nothing changed
};
struct release_result {
  release_outcome outcome;
  /// Token of the record removed from the table (0 if none): the change that must be logged.
  std::uint64_t removed_token = 0;
  /// The removed lease's table key is permit_key(key, permits, slot).
  std::uint32_t permits = 1;
  std::uint32_t slot = 0;
};

/// One held lock of a listing (lock_table::list): its key and what a reader sees of it. `waiters` counts
/// the queued acquires waiting for the key, which the table does not know of: lock_service fills it in.
struct listed_lease {
  std::string key;
  lease_view lease;
  std::size_t waiters = 0;
  /// Non-zero: the key is not held but in lock-delay for this much longer after the lease `lease.token`
  /// (the rest of `lease` is empty).
  milliseconds lock_delay_remaining{0};
};

/// One page of a listing: unexpired leases, and keys in lock-delay, in key order; `more` when keys after the
/// last one match too.
struct list_page {
  std::vector<listed_lease> leases;
  bool more = false;
};

/// An operator's break (lock_table::break_lease) ended this lease: it is no longer in the table.
struct lease_broken {
  lease_view lease;
};
/// No unexpired lease holds the key: nothing to break.
struct break_not_held {};
/// The key has more than one permit and the break named no token: nothing changed.
struct break_needs_token {
  std::uint32_t permits = 0;
};
/// The key is held with another token than the one the operator named: nothing changed.
struct break_token_mismatch {
  lease_view holder;
};
using break_result = std::variant<lease_broken, break_not_held, break_token_mismatch, break_needs_token>;

/// One entry of a snapshot (what a restart needs to restore).
struct snapshot_entry {
  std::string key;
  std::string owner;
  std::uint64_t token;
  milliseconds restore_ttl;
  std::string client{};
  std::string value{};
};

/// One record of a snapshot.
struct record_entry {
  std::string key;
  lock_record record;
};

class lock_table {
 public:
  lock_table() = default;
  // The expiry index links the table's own entries: a copy would link into the original. A move keeps
  // the nodes, and so the links.
  lock_table(const lock_table&) = delete;
  lock_table& operator=(const lock_table&) = delete;
  lock_table(lock_table&&) = default;
  lock_table& operator=(lock_table&&) = default;

  // A holder is the pair (client, owner): `client` is the authenticated name of the caller (empty without
  // authentication). The same owner string sent by another client is another owner.

  /// Grants the lock unless an unexpired lease of another holder holds it. A grant always takes a new token,
  /// strictly larger than every token this table has issued or restored, and records `value` with the lease
  /// (a same-owner re-acquire replaces the value, an empty one included).
  /// While the key is in lock-delay (the lease before ended by expiry or a break less than its `lock_delay`
  /// ago) everyone is refused, the former holder's owner too, with the delay's remaining time. A grant
  /// records `lock_delay` with the lease; a same-owner re-acquire of its unexpired lease keeps the larger of
  /// the two delays (a late copy of an earlier acquire must not shorten the promise to the next holder).
  /// While `key` has a live holder of more than one permit, acquire_mismatch.
  acquire_result acquire(std::string_view key, std::string_view owner, milliseconds ttl, time_point now,
                         std::string_view client = {}, std::string_view value = {},
                         milliseconds lock_delay = milliseconds{0});

  // ---- Counting semaphores (docs/protocol.md, "semaphores"; lock_table_permits.cpp) ----
  // A key of N > 1 permits keeps one ordinary lease per held slot (permit_index.hpp). Renew, proclaim,
  // write_record, release and break_lease name a permit by (key, token); get() shows a key's lowest held
  // slot with every holder.

  /// Grants one of `permits` permits of `key` (1: exactly acquire()): the same holder's live permit again,
  /// with a new token (the expiry never earlier), or else the lowest slot that no live lease holds and that
  /// is not in lock-delay. Refused (acquire_refused, with every holder) when there is none; acquire_mismatch
  /// when the key has a live holder with another count. Once nothing holds the key, a grant of another count
  /// first removes the leases of the former count, all expired then (acquire_granted::retired), and waits
  /// for their slots' lock-delays like any other.
  acquire_result acquire_permit(std::uint32_t permits, std::string_view key, std::string_view owner,
                                milliseconds ttl, time_point now, std::string_view client = {},
                                std::string_view value = {}, milliseconds lock_delay = milliseconds{0});
  /// What an acquire of `permits` permits of `key` by a holder that holds none of it would get when it is
  /// not granted (refused, or acquire_mismatch); nullopt when it would be granted.
  std::optional<acquire_result> refusal(std::string_view key, std::uint32_t permits, time_point now) const;
  /// A view of a key of permits shows at most this many holders (the lowest slots): an answer that listed
  /// 65,535 of them would cost megabytes, under the mutex (docs/design.md, "Semaphores").
  static constexpr std::size_t max_holders_shown = 100;
  /// Whether an unexpired permit of `key` (a key of more than one permit) has `token`; O(1).
  bool permit_held(std::string_view key, std::uint64_t token, time_point now) const;
  /// Whether (client, owner) holds an unexpired lease of `key`, a permit of it included.
  bool holds(std::string_view key, std::string_view owner, std::string_view client, time_point now) const;
  /// The earliest instant at which an unexpired lease of `key` (any permit) expires or a lock-delay of the
  /// key (any slot, any count) ends; time_point::max() when none.
  time_point next_change(std::string_view key, time_point now) const;
  /// Removes every permit of `key` whose expiry is at or before `now` and returns them (expire_key for a
  /// key of more than one permit).
  std::vector<expired_lock> expire_permits(std::string_view key, time_point now);

  /// Extends the lease to now + ttl, only for the current holder with the current token on an unexpired
  /// lease.
  renew_result renew(std::string_view key, std::string_view owner, std::uint64_t token, milliseconds ttl,
                     time_point now, std::string_view client = {});

  /// Replaces the value of the lease, only for the current holder with the current token on an unexpired
  /// lease (the conditions of renew, checked in its order). The token, the expiry and the restore TTL are
  /// unchanged (docs/protocol.md, "proclaim").
  proclaim_result proclaim(std::string_view key, std::string_view owner, std::uint64_t token,
                           std::string_view value, time_point now, std::string_view client = {});

  /// Replaces the record of `key` with `value`, only for the current holder with the current token on an
  /// unexpired lease (renew's conditions, in renew's order) and a token at least the record's. The lease is
  /// untouched: no renewal, the expiry and the value stay.
  record_write_result write_record(std::string_view key, std::string_view owner, std::uint64_t token,
                                   std::string_view value, time_point now, std::string_view client = {});
  /// The record of `key`, or null; valid until the next change to the table.
  const lock_record* find_record(std::string_view key) const;
  std::size_t record_count() const { return records_.size(); }
  /// Records beyond this many are refused (record_limit_reached); a replacement never counts against it.
  void set_record_limit(std::size_t limit) { max_records_ = limit; }

  /// Frees the lock on an exact holder+token match; an expired or absent lock counts as already free
  /// (an expired record is removed, and removed_token says so).
  release_result release(std::string_view key, std::string_view owner, std::uint64_t token, time_point now,
                         std::string_view client = {});

  /// The unexpired leases whose key starts with `prefix` and sorts after `after` (bytewise; empty: from the
  /// first), at most `limit` of them (at least 1), in key order. Scans the whole table: a page costs O(n)
  /// plus O(limit log limit), wherever the cursor is (docs/design.md, "Listing locks").
  list_page list(std::string_view prefix, std::string_view after, std::size_t limit, time_point now) const;

  /// An operator ends the lease of `key` (docs/protocol.md, "break"): removed like a release, whoever holds
  /// it, when it is unexpired and `token`, if given, is its token. The broken token is remembered (the last
  /// broken_memory of them), so that its holder's renew, proclaim or record write is refused `broken`. An
  /// expired lease is not held: break_not_held, and it stays for the sweep (or expire_key) to log.
  break_result break_lease(std::string_view key, std::optional<std::uint64_t> token, time_point now);
  /// How many broken (key, token) pairs the table remembers for the `broken` reason.
  static constexpr std::size_t broken_memory = 1024;

  /// Records that the log position `seq` holds the latest record about the lease `key` has with `token`.
  void mark_logged(std::string_view key, std::uint64_t token, std::uint64_t seq);

  /// The unexpired holder of `key`, if any.
  std::optional<lease_view> get(std::string_view key, time_point now) const;
  /// `key`'s lock-delay, if it is in one at `now` (its lease ended by expiry or a break, swept or not, less
  /// than its lock-delay ago).
  std::optional<key_delay> delayed(std::string_view key, time_point now) const;
  /// The lock-delay of a slot of `key` (a key of more than one permit) after its permit `token` ended, if
  /// that slot is in it at `now` (swept or not). Visits only the key's slots in lock-delay.
  std::optional<key_delay> permit_delayed(std::string_view key, std::uint64_t token, time_point now) const;
  /// The refusal an acquire of `key` would get for its lock-delay, if it is in one.
  std::optional<acquire_refused> delay_refusal(std::string_view key, time_point now) const;
  /// Keys in lock-delay, the ones whose delay is over included until end_delays() removes them.
  std::size_t delay_count() const { return delays_.size(); }
  /// Removes at most `max_keys` keys whose lock-delay ended at or before `now` and returns them.
  std::vector<ended_delay> end_delays(time_point now, std::size_t max_keys);

  /// Removes every lease whose expiry is at or before `now` and returns them.
  std::vector<expired_lock> expire(time_point now);
  /// The sweep's step: removes at most `max_leases` leases whose expiry second ended at or before `now`,
  /// oldest first, and returns them; fewer than `max_leases` means none of those is left. Leases expiring
  /// within the current second wait for the next step after it: the sweep only frees memory, expiry itself
  /// is decided on every access, so a lease swept up to a second late is never seen as held (and one is
  /// never swept early). Visits only the leases it removes (expiry_index.hpp).
  std::vector<expired_lock> expire_some(time_point now, std::size_t max_leases);
  /// Removes the lease of `key` if its expiry is at or before `now`, and returns it (the sweep, for one key).
  std::optional<expired_lock> expire_key(std::string_view key, time_point now);

  /// Recovery: installs a lease as held, valid for `ttl` from `now`, and raises the counter past its token.
  void restore(std::string key, std::string owner, std::uint64_t token, milliseconds ttl, time_point now,
               std::string client = {}, std::string value = {});
  /// Recovery: forgets a lease (a logged release or expiry) if it still has that token. A lease with a
  /// lock-delay that ended by expiry (`expired`) leaves its key in lock-delay for the whole delay from
  /// `now`: when it expired is not in the log, and beginning again is never earlier than the promise.
  void forget(std::string_view key, std::uint64_t token, bool expired = false, time_point now = {});
  /// Recovery of a lock_delay record: `token`'s lease carries `delay` when the table holds it; otherwise
  /// the key is in lock-delay after that lease, begun again in full from `now` (a break, a snapshot). A
  /// `delay` of 0 says that key's lock-delay after `token` is over.
  void restore_lock_delay(std::string_view key, std::uint64_t token, milliseconds delay, time_point now);
  /// Recovery: raises the TTL a lease is restored with.
  void raise_restore_ttl(std::string_view key, std::uint64_t token, milliseconds ttl, time_point now);
  /// Recovery: installs a record as logged (its version included); an older write (lower version) never
  /// replaces a newer one. Not subject to the record limit: what was stored comes back.
  void restore_record(std::string key, lock_record r);
  /// Raises the token counter so the next grant is larger than `token` (never lowers it).
  void observe_token(std::uint64_t token);

  /// The largest token issued or restored so far (0 when none).
  std::uint64_t last_token() const { return last_token_; }
  /// Leases in the table, and those of one client; both count an expired lease until it is removed (by the
  /// sweep, a release or a new grant of its key).
  std::size_t size() const { return leases_.size(); }
  std::size_t size_of(std::string_view client) const;
  bool contains(std::string_view key) const { return leases_.find(key) != leases_.end(); }
  std::vector<snapshot_entry> snapshot() const;
  /// Calls f(key, key_delay) for every key in lock-delay (ones whose delay is over included, until
  /// end_delays() removes them), in no order.
  template <class F>
  void for_each_delay(F&& f) const {
    for (const auto& [key, d] : delays_)
      f(key, d);
  }
  /// Calls f(key, record) for every lease in the table (expired ones until removed), in no order: a
  /// snapshot without a copy of the table.
  template <class F>
  void for_each_lease(F&& f) const {
    for (const auto& [key, r] : leases_)
      f(key, r);
  }
  /// Makes room for `leases` leases in all without rehashing (recovery, before replaying a file); never
  /// shrinks the table.
  void reserve(std::size_t leases) {
    if (leases > leases_.bucket_count() * leases_.max_load_factor()) leases_.reserve(leases);
  }
  std::vector<record_entry> records_snapshot() const;

 private:
  struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using map_type = std::unordered_map<std::string, lease_record, string_hash, std::equal_to<>>;
  static_assert(std::is_same_v<map_type::value_type, lease_entry>);
  using delay_map = std::unordered_map<std::string, key_delay, string_hash, std::equal_to<>>;

  static bool expired(const lease_record& r, time_point now) { return now >= r.expires; }
  static bool held_by(const lease_record& r, std::string_view owner, std::string_view client) {
    return r.owner == owner && r.client() == client;
  }

  void count(std::string_view client, int delta);
  /// Sets the expiry of a lease in the table, refiling it in the expiry index.
  void set_expires(lease_entry& e, time_point expires);
  /// Removes a lease from the table (and the index, and its client's count).
  void erase(map_type::iterator it);
  /// Removes a lease that ended by expiry (`from`: its expiry instant) or a break (`from`: now); a lease
  /// with a lock-delay leaves its key in lock-delay until from + delay, when that is after `now`.
  void erase_ended(map_type::iterator it, time_point from, time_point now);
  void begin_delay(std::string_view key, std::uint64_t token, milliseconds delay, time_point until);
  /// The unexpired lease of `key` held by (client, owner) with `token`, or null with `why` set to renew's
  /// reason (renew and proclaim share the conditions and their order).
  lease_entry* held_lease(std::string_view key, std::string_view owner, std::uint64_t token, time_point now,
                          std::string_view client, lost_reason& why);

  /// `why` refined: `broken` when `token` is the last one broken on `key`.
  lost_reason refine(std::string_view key, std::uint64_t token, lost_reason why) const;
  void remember_broken(std::string_view key, std::uint64_t token);

  // ---- permits (lock_table_permits.cpp) ----
  /// The permits of `key` when no unexpired plain lease holds it; null otherwise.
  const permit_index::entry* permits_of(std::string_view key, time_point now) const;
  /// The live permits of `pe` as get() shows them (token 0 when none is live); `earliest`, if given, is set
  /// to the live permit that expires first (the lowest slot of those that expire together).
  lease_view permits_view(const permit_index::entry& pe, time_point now,
                          std::pair<std::uint32_t, const lease_entry*>* earliest = nullptr) const;
  /// The refusal of an acquire of `permits` for another count than the key's: acquire_mismatch while the
  /// key has a live holder of another count, or the longest lock-delay of the other count's slots.
  std::optional<acquire_result> count_refusal(std::string_view key, std::uint32_t permits,
                                              time_point now) const;
  /// The lowest free slot of `pe`, if any; else `shortest` is the shortest lock-delay of a slot not held.
  std::optional<std::uint32_t> free_slot(std::string_view key, const permit_index::entry* pe,
                                         std::uint32_t permits, time_point now,
                                         std::optional<key_delay>& shortest) const;
  /// When slot `slot`'s lock-delay ends, if it is in one (`e`: its lease in the table, or null).
  std::optional<key_delay> slot_delay(std::string_view key, const permit_index::entry& pe, std::uint32_t slot,
                                      const lease_entry* e, time_point now) const;
  /// The refusal of a new holder of the full key `pe` (`shortest`: the shortest lock-delay of a slot not
  /// held).
  acquire_refused full_refusal(const permit_index::entry& pe, const std::optional<key_delay>& shortest,
                               time_point now) const;
  /// Removes the leases and delays of `key`'s former count (none is live or in force) before a grant of
  /// `permits`; returns the leases removed, and adds to `ended` every lock-delay it ends (a retired lease's
  /// too), so that the caller logs each before the grant.
  std::vector<expired_lock> retire_count(std::string_view key, std::uint32_t permits, time_point now,
                                         std::vector<ended_delay>& ended);
  /// Recovery's backstop: before a lease or lock-delay of `table_key` (with `token`) is restored, removes
  /// what the key has under another count, all of it older (a log that misses the end of a former count's
  /// delay). Returns false, removing nothing, when something of another count is newer: the record is then
  /// the leftover, and is not restored. A key never has two counts (docs/design.md, "Semaphores").
  bool settle_count(std::string_view table_key, std::uint64_t token);
  /// held_lease() for a key of more than one permit.
  lease_entry* held_permit(std::string_view key, const permit_index::entry& pe, std::string_view owner,
                           std::uint64_t token, time_point now, std::string_view client, lost_reason& why);
  // The permit index follows the table: every lease and lock-delay of a permit's table key enters and
  // leaves it with the table.
  void note_leased(lease_entry& e, std::uint64_t old_token);
  void note_unleased(const lease_entry& e);
  void note_delay(std::string_view table_key, int delta);
  /// Ends a lock-delay of the table (every removal from delays_ goes through here).
  void erase_delay(delay_map::iterator d);

  map_type leases_;
  expiry_index<lease_entry> expiry_;
  // The last broken token of each key, and the keys in the order they were broken (oldest first), so the
  // memory stays bounded by broken_memory.
  std::unordered_map<std::string, std::uint64_t, string_hash, std::equal_to<>> broken_;
  std::deque<std::string> broken_order_;
  std::unordered_map<std::string, lock_record, string_hash, std::equal_to<>> records_;
  // Keys in lock-delay, and the same keys by the end of their delay (a key's entry there may be stale when
  // it began a later delay: end_delays() checks the instant).
  delay_map delays_;
  std::multimap<time_point, std::string> delay_ends_;
  permit_index permits_;
  std::size_t max_records_ = SIZE_MAX;
  std::unordered_map<std::string, std::size_t, string_hash, std::equal_to<>> per_client_;
  std::uint64_t last_token_ = 0;
};

// Shared by lock_table.cpp and lock_table_permits.cpp.
namespace detail {
lease_view view_of(const lease_record& r, time_point now);
/// What a refusal for a lock-delay shows.
lease_view delay_view(std::uint64_t token, time_point until, time_point now);
acquire_refused refusal_for_delay(std::uint64_t token, time_point until, time_point now);
/// When the lock-delay after a lease that ended at `ended` is over.
time_point delay_end(const lease_record& r, time_point ended);
}  // namespace detail

}  // namespace baton::server
