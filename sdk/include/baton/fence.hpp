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
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace baton {

/// What a lock holder passes to the resource with each write: its fencing token and, for a semaphore's
/// permit, its slot (baton::lease::fence()). Slot 0 is a lock's, or a semaphore's first permit.
struct fence {
  std::uint64_t token = 0;
  std::uint32_t slot = 0;
};

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
    using value_type = std::remove_cvref_t<std::invoke_result_t<Fn&>>;
    entry& e = find_or_insert(resource);
    std::lock_guard lock(e.mutex);
    // Only apply() writes `highest`, always under e.mutex, so a relaxed load here sees the latest value.
    const std::uint64_t highest = e.highest.load(std::memory_order_relaxed);
    fence_result<value_type> result;
    if (token < highest) {
      result.status = fence_status::rejected;
      result.highest_token = highest;
      return result;
    }
    if constexpr (std::is_void_v<value_type>) {
      std::invoke(fn);
    } else {
      result.value.emplace(std::invoke(fn));
    }
    // Recorded only after fn returned: a throwing fn leaves the highest token unchanged.
    e.highest.store(token, std::memory_order_release);
    result.status = fence_status::applied;
    result.highest_token = token;
    return result;
  }

  /// apply() for a holder of one permit of a semaphore (docs/fencing.md, "Semaphores"): the highest token is
  /// kept per (resource, slot), since the N holders of a key's N permits write at once, each with its own
  /// token. A stale holder of slot s is refused; the other slots' holders are untouched. Slot 0 is the
  /// resource itself, so a lock's holder (slot 0) and a semaphore's slot 0 share one highest token (tokens
  /// come from one counter: the order is meaningful). Slot s > 0 is kept under slot_resource(resource, s).
  /// Errors and thread-safety as apply(resource, token, fn).
  template <class Fn>
  requires std::invocable<Fn&>
  auto apply(std::string_view resource, fence f, Fn&& fn)
      -> fence_result<std::remove_cvref_t<std::invoke_result_t<Fn&>>> {
    if (f.slot == 0) return apply(resource, f.token, std::forward<Fn>(fn));
    return apply(slot_resource(resource, f.slot), f.token, std::forward<Fn>(fn));
  }

  /// check() for a permit holder: whether apply(resource, f, fn) would run now. Advisory, as check().
  fence_check check(std::string_view resource, fence f) const {
    if (f.slot == 0) return check(resource, f.token);
    return check(slot_resource(resource, f.slot), f.token);
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
  };

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
