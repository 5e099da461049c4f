// SPDX-License-Identifier: Apache-2.0
#include "lock_server_health.hpp"

#include "baton/client.hpp"
#include "baton/error.hpp"

#include <boost/asio/error.hpp>

namespace baton::agent {
namespace asio = boost::asio;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

bool is_lock_server_failure(const boost::system::error_code& ec) {
  return ec && ec != error::held && ec != error::lease_lost && ec != asio::error::operation_aborted;
}

std::optional<lock_server_notice> lock_server_health::failed(std::chrono::steady_clock::time_point now,
                                                             std::chrono::system_clock::time_point wall,
                                                             std::string error) {
  ++status_.errors;
  ++failures_;
  status_.last_error = std::move(error);
  if (!down_since_) {
    down_since_ = now;
    status_.reachable = false;
    status_.unreachable_since = wall;
    last_logged_ = now;
    return lock_server_notice{lock_server_notice::kind::unreachable, status_.last_error, failures_, {}};
  }
  if (now - *last_logged_ < log_every_) return std::nullopt;
  last_logged_ = now;
  return lock_server_notice{lock_server_notice::kind::still_unreachable, status_.last_error, failures_,
                            duration_cast<milliseconds>(now - *down_since_)};
}

std::optional<lock_server_notice> lock_server_health::answered(std::chrono::steady_clock::time_point now) {
  status_.reachable = true;
  status_.unreachable_since.reset();
  if (!down_since_) return std::nullopt;
  lock_server_notice n{lock_server_notice::kind::reachable, status_.last_error, failures_,
                       duration_cast<milliseconds>(now - *down_since_)};
  down_since_.reset();
  last_logged_.reset();
  failures_ = 0;
  return n;
}

namespace {

// Forwards every call and reports its outcome; the lease code cannot tell it from the real backend.
class observed_backend final : public forwarding_backend {
 public:
  observed_backend(std::shared_ptr<backend> inner,
                   std::function<void(const boost::system::error_code&, const std::string&)> observe)
      : forwarding_backend(std::move(inner)), observe_(std::move(observe)) {}

  // Each request is observed; everything else (the loss watch, close, TLS reload) is forwarded by the base.
  asio::awaitable<acquire_reply> acquire(std::string key, std::string owner, milliseconds ttl,
                                         std::string value, milliseconds timeout) override {
    co_return seen(co_await forwarding_backend::acquire(std::move(key), std::move(owner), ttl,
                                                        std::move(value), timeout));
  }
  // The SDK's waiting acquires are queued acquires against a server that offers them: observed alike.
  asio::awaitable<acquire_reply> acquire_queued(std::string key, std::string owner, milliseconds ttl,
                                                std::string value, milliseconds wait,
                                                milliseconds timeout) override {
    co_return seen(co_await forwarding_backend::acquire_queued(std::move(key), std::move(owner), ttl,
                                                               std::move(value), wait, timeout));
  }
  asio::awaitable<renew_reply> renew(std::string key, std::string owner, std::uint64_t token,
                                     milliseconds ttl, milliseconds timeout) override {
    co_return seen(co_await forwarding_backend::renew(std::move(key), std::move(owner), token, ttl, timeout));
  }
  // One batch is one observation: the first entry without an answer (a transport error) if any, else the
  // batch answered.
  asio::awaitable<std::vector<renew_reply>> renew_batch(std::span<const renew_entry> entries,
                                                        milliseconds timeout) override {
    auto replies = co_await forwarding_backend::renew_batch(entries, timeout);
    renew_reply summary;
    for (const auto& r : replies)
      if (r.ec && r.ec != error::lease_lost) {
        summary = r;
        break;
      }
    observe_(summary.ec, summary.diagnostic);
    co_return replies;
  }
  asio::awaitable<release_reply> release(std::string key, std::string owner, std::uint64_t token,
                                         milliseconds timeout) override {
    co_return seen(co_await forwarding_backend::release(std::move(key), std::move(owner), token, timeout));
  }
  asio::awaitable<get_reply> get(std::string key, std::optional<wait_for_change> wait,
                                 milliseconds timeout) override {
    co_return seen(co_await forwarding_backend::get(std::move(key), wait, timeout));
  }

 private:
  template <class Reply>
  Reply seen(Reply r) {
    observe_(r.ec, r.diagnostic);
    return r;
  }

  std::function<void(const boost::system::error_code&, const std::string&)> observe_;
};

}  // namespace

std::shared_ptr<backend> observe_backend(
    std::shared_ptr<backend> inner,
    std::function<void(const boost::system::error_code&, const std::string&)> observe) {
  return std::make_shared<observed_backend>(std::move(inner), std::move(observe));
}

}  // namespace baton::agent
