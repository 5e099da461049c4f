// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the two ways of running `baton conformance` share: how a check reports its outcome, the bounds on
// long-poll wake-ups, and the restart phase's command and state. http_*_checks.cpp speak raw HTTP to the
// server; backend_conformance.cpp speaks through baton::backend to servers that are not HTTP (etcd).

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace baton::cli {

// The names of the checks both modes make (http_*_checks.cpp's tables, backend_conformance.cpp's), spelled
// once: the CLI prints them, and on_backend::find() pairs the two modes by them.
namespace check_name {
inline constexpr const char* concurrent_acquires = "concurrent acquires have one winner";
inline constexpr const char* held_names_holder = "acquire while held is refused naming the holder";
inline constexpr const char* reacquire_larger_token = "same-owner re-acquire gets a larger token";
inline constexpr const char* reacquire_refreshes_expiry = "same-owner re-acquire sets a new expiry";
inline constexpr const char* renew_wrong_owner = "renew is refused for a wrong owner";
inline constexpr const char* renew_wrong_token = "renew is refused for a wrong token";
inline constexpr const char* renew_expired = "renew is refused for an expired lease";
inline constexpr const char* renew_extends = "renew extends the lease past its first TTL";
inline constexpr const char* shorter_requests_keep_expiry =
    "a shorter renew or re-acquire does not shorten a lease";
inline constexpr const char* release_conditional = "release is conditional on owner and token";
inline constexpr const char* superseded_token_refused = "a superseded token can neither renew nor release";
inline constexpr const char* release_idempotent = "release is idempotent";
inline constexpr const char* tokens_increase = "tokens increase across release and expiry";
inline constexpr const char* expiry_on_time = "expiry frees the lock on time";
inline constexpr const char* never_expires_early = "a lease is held for its TTL from the acquire's sending";
inline constexpr const char* long_ttl_held = "a 1-hour lease is held";
inline constexpr const char* long_poll_release = "long-poll answers within 250 ms of a release";
inline constexpr const char* long_poll_expiry = "long-poll answers within 250 ms of an expiry";
inline constexpr const char* long_poll_stale_token = "long-poll with a stale token answers at once";
inline constexpr const char* value_round_trip = "a lease's value is published, replaced and kept";
inline constexpr const char* renew_batch_mixed = "renew batch: each entry is answered as a single renew";
inline constexpr const char* renew_batch_superseded = "renew batch: a superseded token is refused";
inline constexpr const char* proclaim_replaces_value =
    "proclaim replaces the value and keeps token and expiry";
inline constexpr const char* proclaim_refused =
    "proclaim is refused for a stale token, another owner or a free key";
inline constexpr const char* proclaim_wakes_value_poll = "a long-poll naming the value answers at a proclaim";
inline constexpr const char* restart_keeps_proclaim = "restart: a proclaimed value is kept";
inline constexpr const char* record_written =
    "lock record: the holder writes it, versions count, the lease stays";
inline constexpr const char* record_refused =
    "lock record: a write by another owner or an old token is refused, nothing changed";
inline constexpr const char* record_outlives_lease =
    "lock record: it outlives release and expiry, and the old holder is refused";
inline constexpr const char* record_missing = "lock record: a key without one reads as none";
inline constexpr const char* restart_keeps_record = "restart: a lock record is kept";
inline constexpr const char* lock_delay_after_expiry =
    "lock-delay: an expired lease keeps its key for the delay, a release does not";
inline constexpr const char* restart_keeps_held_lease = "restart: a held lease keeps its owner and token";
inline constexpr const char* restart_keeps_release = "restart: a released lock stays released";
inline constexpr const char* restart_tokens_increase =
    "restart: new tokens are larger than every token before";
inline constexpr const char* semaphore_at_most_n =
    "semaphores: at most N permits, each in the lowest free slot";
inline constexpr const char* semaphore_same_holder =
    "semaphores: the same holder again keeps its slot with a larger token";
inline constexpr const char* semaphore_mismatch =
    "semaphores: another count while the key is held is permits_mismatch";
inline constexpr const char* semaphore_release = "semaphores: a release names its permit by token";
}  // namespace check_name

struct check_failed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A check that cannot run against this server or with these options; never counted as passed. `why` is the
// short reason the summary counts skips by ("not advertised", "no --restart-command"), `about` what it was
// missing (a feature's name; the summary lists them), and the check's line shows "why: detail".
struct check_skipped : std::runtime_error {
  explicit check_skipped(const std::string& why, const std::string& detail = {}, std::string about = {})
      : std::runtime_error(detail.empty() ? why : why + ": " + detail), why(why), about(std::move(about)) {}
  std::string why;
  std::string about;
};

inline void expect(bool ok, const std::string& reason) {
  if (!ok) throw check_failed(reason);
}

// The keys of one run: conformance/<random>/<check>, so runs never meet.
std::string run_prefix();

inline std::string ms(std::chrono::steady_clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

// docs/protocol.md, get and long-poll: an answer within 250 ms of the change (or at once when the token
// already differs).
inline constexpr auto wake_bound = std::chrono::milliseconds(250);
// How long past the bound a long-poll is given before it counts as not answered (no need to wait longer).
inline constexpr auto wake_give_up = std::chrono::milliseconds(1500);

// One try of a bounded wake-up: how long the answer took after the event, or why it was late.
struct wake_try {
  std::chrono::steady_clock::duration took{};
  std::optional<std::string> late;
};

// A loaded machine can miss such a bound once: a bound is tried until it held twice or failed twice, so a
// server that is late every time fails and one that is late once in a while does not. The PASS line shows the
// times measured, so a margin that shrinks on some machine is seen before it fails.
class on_time_tally {
 public:
  bool done() const { return on_time_ == 2 || late_ == 2; }
  void add(const wake_try& t);
  // The times measured; throws check_failed when the bound was missed twice.
  std::string result() const;

 private:
  int on_time_ = 0, late_ = 0;
  std::string why_, took_;
};

// Runs `attempt` until the tally is done; any other fault throws check_failed at once.
std::string twice_on_time(const std::function<wake_try()>& attempt);

// What the restart phase left for the restart checks: a lease held across the restart, a lock released
// before it, and the largest token any answer carried before it. `error` says why there is nothing to check.
struct restart_state {
  std::string error;
  std::string held_key, held_owner;
  std::int64_t held_token = 0;
  std::string released_key;
  std::int64_t max_token_before = 0;
  /// The value proclaimed for the held lease before the restart; nullopt when the server (or backend) does
  /// not support proclaim, and the restart check of it is skipped.
  std::optional<std::string> proclaimed_value;
  /// The lock record written for the held key before the restart; nullopt without feature lock_record.
  std::optional<std::string> record_value;
};

// Bounds of the restart phase: the command's own run, then the server's return.
inline constexpr auto restart_command_bound = std::chrono::seconds(60);
inline constexpr auto restart_return_bound = std::chrono::seconds(30);

// Runs `command` through /bin/sh, its stdout sent to our stderr so the table on stdout stays clean. Returns
// why it failed, or nothing.
std::optional<std::string> run_restart_command(const std::string& command);

}  // namespace baton::cli
