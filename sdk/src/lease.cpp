// SPDX-License-Identifier: Apache-2.0
#include "baton/lease.hpp"

#include "lease_core.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/multiple_exceptions.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <new>

namespace baton {
namespace asio = boost::asio;

namespace detail {
namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// Release with retries on transport errors and 503s; the protocol makes every retry safe. A release whose
// reply was lost, or answered 503 storage_unavailable, may have freed the lock: the retry then finds it
// already_free.
asio::awaitable<release_reply> release_with_retries(std::shared_ptr<lease_core> c) {
  auto& cs = *c->client;
  auto r = co_await with_retries(
      c->client, cs.config.retry.max_attempts,
      [&] { return cs.backend->release(c->key, c->owner, c->token, cs.config.request_timeout); },
      no_retry_hook);
  if (r.ec == error::request_timeout) r.ec = error::release_timeout;
  co_return r;
}

// An Asio strand's last copy unlinks its state from the context's strand service when it is destroyed, so a
// strand that outlives its execution context cannot be destroyed at all (the service is gone). A client and
// its leases may outlive their io_context (docs/design.md, "Shutdown and lifetime"): when the context shuts
// down while the client lives, one copy of the client's strand is kept for the life of the process, so the
// client's and its leases' copies only drop a count. That costs a few hundred bytes per client that outlives
// its context; a client destroyed first (the usual order) costs nothing. The list is reachable from a static,
// so leak checkers do not report it.
void keep_strand_forever(const asio::any_io_executor& strand) {
  static std::mutex mu;
  static auto* kept = new std::vector<asio::any_io_executor>;
  std::lock_guard lk(mu);
  kept->push_back(strand);
}

// Tells clients when their io_context shuts down (its destructor runs this before destroying anything).
class context_watch final : public asio::execution_context::service {
 public:
  static asio::execution_context::id id;
  explicit context_watch(asio::execution_context& ctx) : asio::execution_context::service(ctx) {}

  void add(const std::shared_ptr<client_shared>& s) {
    std::lock_guard lk(mu_);
    std::erase_if(clients_, [](const auto& w) { return w.expired(); });
    clients_.push_back(s);
  }

 private:
  void shutdown() override {
    std::vector<std::weak_ptr<client_shared>> clients;
    {
      std::lock_guard lk(mu_);
      clients.swap(clients_);
    }
    for (auto& w : clients)
      if (auto s = w.lock()) s->context_shutdown();
  }

  std::mutex mu_;
  std::vector<std::weak_ptr<client_shared>> clients_;
};
asio::execution_context::id context_watch::id;

}  // namespace

void watch_context(const std::shared_ptr<client_shared>& s) {
  auto& ctx = asio::query(s->ex, asio::execution::context);
  asio::use_service<context_watch>(ctx).add(s);
}

void client_shared::context_shutdown() {
  context_gone.store(true, std::memory_order_release);
  // Sockets and timers must go while their services exist: after this, the backend holds none.
  if (backend) backend->close();
  // The manual clock's waits are this context's pending operations: destroyed with it, as Asio destroys
  // its timers' (their frames hold leases, which hold this state and the clock).
  if (manual) manual->drop_waits();
  // The renewals' index holds the leases, which hold this state: let go of them, and of the timer, while
  // its service exists.
  renewals.drop_all();
  keep_strand_forever(ex);
}

void client_shared::track(const std::shared_ptr<lease_core>& c) {
  std::lock_guard lk(live_mu_);
  if (live_.size() >= prune_at_) {
    std::erase_if(live_, [](const auto& w) { return w.expired(); });
    prune_at_ = std::max<std::size_t>(64, live_.size() * 2);
  }
  live_.push_back(c);
}

bool client_shared::holds(const std::string& key, std::uint64_t token) {
  for (auto& c : tracked())
    if (c->key == key && c->token == token && c->state.load() == lease_state::active) return true;
  return false;
}

std::vector<std::shared_ptr<lease_core>> client_shared::tracked() {
  std::lock_guard lk(live_mu_);
  std::vector<std::shared_ptr<lease_core>> out;
  for (auto& w : live_)
    if (auto c = w.lock()) out.push_back(std::move(c));
  return out;
}

lease_core::lease_core(std::shared_ptr<client_shared> c, std::string k, std::string o, std::uint64_t t,
                       lease_options opts, clock::time_point sent)
    : client(std::move(c)),
      key(std::move(k)),
      owner(std::move(o)),
      token(t),
      options{opts.ttl, opts.effective_renew_every()},
      fsm(lease_fsm::timing::from(opts, client->config.retry), sent, client->rng()),
      value(opts.value.str()) {
  deadline_ticks.store(fsm.deadline().time_since_epoch().count());
}

lease_state lease_core::observed_state() const {
  const lease_clock::time_point deadline(
      lease_clock::duration(deadline_ticks.load(std::memory_order_acquire)));
  return detail::observed_state(state.load(std::memory_order_acquire), deadline, client->now());
}

void lease_core::publish() {
  deadline_ticks.store(fsm.deadline().time_since_epoch().count(), std::memory_order_release);
  auto s = fsm.state();
  // Not active any more: nothing left to watch, and a release must not read as a loss.
  if (s != lease_state::active) watch.reset();
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
  on_state_change.wake_all();
}

void lease_core::start() {
  // A loss the server shows (the etcd backend's watch: the key deleted or written over) ends the lease at
  // once rather than at the next renew.
  watch = client->backend->watch_loss(key, owner, token, [weak = weak_from_this()](std::string_view reason) {
    auto self = weak.lock();
    if (!self) return;
    self->fsm.on_lost("server shows the lease is gone: " + std::string(reason));
    self->publish();
    self->stop();
  });
  client->renewals.start(shared_from_this());
}

void lease_core::stop() {
  client->renewals.stop(*this);
}

std::shared_ptr<release_op> lease_core::begin_release(bool by_holder, milliseconds guard_wait) {
  if (release && !release->done) return release;
  if (release && !release->reply.ec) {
    // Released already: nothing is sent, counted or reported again, and this caller learns the lock is free.
    auto again = std::make_shared<release_op>();
    again->done = true;
    again->reply = release->reply;
    if (again->reply.outcome == release_outcome::released)
      again->reply.outcome = release_outcome::already_free;
    return again;
  }
  fsm.on_released();
  publish();  // not active any more: with_lease cancels its work now
  stop();
  release = std::make_shared<release_op>();
  asio::co_spawn(
      client->ex,
      [self = shared_from_this(), op = release, by_holder, guard_wait]() -> asio::awaitable<void> {
        // The guarded work was cancelled by publish(); when asked, let it end before the server frees the
        // lock, so that nothing it does lands after the release.
        if (guard_wait.count() > 0 && self->guarded.load() > 0) {
          timer t(*self->client, self->client->now() + guard_wait);
          while (self->guarded.load() > 0 && self->client->now() < t.expiry()) {
            wakeup_list::registration reg(self->on_guard_end, &t);
            co_await t.async_wait(use_tuple);
          }
        }
        auto r = co_await release_with_retries(self);
        op->reply = r;
        op->done = true;
        if (!r.ec && r.outcome != release_outcome::not_owner) {
          self->client->releases.fetch_add(1, std::memory_order_relaxed);
          if (by_holder) self->client->emit(lease_event::kind::released, self->key, self->token);
        }
        op->on_done.wake_all();
      },
      asio::detached);
  return release;
}

asio::awaitable<void> wait_state(std::shared_ptr<lease_core> c, bool or_released) {
  for (;;) {
    const auto s = c->fsm.state();
    if (s == lease_state::lost || (or_released && s == lease_state::released)) co_return;
    if (BATON_CANCELLED()) throw exception(make_error_code(asio::error::operation_aborted));
    timer t(*c->client, timer::time_point::max());
    wakeup_list::registration reg(c->on_state_change, &t);
    co_await t.async_wait(use_tuple);  // woken by publish() on a change of state, or cancelled by our caller
  }
}

asio::awaitable<release_reply> await_release(std::shared_ptr<lease_core> c, release_ticket ticket) {
  if (!*ticket) *ticket = c->begin_release(true);
  auto op = *ticket;
  while (!op->done) {
    timer t(*c->client, timer::time_point::max());
    wakeup_list::registration reg(op->on_done, &t);
    co_await t.async_wait(use_tuple);
  }
  co_return op->reply;
}

void rethrow_as_baton_exception(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const exception&) {
    throw;
  } catch (const asio::multiple_exceptions& m) {
    rethrow_as_baton_exception(m.first_exception());
  } catch (const boost::system::system_error& x) {
    throw exception(x.code(), {});
  }
}

boost::system::error_code to_error_code(const std::exception_ptr& e, std::string* diag) {
  if (!e) return {};
  try {
    std::rethrow_exception(e);
  } catch (const asio::multiple_exceptions& x) {
    return to_error_code(x.first_exception(), diag);
  } catch (const exception& x) {
    if (diag) *diag = x.diagnostic();
    return x.code();
  } catch (const boost::system::system_error& x) {
    return x.code();
  } catch (const std::bad_alloc&) {
    return make_error_code(boost::system::errc::not_enough_memory);
  } catch (...) {
    return make_error_code(boost::system::errc::io_error);
  }
}

namespace {

// co_await co_spawn(ex, op, use_awaitable), with the caller's cancellation relayed (co_spawn_relayed).
asio::awaitable<void> relayed(const asio::any_io_executor& ex, asio::awaitable<void> op) {
  return asio::async_initiate<const asio::use_awaitable_t<>&, void(std::exception_ptr)>(
      [ex](auto handler, asio::awaitable<void> o) { co_spawn_relayed(ex, std::move(o), std::move(handler)); },
      asio::use_awaitable, std::move(op));
}

}  // namespace

asio::awaitable<void> until_lost(const lease& l) {
  auto c = l.core_;
  if (!c) throw exception(error::empty_handle);
  std::exception_ptr failure;
  try {
    co_await relayed(c->client->ex, honouring_any_cancellation(wait_state(c, false)));
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) rethrow_as_baton_exception(failure);
}

asio::awaitable<void> until_inactive(const lease& l) {
  auto c = l.core_;
  if (!c) throw exception(error::empty_handle);
  std::exception_ptr failure;
  try {
    co_await relayed(c->client->ex, honouring_any_cancellation(wait_state(c, true)));
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) rethrow_as_baton_exception(failure);
}

guarded_work::guarded_work(const lease& l) : core_(l.core_) {
  if (core_) core_->guarded.fetch_add(1);
}

guarded_work::~guarded_work() {
  if (!core_ || core_->guarded.fetch_sub(1) != 1) return;
  auto& cs = *core_->client;
  if (cs.context_gone.load(std::memory_order_acquire)) return;
  asio::post(cs.ex, [c = std::move(core_)] { c->on_guard_end.wake_all(); });
}

// Each attempt is sent only while the lease is active here: a holder past its local deadline may already be
// deposed, and its write must not race the next holder's (the server would refuse it anyway).
asio::awaitable<std::uint64_t> write_record(std::shared_ptr<lease_core> c, std::string value) {
  auto cs = c->client;
  if (c->fsm.state() == lease_state::released)
    throw exception(error::invalid_config, "this lease was released: only a live holder writes the record");
  auto attempt = [&]() -> asio::awaitable<record_write_reply> {
    if (c->observed_state() != lease_state::active) {
      record_write_reply lost;
      lost.ec = error::lease_lost;
      lost.diagnostic = "the lease is no longer active: the record was not written";
      co_return lost;
    }
    co_return co_await cs->backend->write_record(c->key, c->owner, c->token, value,
                                                 cs->config.request_timeout);
  };
  auto r = co_await with_retries(cs, cs->config.retry.max_attempts, attempt, no_retry_hook);
  if (!r.ec) co_return r.version;
  if (r.ec == asio::error::operation_aborted)
    throw exception(make_error_code(asio::error::operation_aborted));
  if (r.ec == error::lease_lost && !r.lost_reason.empty())
    throw exception(error::lease_lost,
                    "record write refused: the server no longer holds this lease (" + r.lost_reason + ")");
  throw exception(r.ec, r.diagnostic);
}

lease make_lease(std::shared_ptr<lease_core> core) {
  return lease(std::move(core));
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
  auto& cs = *core_->client;
  // After the io_context's shutdown there is nothing to post to (and its executor may be dangling).
  if (cs.context_gone.load(std::memory_order_acquire)) return;
  // May run on any thread: hand the abandoned lease to its executor.
  asio::post(cs.ex, [c = std::move(core_)] {
    if (c->fsm.state() == lease_state::active)
      c->begin_release(true);
    else
      c->stop();
  });
}

void lease::detach() {
  core();  // throws for an empty handle
  auto c = std::move(core_);
  asio::dispatch(c->client->ex, [c] {
    c->fsm.on_released();  // no request: the server keeps the lease until its TTL
    c->publish();
    c->stop();
  });
}

const detail::lease_core& lease::core() const {
  if (!core_)
    throw exception(error::empty_handle, "this lease handle is empty (default-constructed or moved from)");
  return *core_;
}

const std::string& lease::key() const {
  return core().key;
}
const std::string& lease::owner() const {
  return core().owner;
}
std::string lease::value() const {
  const auto& c = core();
  std::lock_guard lk(c.reason_mu);
  return c.value;
}
std::uint64_t lease::token() const {
  return core().token;
}

std::uint32_t lease::slot() const {
  return core().slot;
}

std::uint32_t lease::permits() const {
  return core().permits;
}

fence lease::fence() const {
  const auto& c = core();
  return baton::fence{c.token, c.slot, c.permits};
}

lease_state lease::state() const {
  return core().observed_state();
}

lease_clock::time_point lease::deadline() const {
  return lease_clock::time_point(
      lease_clock::duration(core().deadline_ticks.load(std::memory_order_acquire)));
}

bool lease::active() const {
  return state() == lease_state::active;
}

std::string lease::loss_reason() const {
  const auto& c = core();
  {
    std::lock_guard lk(c.reason_mu);
    if (!c.reason.empty()) return c.reason;
  }
  return state() == lease_state::lost ? "deadline passed without a confirmed renew" : std::string();
}

detail::release_ticket lease::begin_release(const std::shared_ptr<detail::lease_core>& core) {
  if (!core) return nullptr;
  // Started here, not in the operation's initiation: an awaitable token initiates only when awaited, a
  // co_await in a cancelled coroutine throws before that, and the release must happen anyway.
  auto ticket = std::make_shared<std::shared_ptr<detail::release_op>>();
  asio::dispatch(core->client->ex, [c = core, ticket] {
    if (!*ticket) *ticket = c->begin_release(true);
  });
  return ticket;
}

namespace {
constexpr const char* empty_lease = "this lease handle is empty";
}

void lease::start_release(std::shared_ptr<detail::lease_core> core, detail::release_ticket ticket,
                          std::string* diag,
                          asio::any_completion_handler<void(boost::system::error_code, release_outcome)> h) {
  if (!core) {
    if (diag) *diag = empty_lease;
    return detail::fail_at_start(std::move(h), make_error_code(error::empty_handle), {}, release_outcome{});
  }
  auto ex = core->client->ex;
  // Not bound to the handler's cancellation slot: the release runs to its end.
  asio::co_spawn(ex, detail::await_release(core, std::move(ticket)),
                 [h = std::move(h), ex, diag](std::exception_ptr e, release_reply r) mutable {
                   auto ec = e ? detail::to_error_code(e, diag) : r.ec;
                   if (!e && r.ec && diag) *diag = std::move(r.diagnostic);
                   detail::complete(std::move(h), ex, ec, r.outcome);
                 });
}

void lease::start_write_record(
    std::shared_ptr<detail::lease_core> core, std::string value, std::string* diag,
    asio::any_completion_handler<void(boost::system::error_code, std::uint64_t)> h) {
  if (!core) {
    if (diag) *diag = empty_lease;
    return detail::fail_at_start(std::move(h), make_error_code(error::empty_handle), {}, std::uint64_t{0});
  }
  auto ex = core->client->ex;
  detail::launch(ex, detail::write_record(core, std::move(value)), diag, std::move(h));
}

void lease::start_wait_lost(std::shared_ptr<detail::lease_core> core, std::string* diag,
                            asio::any_completion_handler<void(boost::system::error_code)> h) {
  if (!core) {
    if (diag) *diag = empty_lease;
    return detail::fail_at_start(std::move(h), make_error_code(error::empty_handle), {});
  }
  auto ex = core->client->ex;
  detail::launch(ex, detail::wait_state(core, true), diag, std::move(h));
}

}  // namespace baton
