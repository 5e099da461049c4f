// SPDX-License-Identifier: Apache-2.0
#pragma once
// The acquire state machine: what one acquisition (client::async_acquire, async_try_acquire, a campaign) does
// after each answer — grant, report the holder, long-poll, back off and try again, or give up — and when the
// last try's grant must be handed back. Pure, like lease_fsm: no I/O, every call takes `now`, a seeded random
// source for the backoff. client.cpp carries out its actions; the unit tests drive it by hand. Cancellation
// and shutdown end an acquisition from outside; what then happens to a request on its way, or to a grant
// that arrives as the client shuts down, is decided here too (on_cancelled_in_flight, on_grant).

#include "baton/backend.hpp"
#include "baton/config.hpp"
#include "baton/detail/lease_fsm.hpp"

#include <boost/system/error_code.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace baton::detail {

class acquire_fsm {
 public:
  /// `try_once`: async_try_acquire (a "held" answer ends it with the holder; transient failures are retried
  /// up to retry.max_attempts). `wait`: async_acquire (a "held" answer long-polls until the lock is free;
  /// transient failures are retried until `give_up`, or for ever without one).
  enum class mode { try_once, wait };

  struct action {
    enum class kind {
      send_acquire,  // send one acquire request (the same owner every time)
      long_poll,     // wait for a change of holder: get(key, wait_for_change{poll_token, wait})
      pause,         // wait `wait`, then on_pause_done()
      granted,       // done: the last acquire was granted
      held,          // done (try_once): held by `holder`
      fail,          // done: `ec` with `message`
    };
    kind what = kind::send_acquire;
    clock::duration wait{};
    std::uint64_t poll_token = 0;
    holder_info holder;
    boost::system::error_code ec;
    std::string message;
    /// fail: the last try's outcome is unknown and it may have been granted: release what it got, in the
    /// background, conditional on owner and token.
    bool abandon = false;
    /// pause: a failed try is being retried (counted, and reported as lease_event::kind::acquire_retry with
    /// `ec`).
    bool retry = false;
  };

  /// `give_up`: mode wait only; the first try always happens (a zero wait means one try).
  acquire_fsm(mode m, std::string key, std::optional<clock::time_point> give_up, const retry_policy& retry,
              std::uint64_t seed);

  action start() const { return {}; }
  /// The answer to send_acquire (an error code of a transport failure included).
  action on_acquire(const acquire_reply& r, clock::time_point now);
  /// The answer to long_poll.
  action on_poll(const get_reply& g, clock::time_point now);
  /// After pause.
  action on_pause_done() const { return {}; }
  /// The caller was cancelled while an acquire request was on its way: the acquisition ends with
  /// operation_aborted, and what that request is granted is handed back when its answer comes (abandon).
  action on_cancelled_in_flight() const;
  /// An acquire was granted: `granted`; or, when the client has begun to shut down meanwhile, the grant is
  /// handed back at once (abandon) and the acquisition ends with error::shut_down.
  action on_grant(bool shutting_down) const;

  /// Failed tries and polls in a row so far (the backoff's attempt number).
  int failures() const { return failures_; }

 private:
  // A failed try (`unsure`: its outcome is unknown) or long-poll: pause and retry, or give up.
  action back_off(boost::system::error_code ec, std::string diagnostic, clock::time_point now, bool unsure);

  mode mode_;
  std::string key_;
  std::optional<clock::time_point> give_up_;
  retry_policy retry_;
  jitter_rng rng_;
  int failures_ = 0;
};

/// An acquire's "no answer in time" under its own name (error::acquire_timeout); other codes unchanged.
boost::system::error_code as_acquire_error(boost::system::error_code ec);

}  // namespace baton::detail
