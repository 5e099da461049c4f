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
class observed_backend final : public backend, public tls_reloadable {
 public:
  observed_backend(std::shared_ptr<backend> inner,
                   std::function<void(const boost::system::error_code&, const std::string&)> observe)
      : inner_(std::move(inner)), observe_(std::move(observe)) {}

  // Both forms go to the same form of `inner_`: the leader's campaign publishes a value, which the base
  // class's default would refuse.
  asio::awaitable<acquire_reply> acquire(std::string key, std::string owner, milliseconds ttl, std::string value,
                                         milliseconds timeout) override {
    co_return seen(
        co_await inner_->acquire(std::move(key), std::move(owner), ttl, std::move(value), timeout));
  }
  asio::awaitable<acquire_reply> acquire(std::string key, std::string owner, milliseconds ttl,
                                         milliseconds timeout) override {
    co_return seen(co_await inner_->acquire(std::move(key), std::move(owner), ttl, timeout));
  }
  asio::awaitable<renew_reply> renew(std::string key, std::string owner, std::uint64_t token,
                                     milliseconds ttl, milliseconds timeout) override {
    co_return seen(co_await inner_->renew(std::move(key), std::move(owner), token, ttl, timeout));
  }
  asio::awaitable<release_reply> release(std::string key, std::string owner, std::uint64_t token,
                                         milliseconds timeout) override {
    co_return seen(co_await inner_->release(std::move(key), std::move(owner), token, timeout));
  }
  asio::awaitable<get_reply> get(std::string key, std::optional<wait_for_change> wait,
                                 milliseconds timeout) override {
    co_return seen(co_await inner_->get(std::move(key), wait, timeout));
  }
  // Not a request: nothing to observe, but the lease code's loss watch must reach the wrapped backend.
  std::unique_ptr<loss_watch> watch_loss(const std::string& key, const std::string& owner,
                                         std::uint64_t token,
                                         std::function<void(std::string_view)> on_lost) override {
    return inner_->watch_loss(key, owner, token, std::move(on_lost));
  }
  void close() override { inner_->close(); }

  // client::reload_tls() reaches the wrapped backend, whose connections hold the TLS settings.
  tls_reload_result reload_tls(std::optional<tls_config> tls) override {
    if (auto* reloadable = dynamic_cast<tls_reloadable*>(inner_.get()))
      return reloadable->reload_tls(std::move(tls));
    tls_reload_result out;
    out.ec = error::invalid_config;
    out.diagnostic = "the lock server's backend cannot read TLS files again";
    return out;
  }

 private:
  template <class Reply>
  Reply seen(Reply r) {
    observe_(r.ec, r.diagnostic);
    return r;
  }

  std::shared_ptr<backend> inner_;
  std::function<void(const boost::system::error_code&, const std::string&)> observe_;
};

}  // namespace

std::shared_ptr<backend> observe_backend(
    std::shared_ptr<backend> inner,
    std::function<void(const boost::system::error_code&, const std::string&)> observe) {
  return std::make_shared<observed_backend>(std::move(inner), std::move(observe));
}

}  // namespace baton::agent
