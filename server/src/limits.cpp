// SPDX-License-Identifier: Apache-2.0
#include "limits.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace baton::server {

void validate(const limits_options& o) {
  if (o.max_connections < 1) throw std::invalid_argument("--max-connections must be at least 1");
  if (o.max_connections_per_address < 1)
    throw std::invalid_argument("--max-connections-per-address must be at least 1");
  if (o.unauthenticated_timeout.count() < 1)
    throw std::invalid_argument("--unauthenticated-timeout-ms must be at least 1");
  if (o.max_locks < 1) throw std::invalid_argument("--max-locks must be at least 1");
  if (o.max_records < 1) throw std::invalid_argument("--max-records must be at least 1");
  if (o.max_header_bytes < 1024) throw std::invalid_argument("--max-header-bytes must be at least 1024");
  if (o.max_body_bytes < 1024) throw std::invalid_argument("--max-body-bytes must be at least 1024");
  if (!(o.rate_per_second >= 0) || !std::isfinite(o.rate_per_second))
    throw std::invalid_argument("--rate-limit must be 0 (off) or a positive number of requests per second");
  if (!(o.rate_burst >= 0) || !std::isfinite(o.rate_burst))
    throw std::invalid_argument("--rate-burst must be 0 (the rate limit, at least 1) or a positive number");
  if (o.max_waiters_per_key < 1) throw std::invalid_argument("--max-waiters-per-key must be at least 1");
  if (o.max_waiters < 1) throw std::invalid_argument("--max-waiters must be at least 1");
}

token_bucket::token_bucket(double rate, double burst, clock::time_point now)
    : rate_(rate), burst_(std::max(1.0, burst)), tokens_(burst_), last_(now) {}

double token_bucket::level(clock::time_point now) const {
  // A clock that went backwards (it cannot with steady_clock, but tests may) adds nothing.
  double elapsed = std::max(0.0, std::chrono::duration<double>(now - last_).count());
  return std::min(burst_, tokens_ + elapsed * rate_);
}

std::optional<std::chrono::milliseconds> token_bucket::take(clock::time_point now) {
  tokens_ = level(now);
  if (now > last_) last_ = now;
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return std::nullopt;
  }
  double seconds = (1.0 - tokens_) / rate_;
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1000.0)));
}

bool token_bucket::full(clock::time_point now) const {
  return level(now) >= burst_;
}

rate_limiter::rate_limiter(double rate, double burst, std::size_t max_clients)
    : rate_(rate),
      burst_(burst > 0 ? burst : std::max(1.0, rate)),
      max_clients_(std::max<std::size_t>(1, max_clients)) {}

std::optional<std::chrono::milliseconds> rate_limiter::admit(std::string_view client, clock::time_point now) {
  if (rate_ <= 0) return std::nullopt;
  std::lock_guard lk(mu_);
  auto it = buckets_.find(std::string(client));
  if (it == buckets_.end()) {
    // The scan is linear, so it runs at most once a second: a flood of new addresses cannot make every
    // request pay for it.
    if (buckets_.size() >= max_clients_ && (!last_scan_ || now - *last_scan_ >= std::chrono::seconds(1))) {
      last_scan_ = now;
      std::erase_if(buckets_, [now](const auto& entry) { return entry.second.full(now); });
    }
    if (buckets_.size() >= max_clients_) {
      if (!overflow_) overflow_.emplace(rate_, burst_, now);
      return overflow_->take(now);
    }
    it = buckets_.emplace(std::string(client), token_bucket(rate_, burst_, now)).first;
  }
  return it->second.take(now);
}

std::size_t rate_limiter::tracked() const {
  std::lock_guard lk(mu_);
  return buckets_.size();
}

std::string retry_after_seconds(std::chrono::milliseconds wait) {
  auto s = (std::max<std::int64_t>(wait.count(), 1) + 999) / 1000;
  return std::to_string(s);
}

bool address_connections::take(const std::string& address) {
  std::lock_guard lk(mu_);
  auto& n = open_[address];
  if (n >= max_) return false;
  ++n;
  return true;
}

void address_connections::release(const std::string& address) {
  std::lock_guard lk(mu_);
  auto it = open_.find(address);
  if (it != open_.end() && --it->second == 0) open_.erase(it);
}

}  // namespace baton::server
