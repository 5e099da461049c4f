// SPDX-License-Identifier: Apache-2.0
#pragma once
// The resource side of fencing: a per-resource "highest token accepted" with an atomic check-and-apply.
//
// A lock holder can lose its lease without knowing it (a pause, a partition, a late reply) and keep writing.
// The protected resource stays safe only if it refuses a write whose token is lower than one it has already
// accepted, and decides that in the same step as the write: a check followed by a separate write lets a stale
// writer pass the check, stall, and write after a newer holder did. fence_guard::apply() performs the check,
// the write and the recording of the token under one lock. Equal tokens are accepted, because one holder
// writes many times with the token of one acquisition. See docs/fencing.md.
//
// Header-only and standard C++ only, so a resource server can use it without the rest of the SDK.

#include <atomic>
#include <concepts>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace baton {

/// What a lock holder passes to the resource with each write: its fencing token and, for a semaphore's
/// permit, its slot and the key's permit count it was granted under (baton::lease::fence()). Slot 0 is a
/// lock's, or a semaphore's first permit. `permits` 0 means not known: the count is not checked.
struct fence {
  std::uint64_t token = 0;
  std::uint32_t slot = 0;
  std::uint32_t permits = 0;
};
// Trivially copyable and destructible: GCC 12's double destruction of a co_await temporary cannot hurt it.
static_assert(std::is_trivially_copyable_v<fence> && std::is_trivially_destructible_v<fence>);

/// Outcome of fence_guard::apply().
enum class fence_status {
  applied,   // the token was current: fn ran and the token is now the resource's highest
  rejected,  // the token was lower than the highest accepted (stale): fn did not run
};

/// Result of fence_guard::apply(resource, token, fn) where fn returns T. A reference returned by fn is
/// stored as a copy: the referent may be guarded by the fence's lock, which is released on return.
template <class T>
struct fence_result {
  fence_status status = fence_status::rejected;
  /// The resource's highest accepted token after the call: `token` when applied, the newer token that made
  /// this one stale when rejected (what an HTTP server reports in its 409 answer).
  std::uint64_t highest_token = 0;
  /// fn's return value; engaged exactly when applied.
  std::optional<T> value;

  bool applied() const noexcept { return status == fence_status::applied; }
  bool rejected() const noexcept { return status == fence_status::rejected; }
};

/// Result of fence_guard::apply(resource, token, fn) where fn returns void.
template <>
struct fence_result<void> {
  fence_status status = fence_status::rejected;
  std::uint64_t highest_token = 0;

  bool applied() const noexcept { return status == fence_status::applied; }
  bool rejected() const noexcept { return status == fence_status::rejected; }
};

/// Result of fence_guard::check().
struct fence_check {
  /// True when apply() with this token would run its function at the time of the check.
  bool current = false;
  /// The resource's highest accepted token at the time of the check (0 when none).
  std::uint64_t highest_token = 0;

  explicit operator bool() const noexcept { return current; }
};

/// A thread-safe table of resources, each with the highest fencing token accepted for it.
///
/// Resources are arbitrary strings; a resource nobody wrote to has highest token 0 (Baton servers issue
/// tokens from 1). Tokens of one resource must come from one lock (or from a server with one counter for all
/// keys, as batond has), otherwise comparing them means nothing.
///
/// The table lives in memory. A resource whose data is durable must keep its last token durably with the data
/// and seed the guard at startup with apply(resource, stored_token, [] {}); otherwise a restart forgets the
/// highest token and re-admits stale writers.
///
/// Locking: one mutex per resource, held while fn runs, plus one reader-writer mutex over the table itself,
/// held only to find or insert a resource. Per-resource mutexes serialise exactly the writes that must be
/// ordered (those to one resource) and nothing else; with a fixed set of sharded mutexes a slow fn (a disk or
/// database write) would also stall every unrelated resource that hashes to its shard. The cost, a mutex per
/// resource kept for the guard's lifetime, is small next to the highest token, which must be kept forever
/// anyway: forgetting it would let a stale token through.
///
/// Neither copyable nor movable (it owns mutexes); share it by reference.
class fence_guard {
 public:
  fence_guard() = default;
  fence_guard(const fence_guard&) = delete;
  fence_guard& operator=(const fence_guard&) = delete;

  /// Runs `fn()` if `token` is greater than or equal to the highest token accepted for `resource`, and then
  /// records `token` as the highest; otherwise does not run `fn`. The comparison, `fn` and the recording
  /// happen under the resource's lock, so no other apply() on the same resource runs in between: every write
  /// that `fn` performs is ordered after all writes with a lower token, and a lower token can never be
  /// applied after a higher one.
  ///
  /// Returns fence_status::applied with fn's return value (if not void) and `highest_token == token`, or
  /// fence_status::rejected with the higher token that made this one stale.
  ///
  /// Errors: if `fn` throws, the token is not recorded (the write did not happen, so it must not fence out
  /// anyone) and the exception propagates to the caller; the resource's lock is released either way. May
  /// throw std::bad_alloc when the resource is new, or std::system_error from a mutex.
  ///
  /// Thread-safety: safe to call concurrently from any threads, for the same or different resources. Calls
  /// for the same resource are serialised, including their fn; calls for different resources run in
  /// parallel. `fn` must not call apply() on this guard for the same resource (that would deadlock); calling
  /// check(), highest() or snapshot() from fn is fine.
  template <class Fn>
  requires std::invocable<Fn&>
  auto apply(std::string_view resource, std::uint64_t token, Fn&& fn)
      -> fence_result<std::remove_cvref_t<std::invoke_result_t<Fn&>>> {
    return apply_locked(find_or_insert(resource), nullptr, fence{token, 0, 0}, fn);
  }

  /// apply() for a holder of one permit of a semaphore (docs/fencing.md, "Semaphores"): the highest token is
  /// kept per (resource, slot), since the N holders of a key's N permits write at once, each with its own
  /// token. A stale holder of slot s is refused; the other slots' holders are untouched. Slot 0 is the
  /// resource itself, so a lock's holder (slot 0) and a semaphore's slot 0 share one highest token (tokens
  /// come from one counter: the order is meaningful). Slot s > 0 is kept under slot_resource(resource, s).
  ///
  /// A count that shrinks (docs/fencing.md, "A count that shrinks"): the resource also keeps, per count it
  /// has seen applied (`f.permits`), the highest token applied with it. A write in a slot at or past a count
  /// whose highest token is larger than the write's is refused, `highest_token` naming that token: a key's
  /// count changes only while nothing holds the key, so that slot's lease had ended before the newer grant,
  /// and the slot may never be granted again to fence it out. The check, fn and the recording of the slot's
  /// token and of the count happen under the slot's lock. A fence without a count (`permits` 0) is checked
  /// the same way and records no count. A slot at or past its own count is a malformed fence:
  /// std::invalid_argument, fn not run. Otherwise errors and thread-safety as apply(resource, token, fn).
  template <class Fn>
  requires std::invocable<Fn&>
  auto apply(std::string_view resource, fence f, Fn&& fn)
      -> fence_result<std::remove_cvref_t<std::invoke_result_t<Fn&>>> {
    check_fence(f);
    entry& base = find_or_insert(resource);
    entry& slot = f.slot == 0 ? base : find_or_insert(slot_resource(resource, f.slot));
    return apply_locked(slot, &base, f, fn);
  }

  /// check() for a permit holder: whether apply(resource, f, fn) would run now. Advisory, as check().
  /// std::invalid_argument for a slot at or past its own count.
  fence_check check(std::string_view resource, fence f) const {
    check_fence(f);
    {
      std::shared_lock lock(table_mutex_);
      if (auto it = table_.find(resource); it != table_.end()) {
        if (auto newer = shrunk_past(it->second, f)) return fence_check{false, *newer};
      }
    }
    if (f.slot == 0) return check(resource, f.token);
    return check(slot_resource(resource, f.slot), f.token);
  }

  /// Seeds the guard with a fence the resource kept durably with its data (its highest token per slot, and
  /// the counts they came with), at startup, before any apply(): records `f.token` as the slot's highest
  /// token if it is higher, and its count, running nothing. Without it a restarted guard forgets them and
  /// re-admits stale writers (see the class comment). std::invalid_argument as apply().
  void seed(std::string_view resource, fence f) {
    check_fence(f);
    entry& base = find_or_insert(resource);
    entry& slot = f.slot == 0 ? base : find_or_insert(slot_resource(resource, f.slot));
    std::lock_guard lock(slot.mutex);
    if (f.token > slot.highest.load(std::memory_order_relaxed))
      slot.highest.store(f.token, std::memory_order_release);
    record_count(base, f);
  }

  /// The name under which slot `slot` (above 0) of `resource` is kept: `resource`, a NUL byte, then
  /// `slot <n>`. A resource name without a NUL byte never collides with it; snapshot() lists it so.
  static std::string slot_resource(std::string_view resource, std::uint32_t slot) {
    std::string name(resource);
    name.push_back('\0');
    name += "slot " + std::to_string(slot);
    return name;
  }

  /// Says whether apply() with `token` would run now, and the resource's highest accepted token. No side
  /// effect: an unknown resource is not added.
  ///
  /// Advisory only: another thread may apply a higher token right after the check returns, so never use
  /// check() followed by a write to decide a write; that is the race apply() exists to close. Useful to
  /// refuse a stale request early, before expensive work.
  ///
  /// Errors: may throw std::system_error from a mutex. Thread-safety: safe from any thread; does not wait for
  /// a running fn (it reads the last recorded token).
  fence_check check(std::string_view resource, std::uint64_t token) const {
    const std::uint64_t h = highest(resource);
    return fence_check{token >= h, h};
  }

  /// The highest token accepted for `resource`, or 0 if none was. No side effect.
  ///
  /// Errors: may throw std::system_error from a mutex. Thread-safety: safe from any thread; does not wait for
  /// a running fn.
  std::uint64_t highest(std::string_view resource) const {
    std::shared_lock lock(table_mutex_);
    auto it = table_.find(resource);
    return it == table_.end() ? 0 : it->second.highest.load(std::memory_order_acquire);
  }

  /// Every resource with an accepted token (highest token above 0), with that token, in resource order. A
  /// consistent copy per resource, not across resources: applies may run while it is taken.
  ///
  /// Errors: std::bad_alloc. Thread-safety: safe from any thread; does not wait for a running fn.
  std::map<std::string, std::uint64_t> snapshot() const {
    std::map<std::string, std::uint64_t> out;
    std::shared_lock lock(table_mutex_);
    for (const auto& [name, e] : table_) {
      if (auto h = e.highest.load(std::memory_order_acquire); h > 0) out.emplace(name, h);
    }
    return out;
  }

 private:
  struct entry {
    std::mutex mutex;  // held across check, fn and record
    // Written only under `mutex`; atomic so check(), highest() and snapshot() can read it without waiting
    // for a running fn.
    std::atomic<std::uint64_t> highest{0};
    // Of a resource fenced per slot (apply(resource, fence, fn)): per permit count applied, the highest
    // token applied with it. Under `count_mutex`, a leaf: taken under a slot's `mutex`, never the reverse.
    mutable std::mutex count_mutex;
    std::map<std::uint32_t, std::uint64_t> counts;
  };

  static void check_fence(fence f) {
    if (f.permits != 0 && f.slot >= f.permits)
      throw std::invalid_argument("fence: slot " + std::to_string(f.slot) + " is not below its count " +
                                  std::to_string(f.permits));
  }

  // The token that shuts `f` out because the key's count shrank to `f.slot` or below after its grant: the
  // highest token applied with a count at most f.slot, when larger than f's.
  static std::optional<std::uint64_t> shrunk_past(const entry& base, fence f) {
    if (f.slot == 0) return std::nullopt;  // every count has slot 0
    std::lock_guard lock(base.count_mutex);
    // counts: count -> highest token, both strictly increasing (dominated pairs pruned): the last one at or
    // below f.slot has the highest token of them all.
    auto it = base.counts.upper_bound(f.slot);
    if (it == base.counts.begin()) return std::nullopt;
    --it;
    if (it->second > f.token) return it->second;
    return std::nullopt;
  }

  // Records that `f.token` was granted under `f.permits` (nothing for 0), keeping only pairs that some slot
  // needs: (c, t) is dropped when a smaller or equal count has a token at least t.
  static void record_count(entry& base, fence f) {
    if (f.permits == 0) return;
    std::lock_guard lock(base.count_mutex);
    auto& counts = base.counts;
    auto at = counts.upper_bound(f.permits);
    if (at != counts.begin() && std::prev(at)->second >= f.token) return;  // dominated
    counts[f.permits] = f.token;
    for (auto it = counts.upper_bound(f.permits); it != counts.end() && it->second <= f.token;)
      it = counts.erase(it);
  }

  // The check, fn and the recording under `e`'s lock; with `base` (a permit's fence), also the count check
  // and the count's recording, so a write of an older token in a slot past a newer count can never run after
  // that count's write returned.
  template <class Fn>
  auto apply_locked(entry& e, entry* base, fence f, Fn& fn)
      -> fence_result<std::remove_cvref_t<std::invoke_result_t<Fn&>>> {
    using value_type = std::remove_cvref_t<std::invoke_result_t<Fn&>>;
    std::lock_guard lock(e.mutex);
    // Only apply() and seed() write `highest`, always under e.mutex, so a relaxed load sees the latest value.
    const std::uint64_t highest = e.highest.load(std::memory_order_relaxed);
    // The token that makes f stale: the slot's own newer one, or a newer count's.
    std::optional<std::uint64_t> newer;
    if (f.token < highest)
      newer = highest;
    else if (base)
      newer = shrunk_past(*base, f);
    fence_result<value_type> result;  // rejected until fn ran
    if (newer) {
      result.highest_token = *newer;
      return result;
    }
    if constexpr (std::is_void_v<value_type>) {
      std::invoke(fn);
    } else {
      result.value.emplace(std::invoke(fn));
    }
    // Recorded only after fn returned: a throwing fn leaves the highest token and the counts unchanged.
    e.highest.store(f.token, std::memory_order_release);
    if (base) record_count(*base, f);
    result.status = fence_status::applied;
    result.highest_token = f.token;
    return result;
  }

  // Transparent hashing lets lookups take a string_view without building a std::string.
  struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };

  entry& find_or_insert(std::string_view resource) {
    {
      std::shared_lock lock(table_mutex_);
      if (auto it = table_.find(resource); it != table_.end()) return it->second;
    }
    std::unique_lock lock(table_mutex_);
    // try_emplace keeps the entry another thread may have inserted between the two locks.
    return table_.try_emplace(std::string(resource)).first->second;
  }

  mutable std::shared_mutex table_mutex_;
  // Entries are never erased, and unordered_map never moves its elements (a rehash relinks nodes), so an
  // entry& stays valid after table_mutex_ is released.
  std::unordered_map<std::string, entry, string_hash, std::equal_to<>> table_;
};

}  // namespace baton
