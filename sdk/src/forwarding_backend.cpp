// SPDX-License-Identifier: Apache-2.0
#include "baton/backend.hpp"
#include "baton/error.hpp"

namespace baton {
namespace asio = boost::asio;

// Each request is the wrapped backend's own awaitable, returned as it is: no coroutine frame of our own.
asio::awaitable<acquire_reply> forwarding_backend::acquire(std::string key, std::string owner,
                                                           milliseconds ttl, std::string value,
                                                           milliseconds timeout) {
  return inner_->acquire(std::move(key), std::move(owner), ttl, std::move(value), timeout);
}

asio::awaitable<renew_reply> forwarding_backend::renew(std::string key, std::string owner,
                                                       std::uint64_t token, milliseconds ttl,
                                                       milliseconds timeout) {
  return inner_->renew(std::move(key), std::move(owner), token, ttl, timeout);
}

asio::awaitable<release_reply> forwarding_backend::release(std::string key, std::string owner,
                                                           std::uint64_t token, milliseconds timeout) {
  return inner_->release(std::move(key), std::move(owner), token, timeout);
}

asio::awaitable<acquire_reply> forwarding_backend::acquire_queued(std::string key, std::string owner,
                                                                  milliseconds ttl, std::string value,
                                                                  milliseconds wait, milliseconds timeout) {
  return inner_->acquire_queued(std::move(key), std::move(owner), ttl, std::move(value), wait, timeout);
}

asio::awaitable<acquire_reply> forwarding_backend::acquire_with(acquire_request request) {
  if (request.permits > 1) return inner_->acquire_with(std::move(request));
  return backend::acquire_with(std::move(request));
}

asio::awaitable<acquire_reply> forwarding_backend::acquire_with_delay(std::string key, std::string owner,
                                                                      milliseconds ttl, std::string value,
                                                                      milliseconds lock_delay,
                                                                      std::optional<milliseconds> wait,
                                                                      milliseconds timeout) {
  return inner_->acquire_with_delay(std::move(key), std::move(owner), ttl, std::move(value), lock_delay, wait,
                                    timeout);
}

asio::awaitable<std::vector<renew_reply>> forwarding_backend::renew_batch(
    std::span<const renew_entry> entries, milliseconds timeout) {
  return inner_->renew_batch(entries, timeout);
}

asio::awaitable<proclaim_reply> forwarding_backend::proclaim(std::string key, std::string owner,
                                                             std::uint64_t token, std::string value,
                                                             milliseconds timeout) {
  return inner_->proclaim(std::move(key), std::move(owner), token, std::move(value), timeout);
}

asio::awaitable<record_write_reply> forwarding_backend::write_record(std::string key, std::string owner,
                                                                     std::uint64_t token, std::string value,
                                                                     milliseconds timeout) {
  return inner_->write_record(std::move(key), std::move(owner), token, std::move(value), timeout);
}

asio::awaitable<list_reply> forwarding_backend::list(std::string prefix, std::string after, std::size_t limit,
                                                     milliseconds timeout) {
  return inner_->list(std::move(prefix), std::move(after), limit, timeout);
}

asio::awaitable<break_reply> forwarding_backend::break_lease(std::string key,
                                                             std::optional<std::uint64_t> token,
                                                             milliseconds timeout) {
  return inner_->break_lease(std::move(key), token, timeout);
}

asio::awaitable<record_read_reply> forwarding_backend::read_record(std::string key, milliseconds timeout) {
  return inner_->read_record(std::move(key), timeout);
}

asio::awaitable<get_reply> forwarding_backend::get(std::string key, std::optional<wait_for_change> wait,
                                                   milliseconds timeout) {
  return inner_->get(std::move(key), wait, timeout);
}

std::unique_ptr<loss_watch> forwarding_backend::watch_loss(const std::string& key, const std::string& owner,
                                                           std::uint64_t token,
                                                           std::function<void(std::string_view)> on_lost) {
  return inner_->watch_loss(key, owner, token, std::move(on_lost));
}

void forwarding_backend::close() {
  inner_->close();
}

tls_reload_result forwarding_backend::reload_tls(std::optional<tls_config> tls) {
  return inner_->reload_tls(std::move(tls));
}

}  // namespace baton
