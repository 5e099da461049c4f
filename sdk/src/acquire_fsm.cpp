// SPDX-License-Identifier: Apache-2.0
#include "baton/detail/acquire_fsm.hpp"

#include "baton/error.hpp"

#include <boost/asio/error.hpp>

#include <algorithm>

namespace baton::detail {

namespace {
// The longest long-poll: well under batond's 60 s cap.
constexpr clock::duration longest_poll = std::chrono::seconds(30);
}  // namespace

boost::system::error_code as_acquire_error(boost::system::error_code ec) {
  return ec == error::request_timeout ? make_error_code(error::acquire_timeout) : ec;
}

acquire_fsm::acquire_fsm(mode m, std::string key, std::optional<clock::time_point> give_up,
                         const retry_policy& retry, std::uint64_t seed)
    : mode_(m), key_(std::move(key)), give_up_(give_up), retry_(retry), rng_(seed) {}

acquire_fsm::action acquire_fsm::on_acquire(const acquire_reply& r, clock::time_point now) {
  action a;
  if (!r.ec) {
    a.what = action::kind::granted;
    return a;
  }
  if (r.ec == error::held) {
    if (mode_ == mode::try_once) {
      a.what = action::kind::held;
      a.holder = r.holder;
      return a;
    }
    const bool delayed = r.holder.lock_delay_remaining > milliseconds{0};
    if (give_up_ && now >= *give_up_) {
      a.what = action::kind::fail;
      a.ec = make_error_code(error::wait_timeout);
      a.message = "lock \"" + key_ + (delayed ? "\" still in lock-delay" : "\" still held");
      return a;
    }
    if (delayed) {
      // The key is in lock-delay (docs/protocol.md): free of any holder, so a long-poll would answer at
      // once. Nothing changes before the delay ends: pause that long (up to the give-up instant), then try
      // again.
      a.what = action::kind::pause;
      a.wait = r.holder.lock_delay_remaining;
      if (give_up_) a.wait = std::clamp<clock::duration>(*give_up_ - now, clock::duration::zero(), a.wait);
      return a;
    }
    // The server's long-poll answers the moment the holder releases or its lease expires. A "held" answer
    // does not reset the backoff: a server out of waiter slots sees this client less and less often.
    a.what = action::kind::long_poll;
    a.poll_token = r.holder.token;
    const auto left = give_up_ ? *give_up_ - now : longest_poll;
    a.wait = std::clamp<clock::duration>(left, std::chrono::milliseconds(1), longest_poll);
    return a;
  }
  if (!is_transient(r.ec)) {
    a.what = action::kind::fail;
    a.ec = as_acquire_error(r.ec);
    a.message = r.diagnostic;
    return a;
  }
  return back_off(r.ec, r.diagnostic, now, /*unsure=*/true);
}

acquire_fsm::action acquire_fsm::on_cancelled_in_flight() const {
  action a;
  a.what = action::kind::fail;
  a.ec = make_error_code(boost::asio::error::operation_aborted);
  a.abandon = true;
  return a;
}

acquire_fsm::action acquire_fsm::on_grant(bool shutting_down) const {
  action a;
  if (!shutting_down) {
    a.what = action::kind::granted;
    return a;
  }
  a.what = action::kind::fail;
  a.ec = make_error_code(error::shut_down);
  a.message = "the client is shut down: no new leases";
  a.abandon = true;
  return a;
}

acquire_fsm::action acquire_fsm::on_poll(const get_reply& g, clock::time_point now) {
  if (!g.ec) {
    // The holder changed (or the poll's wait ran out): try again at once.
    failures_ = 0;
    return {};
  }
  if (!is_transient(g.ec)) {
    action a;
    a.what = action::kind::fail;
    a.ec = g.ec;
    a.message = g.diagnostic;
    return a;
  }
  // The long-poll failed (too_many_waiters included): back off like a failed try. The last try's answer was
  // "held", so nothing can have been granted.
  return back_off(g.ec, g.diagnostic, now, /*unsure=*/false);
}

acquire_fsm::action acquire_fsm::back_off(boost::system::error_code ec, std::string diagnostic,
                                          clock::time_point now, bool unsure) {
  action a;
  ++failures_;
  const bool out_of_tries =
      mode_ == mode::try_once ? failures_ >= retry_.max_attempts : give_up_ && now >= *give_up_;
  if (out_of_tries) {
    // Giving up without a definite answer: the last try may have been granted. Hand it back.
    a.what = action::kind::fail;
    a.abandon = unsure;
    if (!unsure) {
      a.ec = make_error_code(error::wait_timeout);
      a.message = "lock \"" + key_ + "\" still held";
    } else if (mode_ == mode::try_once) {
      a.ec = as_acquire_error(ec);
      a.message = std::move(diagnostic);
    } else {
      a.ec = make_error_code(error::wait_timeout);
      a.message = "the last acquire of \"" + key_ + "\" got no definite answer (" +
                  as_acquire_error(ec).message() + "); if it was granted, it is released in the background";
    }
    return a;
  }
  a.what = action::kind::pause;
  a.retry = true;
  a.ec = ec;
  a.wait = backoff(retry_, failures_, rng_);
  if (give_up_) a.wait = std::max(clock::duration::zero(), std::min(a.wait, *give_up_ - now));
  return a;
}

}  // namespace baton::detail
