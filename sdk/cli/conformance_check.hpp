// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the two ways of running `baton conformance` share: how a check reports its outcome, the bounds on
// long-poll wake-ups, and the restart phase's command and state. conformance.cpp speaks raw HTTP to the
// server; backend_conformance.cpp speaks through baton::backend to servers that are not HTTP (etcd).

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace baton::cli {

struct check_failed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A check that cannot run against this server or with these options; never counted as passed.
struct check_skipped : std::runtime_error {
  using std::runtime_error::runtime_error;
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
};

// Bounds of the restart phase: the command's own run, then the server's return.
inline constexpr auto restart_command_bound = std::chrono::seconds(60);
inline constexpr auto restart_return_bound = std::chrono::seconds(30);

// Runs `command` through /bin/sh, its stdout sent to our stderr so the table on stdout stays clean. Returns
// why it failed, or nothing.
std::optional<std::string> run_restart_command(const std::string& command);

}  // namespace baton::cli
