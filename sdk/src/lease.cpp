#include "baton/lease.hpp"

#include "lease_core.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cmath>

namespace baton {
namespace asio = boost::asio;

namespace detail {
namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::chrono::microseconds since(clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - t);
}

// Release with retries on transport errors and 503s; the protocol makes every retry safe. A release whose
// reply was lost, or answered 503 storage_unavailable, may have freed the lock: the retry then finds it
// already_free.
asio::awaitable<release_reply> release_with_retries(std::shared_ptr<lease_core> c) {
  auto& cs = *c->client;
  release_reply r;
  for (int attempt = 1;; ++attempt) {
    r = co_await cs.backend->release(c->key, c->owner, c->token, cs.config.request_timeout);
    if (!r.ec || !is_transient(r.ec) || attempt >= cs.config.retry.max_attempts) break;
    asio::steady_timer t(cs.ex, cs.backoff(attempt));
    co_await t.async_wait(use_tuple);
  }
  if (r.ec == error::request_timeout) r.ec = error::release_timeout;
  co_return r;
}

// The renewal task: carries out what the state machine decides, until the lease is no longer active.
asio::awaitable<void> run_renewal(std::shared_ptr<lease_core> c) {
  auto& cs = *c->client;
  for (;;) {
    auto action = c->fsm.poll(clock::now());
    if (action == lease_fsm::action::declare_lost) {
      c->publish();
      co_return;
    }
    if (c->fsm.state() != lease_state::active) co_return;
    if (action == lease_fsm::action::wait) {
      c->wake.expires_at(c->fsm.wake_at());
      auto [ec] = co_await c->wake.async_wait(use_tuple);
      if (ec && (co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none)
        co_return;  // renewal stopped (release or abandonment)
      continue;
    }
    // Renew. The request may take at most until the local deadline: an answer after it is worthless.
    const auto sent = clock::now();
    auto budget = std::min<clock::duration>(cs.config.request_timeout, c->fsm.deadline() - sent);
    // The deadline is watched on its own while the request runs: the loss is declared at that instant (and
    // guarded work cancelled), not when the request's own, millisecond-rounded, timeout expires. A "renewed"
    // that still arrives afterwards finds the lease lost and hands it back below.
    auto watch = std::make_shared<asio::steady_timer>(cs.ex, c->fsm.deadline());
    watch->async_wait([c, watch](boost::system::error_code ec) {
      if (!ec && c->fsm.poll(clock::now()) == lease_fsm::action::declare_lost) c->publish();
    });
    auto r = co_await cs.backend->renew(c->key, c->owner, c->token, c->options.ttl,
                                        std::chrono::ceil<milliseconds>(budget));
    watch->cancel();
    if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) co_return;
    const auto now = clock::now();
    if (!r.ec) {
      if (c->fsm.on_renew_ok(sent, now) == lease_fsm::renew_outcome::too_late) {
        // The server extended a lease we already gave up locally: hand it back so nobody waits for its TTL.
        c->publish();
        c->release_in_background();
        co_return;
      }
      auto latency = since(sent);
      cs.renews.fetch_add(1, std::memory_order_relaxed);
      cs.last_renew_us.store(latency.count(), std::memory_order_relaxed);
      for (auto m = cs.max_renew_us.load(); latency.count() > m && !cs.max_renew_us.compare_exchange_weak(m, latency.count());) {
      }
      cs.emit(lease_event::kind::renewed, c->key, c->token, latency);
      c->publish();
    } else if (r.ec == error::lease_lost) {
      c->fsm.on_renew_refused(r.lost_reason.empty() ? r.diagnostic : r.lost_reason);
      c->publish();
      co_return;
    } else {
      // No definite answer (no reply, a 503 storage_unavailable, another server error): the server may or
      // may not have extended its lease, so the local deadline stays where the last confirmed renew put it
      // and the lease may still be ours. Retry while time remains.
      c->fsm.on_renew_failed(now);
      cs.renew_retries.fetch_add(1, std::memory_order_relaxed);
      std::string why = r.ec == error::request_timeout ? "renew_timeout" : r.ec.message();
      cs.emit(lease_event::kind::renew_retry, c->key, c->token, since(sent), why);
      c->publish();
    }
  }
}

}  // namespace

clock::duration client_shared::backoff(int attempt) {
  auto base = std::chrono::duration<double, std::nano>(config.retry.initial_backoff);
  auto cap = std::chrono::duration<double, std::nano>(config.retry.max_backoff);
  auto b = std::min(cap, base * std::pow(2.0, std::max(0, attempt - 1)));
  std::uniform_real_distribution<double> u(1.0 - config.retry.jitter, 1.0);
  return std::chrono::duration_cast<clock::duration>(b * u(rng));
}

lease_core::lease_core(std::shared_ptr<client_shared> c, std::string k, std::string o, std::uint64_t t,
                       lease_options opts, clock::time_point sent)
    : client(std::move(c)),
      key(std::move(k)),
      owner(std::move(o)),
      token(t),
      options(opts),
      fsm(lease_fsm::timing::from(opts, client->config.retry), sent, client->rng()),
      wake(client->ex) {
  deadline_ticks.store(fsm.deadline().time_since_epoch().count());
}

void lease_core::publish() {
  deadline_ticks.store(fsm.deadline().time_since_epoch().count(), std::memory_order_release);
  auto s = fsm.state();
  auto previous = state.exchange(s, std::memory_order_acq_rel);
  if (s == lease_state::active || previous == s) return;
  if (s == lease_state::lost) {
    {
      std::lock_guard lk(reason_mu);
      reason = fsm.loss_reason();
    }
    client->losses.fetch_add(1, std::memory_order_relaxed);
    client->emit(lease_event::kind::lost, key, token, {}, fsm.loss_reason());
  }
  for (auto* t : lost_waiters) t->cancel();
}

void lease_core::start() {
  renewal_running = true;
  asio::co_spawn(client->ex, run_renewal(shared_from_this()),
                 asio::bind_cancellation_slot(stop_renewal.slot(), [self = shared_from_this()](std::exception_ptr) {
                   self->renewal_running = false;
                 }));
}

void lease_core::stop() {
  if (renewal_running) stop_renewal.emit(asio::cancellation_type::terminal);
  wake.cancel();
}

void lease_core::release_in_background() {
  if (release_started) return;
  release_started = true;
  auto self = shared_from_this();
  asio::co_spawn(
      client->ex,
      [self]() -> asio::awaitable<void> {
        self->stop();
        auto r = co_await release_with_retries(self);
        if (!r.ec && r.outcome != release_outcome::not_owner) self->client->releases.fetch_add(1);
      },
      asio::detached);
}

}  // namespace detail

lease::lease(std::shared_ptr<detail::lease_core> core) : core_(std::move(core)) {}
lease::lease(lease&&) noexcept = default;
lease& lease::operator=(lease&& other) noexcept {
  if (this != &other) {
    lease old(std::move(*this));  // releases the lease this handle held, like destruction
    core_ = std::move(other.core_);
  }
  return *this;
}

lease::~lease() {
  if (!core_) return;
  // May run on any thread: hand the abandoned lease to its executor.
  auto ex = core_->client->ex;
  asio::post(ex, [c = std::move(core_)] {
    if (c->fsm.state() == lease_state::active) {
      c->fsm.on_released();
      c->publish();
      c->release_in_background();
    } else {
      c->stop();
    }
  });
}

const std::string& lease::key() const { return core_->key; }
const std::string& lease::owner() const { return core_->owner; }
std::uint64_t lease::token() const { return core_->token; }
lease_state lease::state() const { return core_->state.load(std::memory_order_acquire); }

std::chrono::steady_clock::time_point lease::deadline() const {
  return detail::clock::time_point(detail::clock::duration(core_->deadline_ticks.load(std::memory_order_acquire)));
}

bool lease::active() const { return state() == lease_state::active && detail::clock::now() < deadline(); }

std::string lease::loss_reason() const {
  std::lock_guard lk(core_->reason_mu);
  return core_->reason;
}

asio::awaitable<void> lease::wait_lost() {
  auto c = core_;
  if (c->fsm.state() != lease_state::active) co_return;
  asio::steady_timer t(c->client->ex, asio::steady_timer::time_point::max());
  auto it = c->lost_waiters.insert(c->lost_waiters.end(), &t);
  co_await t.async_wait(detail::use_tuple);  // cancelled by publish() on loss, or by our caller
  c->lost_waiters.erase(it);
  if (c->fsm.state() != lease_state::active) co_return;
  throw boost::system::system_error(asio::error::operation_aborted);
}

asio::awaitable<release_outcome> lease::release() {
  auto c = core_;
  c->fsm.on_released();
  c->publish();
  c->stop();
  c->release_started = true;
  auto r = co_await detail::release_with_retries(c);
  if (r.ec) throw exception(r.ec, r.diagnostic);
  if (r.outcome != release_outcome::not_owner) {
    c->client->releases.fetch_add(1, std::memory_order_relaxed);
    c->client->emit(lease_event::kind::released, c->key, c->token);
  }
  co_return r.outcome;
}

}  // namespace baton
