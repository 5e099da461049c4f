// SPDX-License-Identifier: Apache-2.0
#include "baton/detail/lease_fsm.hpp"

#include <algorithm>
#include <cmath>

namespace baton::detail {

clock::duration backoff(const retry_policy& policy, int attempt, jitter_rng& rng) {
  using ns = std::chrono::duration<double, std::nano>;
  const ns base(policy.initial_backoff), cap(policy.max_backoff);
  const ns b = std::min(cap, base * std::pow(2.0, std::max(0, attempt - 1)));
  std::uniform_real_distribution<double> u(1.0 - policy.jitter, 1.0);
  return std::chrono::duration_cast<clock::duration>(b * u(rng));
}

lease_fsm::lease_fsm(timing t, clock::time_point acquire_sent, std::uint64_t seed) : t_(t), rng_(seed) {
  deadline_ = acquire_sent + t_.ttl - t_.safety_margin;
  next_renew_ = std::min(acquire_sent + jittered_period(), deadline_);
}

clock::duration lease_fsm::jittered_period() {
  std::uniform_real_distribution<double> u(1.0 - t_.jitter, 1.0 + t_.jitter);
  auto period = std::chrono::duration<double, std::nano>(t_.renew_every) * u(rng_);
  return std::chrono::duration_cast<clock::duration>(period);
}

lease_fsm::action lease_fsm::poll(clock::time_point now) {
  if (state_ != lease_state::active) return action::wait;
  if (past_deadline(deadline_, now)) {
    // No confirmed renew before the deadline: give the lease up now, even though no answer said so.
    state_ = lease_state::lost;
    loss_reason_ = "deadline passed without a confirmed renew";
    return action::declare_lost;
  }
  return now >= next_renew_ ? action::renew : action::wait;
}

lease_fsm::renew_outcome lease_fsm::on_renew_ok(clock::time_point sent, clock::time_point now) {
  if (state_ != lease_state::active) return renew_outcome::too_late;
  if (past_deadline(deadline_, now)) {
    state_ = lease_state::lost;
    loss_reason_ = "renew confirmed only after the local deadline";
    return renew_outcome::too_late;
  }
  // Counted from when the renew was sent: the server extended the lease after that instant.
  deadline_ = std::max(deadline_, sent + t_.ttl - t_.safety_margin);
  next_renew_ = std::min(sent + jittered_period(), deadline_);
  failures_ = 0;
  return renew_outcome::renewed;
}

void lease_fsm::on_renew_refused(std::string reason) {
  if (state_ != lease_state::active) return;
  state_ = lease_state::lost;
  loss_reason_ = "server refused the renew: " + reason;
}

void lease_fsm::on_renew_failed(clock::time_point now) {
  if (state_ != lease_state::active) return;
  ++failures_;
  if (past_deadline(deadline_, now)) {
    state_ = lease_state::lost;
    loss_reason_ = "deadline passed without a confirmed renew";
    return;
  }
  // Retry after the backoff, but never later than halfway to the deadline, so a short outage still leaves
  // several tries before the lease must be given up.
  auto remaining = deadline_ - now;
  next_renew_ = now + std::min(backoff(t_.retry, failures_, rng_), remaining / 2);
}

void lease_fsm::on_released() {
  if (state_ == lease_state::active) state_ = lease_state::released;
}

void lease_fsm::on_lost(std::string reason) {
  if (state_ != lease_state::active) return;
  state_ = lease_state::lost;
  loss_reason_ = std::move(reason);
}

}  // namespace baton::detail
