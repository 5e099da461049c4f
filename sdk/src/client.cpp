#include "baton/client.hpp"

#include "lease_core.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>

namespace baton {
namespace asio = boost::asio;
using detail::clock;

namespace {

std::string random_suffix(std::mt19937_64& rng) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

boost::system::error_code as_acquire_error(boost::system::error_code ec) {
  return ec == error::request_timeout ? make_error_code(error::acquire_timeout) : ec;
}

asio::awaitable<bool> cancelled() {
  co_return (co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none;
}

}  // namespace

struct client::impl {
  std::shared_ptr<detail::client_shared> shared;

  // One acquire request; on success builds the lease (renewal started).
  asio::awaitable<acquire_reply> try_once(const std::string& key, const std::string& owner, const lease_options& o,
                                          std::optional<lease>& out) {
    auto& s = *shared;
    const auto sent = clock::now();  // the lease is counted from here: the server started it later
    auto r = co_await s.backend->acquire(key, owner, o.ttl, s.config.request_timeout);
    if (!r.ec) {
      auto core = std::make_shared<detail::lease_core>(shared, key, owner, r.token, o, sent);
      core->start();
      s.acquires.fetch_add(1, std::memory_order_relaxed);
      s.emit(lease_event::kind::acquired, key, r.token,
             std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - sent));
      out.emplace(lease(std::move(core)));
    } else if (r.ec == error::held) {
      s.acquire_refusals.fetch_add(1, std::memory_order_relaxed);
      s.emit(lease_event::kind::acquire_refused, key, r.holder.token);
    }
    co_return r;
  }

  asio::awaitable<void> sleep(clock::duration d) {
    asio::steady_timer t(shared->ex, d);
    co_await t.async_wait(asio::use_awaitable);  // throws operation_aborted when cancelled
  }
};

client::client(asio::any_io_executor ex, client_config config)
    : client(ex, config, make_backend(ex, config)) {}

client::client(asio::any_io_executor ex, client_config config, std::shared_ptr<backend> b)
    : impl_(std::make_shared<impl>()) {
  config.validate();
  auto s = std::make_shared<detail::client_shared>();
  s->ex = std::move(ex);
  s->identity = config.identity.empty() ? default_identity() : config.identity;
  s->config = std::move(config);
  s->backend = std::move(b);
  s->rng.seed(std::random_device{}() ^ static_cast<std::uint64_t>(clock::now().time_since_epoch().count()));
  impl_->shared = std::move(s);
}

client::~client() {
  if (impl_ && impl_->shared->backend) impl_->shared->backend->close();
}

asio::awaitable<acquire_result> client::try_acquire(std::string key, lease_options options) {
  options.validate();
  auto& s = *impl_->shared;
  // One owner string for this acquisition and all its retries: a retry after a lost reply, or after a 503
  // storage_unavailable (which may come after the grant reached the server), is then the same owner to the
  // server, which grants it a newer token instead of refusing it as "held".
  const std::string owner = s.identity + "#" + random_suffix(s.rng);
  for (int attempt = 1;; ++attempt) {
    std::optional<lease> got;
    auto r = co_await impl_->try_once(key, owner, options, got);
    if (got) co_return acquire_result{std::move(got), {}};
    if (r.ec == error::held) co_return acquire_result{std::nullopt, r.holder};
    if (r.ec == asio::error::operation_aborted) throw boost::system::system_error(r.ec);
    if (!is_transient(r.ec) || attempt >= s.config.retry.max_attempts)
      throw exception(as_acquire_error(r.ec), r.diagnostic);
    co_await impl_->sleep(s.backoff(attempt));
  }
}

asio::awaitable<lease> client::acquire(std::string key, lease_options options,
                                       std::optional<milliseconds> wait_timeout) {
  options.validate();
  auto& s = *impl_->shared;
  const std::string owner = s.identity + "#" + random_suffix(s.rng);
  const auto give_up = wait_timeout ? clock::now() + *wait_timeout : clock::time_point::max();
  int failures = 0;
  std::string unsure;  // why the last acquire's outcome is unknown, if it is
  for (;;) {
    if (co_await cancelled()) throw boost::system::system_error(asio::error::operation_aborted);
    if (clock::now() >= give_up)
      throw exception(error::wait_timeout,
                      unsure.empty()
                          ? "lock \"" + key + "\" still held"
                          : "the last acquire of \"" + key + "\" got no definite answer (" + unsure +
                                "); it may have been granted, and is then held until its TTL passes");
    std::optional<lease> got;
    auto r = co_await impl_->try_once(key, owner, options, got);
    if (got) co_return std::move(*got);
    if (r.ec == asio::error::operation_aborted) throw boost::system::system_error(r.ec);
    unsure = r.ec == error::held ? std::string() : as_acquire_error(r.ec).message();
    if (r.ec == error::held) {
      // Wait on the server's long-poll: it answers the moment the holder releases or its lease expires.
      auto left = std::chrono::duration_cast<milliseconds>(give_up - clock::now());
      auto wait = std::clamp(left, milliseconds{1}, milliseconds{30'000});
      auto g = co_await s.backend->get(key, wait_for_change{r.holder.token, wait}, wait + s.config.request_timeout);
      if (g.ec == asio::error::operation_aborted) throw boost::system::system_error(g.ec);
      if (!g.ec) {
        failures = 0;
        continue;
      }
      // The long-poll failed (too_many_waiters included): back off like any failed try. The "held" answer
      // does not reset the backoff, so a server out of waiter slots sees this client less and less often.
      r.ec = g.ec;
      r.diagnostic = g.diagnostic;
    }
    if (!is_transient(r.ec)) throw exception(as_acquire_error(r.ec), r.diagnostic);
    ++failures;
    auto pause = std::min<clock::duration>(s.backoff(failures), give_up - clock::now());
    if (pause > clock::duration::zero()) co_await impl_->sleep(pause);
  }
}

asio::awaitable<std::optional<holder_info>> client::get(std::string key) {
  auto& s = *impl_->shared;
  for (int attempt = 1;; ++attempt) {
    auto r = co_await s.backend->get(key, std::nullopt, s.config.request_timeout);
    if (!r.ec) co_return r.holder;
    if (r.ec == asio::error::operation_aborted) throw boost::system::system_error(r.ec);
    if (!is_transient(r.ec) || attempt >= s.config.retry.max_attempts) throw exception(r.ec, r.diagnostic);
    co_await impl_->sleep(s.backoff(attempt));
  }
}

const std::string& client::identity() const { return impl_->shared->identity; }
const client_config& client::config() const { return impl_->shared->config; }
const std::shared_ptr<backend>& client::get_backend() const { return impl_->shared->backend; }

client_stats client::stats() const {
  auto& s = *impl_->shared;
  client_stats out;
  out.acquires = s.acquires.load();
  out.acquire_refusals = s.acquire_refusals.load();
  out.renews = s.renews.load();
  out.renew_retries = s.renew_retries.load();
  out.losses = s.losses.load();
  out.releases = s.releases.load();
  out.last_renew_latency = std::chrono::microseconds(s.last_renew_us.load());
  out.max_renew_latency = std::chrono::microseconds(s.max_renew_us.load());
  return out;
}

}  // namespace baton
