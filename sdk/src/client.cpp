// SPDX-License-Identifier: Apache-2.0
#include "baton/client.hpp"

#include "lease_core.hpp"

#include "baton/detail/acquire_fsm.hpp"
#include "baton/testing.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <random>

namespace baton {
namespace asio = boost::asio;
using detail::client_shared;
using detail::clock;
using detail::lease_core;
using detail::timer;
using shared_ptr_t = std::shared_ptr<client_shared>;

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::string random_suffix(detail::jitter_rng& rng) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

[[noreturn]] void throw_cancelled() {
  throw exception(make_error_code(asio::error::operation_aborted));
}

void refuse_if_shut_down(const client_shared& s) {
  if (s.shutting_down) throw exception(error::shut_down, "the client is shut down: no new leases");
}

// Completes when shutdown() begins; throws operation_aborted when cancelled first.
asio::awaitable<void> until_shutdown(shared_ptr_t s) {
  while (!s->shutting_down) {
    if (BATON_CANCELLED()) throw_cancelled();
    timer t(*s, timer::time_point::max());
    detail::wakeup_list::registration reg(s->on_shutdown, &t);
    co_await t.async_wait(use_tuple);
  }
}

// `op`, unless the client shuts down first (then error::shut_down).
template <class T>
asio::awaitable<T> unless_shut_down(shared_ptr_t s, asio::awaitable<T> op) {
  using namespace asio::experimental::awaitable_operators;
  refuse_if_shut_down(*s);
  auto r = co_await (std::move(op) || until_shutdown(s));
  if (r.index() == 1) refuse_if_shut_down(*s);
  if constexpr (!std::is_void_v<T>) co_return std::get<0>(std::move(r));
}

asio::awaitable<void> sleep(shared_ptr_t s, clock::duration d) {
  timer t(*s, d);
  co_await t.async_wait(asio::use_awaitable);  // throws operation_aborted when cancelled
}

// Counts a background task (an acquire request, a clean-up) that shutdown() waits for.
class in_flight_guard {
 public:
  explicit in_flight_guard(shared_ptr_t s) : s_(std::move(s)) { ++s_->in_flight; }
  ~in_flight_guard() {
    --s_->in_flight;
    s_->on_idle.wake_all();
  }
  in_flight_guard(const in_flight_guard&) = delete;
  in_flight_guard& operator=(const in_flight_guard&) = delete;

 private:
  shared_ptr_t s_;
};

// After its caller gave up, an acquire request that may have been granted: release what it got, so that no
// lock stays held by an owner nobody speaks for. Bounded by the retry policy.
asio::awaitable<void> abandon(shared_ptr_t s, std::string key, std::string owner, acquire_reply reply) {
  in_flight_guard counted(s);
  auto& cs = *s;
  std::uint64_t token = 0;
  if (!reply.ec || reply.token != 0) {
    token = reply.token;
  } else if (is_transient(reply.ec)) {
    // No answer (or a 503): the grant may have happened, or may still happen as the server works through the
    // request. Look for it a few times, spaced by the backoff.
    for (int attempt = 1; attempt <= cs.config.retry.max_attempts && token == 0; ++attempt) {
      auto g = co_await cs.backend->get(key, std::nullopt, cs.config.request_timeout);
      // Never a lease this client holds: with a caller-chosen owner, a later acquisition may hold the key.
      // On a key of several permits the grant may be any of them.
      if (!g.ec && g.holder && g.holder->owner == owner && !cs.holds(key, g.holder->token))
        token = g.holder->token;
      for (const auto& h : g.ec ? std::vector<holder_info>{} : g.holders)
        if (token == 0 && h.owner == owner && !cs.holds(key, h.token)) token = h.token;
      if (token == 0 && attempt < cs.config.retry.max_attempts) {
        timer t(cs, cs.backoff(attempt));
        co_await t.async_wait(use_tuple);
      }
    }
  }
  if (token == 0) {
    if (!reply.ec || is_transient(reply.ec))
      cs.emit(lease_event::kind::acquire_abandoned, key, 0, {}, "no grant found for the abandoned acquire");
    co_return;
  }
  auto r = co_await detail::with_retries(
      s, cs.config.retry.max_attempts,
      [&] { return cs.backend->release(key, owner, token, cs.config.request_timeout); },
      detail::no_retry_hook);
  cs.emit(lease_event::kind::acquire_abandoned, key, token, {},
          r.ec ? "release of the abandoned grant failed: " + r.ec.message() : "abandoned grant released");
}

// One acquire request, shielded from the caller's cancellation: once sent it runs to its answer (bounded by
// request_timeout) in its own coroutine, and if the caller has gone by then, what it was granted is released.
struct pending_acquire {
  bool done = false;
  bool abandoned = false;
  acquire_reply reply;
  detail::wakeup_list on_done;
};

// `queue_wait`: a queued acquire (backend::acquire_queued) that may wait that long at the server.
// `permits`: 1 for a lock, more for a semaphore's permit.
asio::awaitable<acquire_reply> try_once(shared_ptr_t s, const detail::acquire_fsm& fsm, std::string key,
                                        std::string owner, lease_options o, std::uint32_t permits,
                                        std::optional<lease>& out,
                                        std::optional<milliseconds> queue_wait = std::nullopt) {
  auto& cs = *s;
  refuse_if_shut_down(cs);
  if (BATON_CANCELLED()) throw_cancelled();
  const auto sent = cs.now();  // the lease is counted from here: the server started it later
  auto p = std::make_shared<pending_acquire>();
  // A queued request may wait at the server for long: when its caller goes (cancellation, shutdown) it is
  // cancelled, which closes its connection and so gives its place up. A plain one runs to its answer.
  auto leave = std::make_shared<asio::cancellation_signal>();
  asio::co_spawn(
      cs.ex,
      // `leave` is kept by the request: its slot is bound to the request's coroutine for the whole run.
      [s, p, key, owner, ttl = o.ttl, value = o.value.str(), lock_delay = o.lock_delay, queue_wait, permits,
       leave, counted = std::make_shared<in_flight_guard>(s)]() -> asio::awaitable<void> {
        const auto timeout = queue_wait ? *queue_wait + s->config.request_timeout : s->config.request_timeout;
        // One call for every kind of acquire: the backend's default sends a lock's to the calls a backend
        // written before semaphores implements (a lock-delay only to acquire_with_delay, which such a
        // backend refuses).
        acquire_request q{key, owner, ttl, value, lock_delay, queue_wait, permits, timeout};
        p->reply = co_await s->backend->acquire_with(std::move(q));
        if (queue_wait) {
          if (p->reply.ec == asio::error::operation_aborted) {
            // Left while it waited: the server may have granted it just before (and answered into the
            // closed connection). Its outcome is unknown, so the clean-up looks for a grant.
            p->reply.ec = error::connection_failed;
            p->reply.diagnostic = "the queued acquire was left while it waited";
          }
        }
        p->done = true;
        p->on_done.wake_all();
        if (p->abandoned) co_await abandon(s, key, owner, p->reply);
      },
      asio::bind_cancellation_slot(leave->slot(), asio::detached));
  while (!p->done) {
    timer t(cs, timer::time_point::max());
    detail::wakeup_list::registration reg(p->on_done, &t);
    std::optional<detail::wakeup_list::registration> on_shutdown;
    if (queue_wait) on_shutdown.emplace(cs.on_shutdown, &t);
    co_await t.async_wait(use_tuple);
    if (p->done) break;
    if (BATON_CANCELLED()) {
      const auto a = fsm.on_cancelled_in_flight();
      p->abandoned = a.abandon;  // the request's own coroutine hands back what it gets
      if (queue_wait) leave->emit(asio::cancellation_type::terminal);
      throw exception(a.ec, a.message);
    }
    if (queue_wait && cs.shutting_down) {
      p->abandoned = true;
      leave->emit(asio::cancellation_type::terminal);
      refuse_if_shut_down(cs);
    }
  }
  auto r = p->reply;
  // A grant the backend refused (one without the lock-delay asked for) is handed back at once.
  if (r.ec && r.token != 0) asio::co_spawn(cs.ex, abandon(s, key, owner, r), asio::detached);
  if (!r.ec) {
    // Granted while the client shuts down: handed back at once, and async_shutdown() waits for that.
    const auto a = fsm.on_grant(cs.shutting_down);
    if (a.what == detail::acquire_fsm::action::kind::fail) {
      if (a.abandon) asio::co_spawn(cs.ex, abandon(s, key, owner, r), asio::detached);
      throw exception(a.ec, a.message);
    }
    // A queued grant's TTL ran from the grant, r.queued after the request arrived: counted from the send
    // time plus that wait, less the clock-rate drift the design allows (2%, docs/design.md).
    const auto start = sent + (r.queued - r.queued / 50);
    auto core = std::make_shared<lease_core>(s, key, owner, r.token, o, start);
    core->slot = r.slot;
    core->permits = permits;
    core->start();
    cs.track(core);
    cs.acquires.fetch_add(1, std::memory_order_relaxed);
    cs.emit(lease_event::kind::acquired, key, r.token,
            std::chrono::duration_cast<std::chrono::microseconds>(cs.now() - sent));
    out.emplace(detail::make_lease(std::move(core)));
  } else if (r.ec == error::held) {
    cs.acquire_refusals.fetch_add(1, std::memory_order_relaxed);
    cs.emit(lease_event::kind::acquire_refused, key, r.holder.token);
  } else if (r.ec == error::permits_mismatch) {
    r.diagnostic = "\"" + key + "\" is in use with " + std::to_string(r.permits) + " permit" +
                   (r.permits == 1 ? " (a lock)" : "s") + "; this acquire asked " + std::to_string(permits) +
                   (r.diagnostic.empty() ? "" : " (" + r.diagnostic + ")");
  }
  co_return r;
}

// The protocol's bound on a key's permits (docs/protocol.md, "Semaphores"); a server may allow fewer.
void validate_permits(std::uint32_t permits) {
  if (permits < 1 || permits > 65535)
    throw exception(error::invalid_config,
                    "permits must be 1 to 65535, not " + std::to_string(permits) + " (baton::semaphore)");
}

std::string owner_for(client_shared& s, const lease_options& o) {
  return o.owner.empty() ? s.identity + "#" + random_suffix(s.rng) : o.owner.str();
}

void count_retry(client_shared& s, const std::string& key, const boost::system::error_code& ec) {
  s.acquire_retries.fetch_add(1, std::memory_order_relaxed);
  s.emit(lease_event::kind::acquire_retry, key, 0, {}, detail::as_acquire_error(ec).message());
}

// Carries out the acquire state machine's actions (baton/detail/acquire_fsm.hpp) for one acquisition:
// async_try_acquire (mode try_once) or async_acquire and a campaign (mode wait). Cancellation and shutdown
// end it from outside; try_once asks the state machine what becomes of a request on its way then, and of a
// grant that arrives as the client shuts down.
asio::awaitable<acquire_result> run_acquisition(shared_ptr_t s, std::string key, lease_options options,
                                                std::uint32_t permits, detail::acquire_fsm::mode mode,
                                                std::optional<milliseconds> wait_timeout) {
  using kind = detail::acquire_fsm::action::kind;
  options.validate();
  validate_permits(permits);
  auto& cs = *s;
  // One owner string for this acquisition and all its retries: a retry after a lost reply, or after a 503
  // storage_unavailable (which may come after the grant reached the server), is then the same owner to the
  // server, which grants it a newer token instead of refusing it as "held".
  const std::string owner = owner_for(cs, options);
  std::optional<clock::time_point> give_up;
  if (wait_timeout) give_up = cs.now() + *wait_timeout;
  detail::acquire_fsm fsm(mode, key, give_up, cs.config.retry, cs.rng());
  acquire_reply last;
  // A lease with a lock-delay (or a semaphore's permit) refused in the queue may be refused for the option,
  // not the queue: this acquisition stops queueing, the client's other ones do not.
  bool queue_refused_here = false;
  for (auto a = fsm.start();;) {
    switch (a.what) {
      case kind::send_acquire:
      case kind::long_poll: {
        // A waiting acquire queues at the server when it offers that (feature acquire_queue): one request
        // waits for the lock and is granted in arrival order, instead of an acquire, a long-poll and a race
        // of acquires at every hand-off. The first try queues too (granted at once when the key is free).
        std::optional<milliseconds> queue_wait;
        if (mode == detail::acquire_fsm::mode::wait && cs.now() >= cs.queue_unsupported_until &&
            !queue_refused_here) {
          // The whole wait in one request, up to 5 minutes: a waiter keeps its place in the queue for that
          // long (the HTTP backend asks batond for at most 30 s at a time; etcd's queue is the client's own).
          const auto left = give_up ? *give_up - cs.now() : clock::duration(std::chrono::minutes(5));
          const auto wait = std::min(std::chrono::ceil<milliseconds>(left), milliseconds(300'000));
          if (wait >= milliseconds(1)) queue_wait = wait;
        }
        if (a.what == kind::send_acquire || queue_wait) {
          std::optional<lease> got;
          last = co_await try_once(s, fsm, key, owner, options, permits, got, queue_wait);
          if (got) co_return acquire_result{std::move(got), {}};
          if (last.ec == asio::error::operation_aborted) throw_cancelled();
          if (!queue_wait || last.ec != error::invalid_config) {
            a = fsm.on_acquire(last, cs.now());
            break;
          }
          // Not offered: wait the way every server can, and ask again after a while (it may be upgraded). A
          // lock-delay's or a semaphore's refusal may be of the option, not of the queue: this acquisition
          // stops queueing, the client's other ones do not.
          if (options.lock_delay > milliseconds{0} || permits > 1)
            queue_refused_here = true;
          else
            cs.queue_unsupported_until = cs.now() + std::chrono::minutes(5);
          if (a.what == kind::send_acquire) break;  // the same action again, as a plain acquire
        }
        const auto wait = std::chrono::ceil<milliseconds>(a.wait);
        auto g = co_await unless_shut_down(
            s, cs.backend->get(key, wait_for_change{a.poll_token, wait}, wait + cs.config.request_timeout));
        if (g.ec == asio::error::operation_aborted) throw_cancelled();
        a = fsm.on_poll(g, cs.now());
        break;
      }
      case kind::pause:
        if (a.retry) count_retry(cs, key, a.ec);
        if (a.wait > clock::duration::zero()) co_await unless_shut_down(s, sleep(s, a.wait));
        a = fsm.on_pause_done();
        break;
      case kind::held:
        co_return acquire_result{std::nullopt, a.holder, last.permits, std::move(last.holders)};
      case kind::fail:
        if (a.abandon) asio::co_spawn(cs.ex, abandon(s, key, owner, last), asio::detached);
        throw exception(a.ec, a.message);
      case kind::granted:
        // try_once makes the lease of a grant, returned above: the state machine never gets to say it.
        throw exception(error::invalid_config, "internal: acquire state machine out of step");
    }
  }
}

asio::awaitable<acquire_result> try_acquire_impl(shared_ptr_t s, std::string key, lease_options options,
                                                 std::uint32_t permits) {
  co_return co_await run_acquisition(std::move(s), std::move(key), options, permits,
                                     detail::acquire_fsm::mode::try_once, std::nullopt);
}

asio::awaitable<lease> acquire_impl(shared_ptr_t s, std::string key, lease_options options,
                                    std::uint32_t permits, std::optional<milliseconds> wait_timeout) {
  auto r = co_await run_acquisition(std::move(s), std::move(key), options, permits,
                                    detail::acquire_fsm::mode::wait, wait_timeout);
  co_return std::move(*r.acquired);
}

asio::awaitable<std::optional<holder_info>> get_impl(shared_ptr_t s, std::string key) {
  auto& cs = *s;
  auto r = co_await detail::with_retries(
      s, cs.config.retry.max_attempts,
      [&] { return cs.backend->get(key, std::nullopt, cs.config.request_timeout); }, detail::no_retry_hook);
  if (!r.ec) co_return r.holder;
  if (r.ec == asio::error::operation_aborted) throw_cancelled();
  throw exception(r.ec, r.diagnostic);
}

asio::awaitable<std::optional<lock_record>> read_record_impl(shared_ptr_t s, std::string key) {
  auto& cs = *s;
  auto r = co_await detail::with_retries(
      s, cs.config.retry.max_attempts,
      [&] { return cs.backend->read_record(key, cs.config.request_timeout); }, detail::no_retry_hook);
  if (!r.ec) co_return r.record;
  if (r.ec == asio::error::operation_aborted) throw_cancelled();
  throw exception(r.ec, r.diagnostic);
}

asio::awaitable<lock_page> list_impl(shared_ptr_t s, std::string prefix, std::string after,
                                     std::size_t limit) {
  auto& cs = *s;
  auto r = co_await detail::with_retries(
      s, cs.config.retry.max_attempts,
      [&] { return cs.backend->list(prefix, after, limit, cs.config.request_timeout); },
      detail::no_retry_hook);
  if (!r.ec) co_return std::move(r.page);
  if (r.ec == asio::error::operation_aborted) throw_cancelled();
  throw exception(r.ec, r.diagnostic);
}

asio::awaitable<holder_info> break_impl(shared_ptr_t s, std::string key, std::uint64_t expected) {
  auto& cs = *s;
  // One try: a retry after a lost answer could break the next holder (without a token), or report not_held
  // for the lease the first try ended.
  const std::optional<std::uint64_t> token = expected ? std::optional(expected) : std::nullopt;
  auto r = co_await cs.backend->break_lease(std::move(key), token, cs.config.request_timeout);
  if (!r.ec) co_return std::move(r.holder);
  if (r.ec == asio::error::operation_aborted) throw_cancelled();
  if (r.ec == error::token_mismatch)
    throw exception(r.ec, r.diagnostic + " (held by " + r.holder.owner + " with token " +
                              std::to_string(r.holder.token) + ")");
  throw exception(r.ec, r.diagnostic);
}

asio::awaitable<void> shutdown_impl(shared_ptr_t s, milliseconds timeout) {
  auto& cs = *s;
  cs.shutting_down = true;
  cs.on_shutdown.wake_all();
  std::vector<std::shared_ptr<detail::release_op>> ops;
  for (auto& c : cs.tracked()) {
    // Its guarded work is cancelled at once and ends before the release is sent (within the timeout).
    if (c->fsm.state() == lease_state::active)
      ops.push_back(c->begin_release(true, timeout));
    else if (c->release && !c->release->done)
      ops.push_back(c->release);  // already on its way: wait for it
  }
  // Then wait for those releases, and for acquire requests still on their way (a grant that arrives now is
  // handed back, see try_once) with their clean-ups.
  timer t(cs, cs.now() + timeout);
  for (;;) {
    bool all_done = std::all_of(ops.begin(), ops.end(), [](const auto& op) { return op->done; });
    if ((all_done && cs.in_flight == 0) || cs.now() >= t.expiry()) break;
    std::vector<std::unique_ptr<detail::wakeup_list::registration>> regs;
    for (auto& op : ops)
      if (!op->done) regs.push_back(std::make_unique<detail::wakeup_list::registration>(op->on_done, &t));
    regs.push_back(std::make_unique<detail::wakeup_list::registration>(cs.on_idle, &t));
    co_await t.async_wait(use_tuple);
    if (BATON_CANCELLED()) throw_cancelled();
  }
  if (cs.backend) cs.backend->close();
}

}  // namespace

// The client's own strand on the executor it is given: its state, its backend's connections and its leases'
// timers are then touched by one thread at a time on any executor, a thread pool's included. A strand of a
// strand is a strand (one more hop), so an executor that already is one is wrapped as well. The backend made
// here is made on that same strand.
client::client(asio::any_io_executor ex, client_config config)
    : client(own_strand{}, asio::make_strand(std::move(ex)), std::move(config)) {}

client::client(own_strand, asio::any_io_executor strand, client_config config)
    : client(own_strand{}, strand, config, make_backend(strand, config)) {}

client::client(asio::any_io_executor ex, client_config config, std::shared_ptr<backend> b)
    : client(own_strand{}, asio::make_strand(std::move(ex)), std::move(config), std::move(b)) {}

client::client(own_strand, asio::any_io_executor strand, client_config config, std::shared_ptr<backend> b) {
  config.validate();
  auto s = std::make_shared<client_shared>();
  s->ex = std::move(strand);
  s->identity = config.identity.empty() ? default_identity() : config.identity;
  s->config = std::move(config);
  s->backend = std::move(b);
  // A memory backend that drives its clients' clocks: this client's deadlines, renewals, backoffs and waits
  // run on the test's clock (baton/testing.hpp).
  if (auto* m = dynamic_cast<testing::memory_backend*>(s->backend.get())) s->manual = m->clients_clock();
  s->rng = detail::jitter_rng(std::random_device{}() ^
                              static_cast<std::uint64_t>(clock::now().time_since_epoch().count()));
  detail::watch_context(s);
  shared_ = std::move(s);
}

client::~client() {
  if (shared_ && !shared_->context_gone.load(std::memory_order_acquire) && shared_->backend) {
    // close() touches the connection pool, which lives on the client's executor.
    asio::post(shared_->ex, [s = shared_] {
      if (s->backend) s->backend->close();
    });
  }
}

client::client(client&&) noexcept = default;
client& client::operator=(client&&) noexcept = default;

const shared_ptr_t& client::shared() const {
  if (!shared_) throw exception(error::empty_handle, "this client handle is empty (moved from)");
  return shared_;
}

namespace {
// Completes `h` with error::empty_handle when the client was moved from; true then.
template <class Handler, class... Values>
bool refused_as_empty(const shared_ptr_t& s, std::string* diag, Handler& h, Values... values) {
  if (s) return false;
  if (diag) *diag = "this client handle is empty (moved from)";
  detail::fail_at_start(std::move(h), make_error_code(error::empty_handle), {}, std::move(values)...);
  return true;
}
}  // namespace

void client::start_acquire(shared_ptr_t s, std::string key, lease_options options, std::uint32_t permits,
                           std::optional<milliseconds> wait_timeout, std::string* diag,
                           asio::any_completion_handler<void(boost::system::error_code, lease)> h) {
  if (refused_as_empty(s, diag, h, lease{})) return;
  auto ex = s->ex;
  detail::launch(ex, acquire_impl(std::move(s), std::move(key), options, permits, wait_timeout), diag,
                 std::move(h));
}

void client::start_try_acquire(
    shared_ptr_t s, std::string key, lease_options options, std::uint32_t permits, std::string* diag,
    asio::any_completion_handler<void(boost::system::error_code, acquire_result)> h) {
  if (refused_as_empty(s, diag, h, acquire_result{})) return;
  auto ex = s->ex;
  detail::launch(ex, try_acquire_impl(std::move(s), std::move(key), options, permits), diag, std::move(h));
}

void client::start_get(
    shared_ptr_t s, std::string key, std::string* diag,
    asio::any_completion_handler<void(boost::system::error_code, std::optional<holder_info>)> h) {
  if (refused_as_empty(s, diag, h, std::optional<holder_info>{})) return;
  auto ex = s->ex;
  detail::launch(ex, get_impl(std::move(s), std::move(key)), diag, std::move(h));
}

void client::start_read_record(
    shared_ptr_t s, std::string key, std::string* diag,
    asio::any_completion_handler<void(boost::system::error_code, std::optional<lock_record>)> h) {
  if (refused_as_empty(s, diag, h, std::optional<lock_record>{})) return;
  auto ex = s->ex;
  detail::launch(ex, read_record_impl(std::move(s), std::move(key)), diag, std::move(h));
}

void client::start_list(shared_ptr_t s, std::string prefix, std::string after, std::size_t limit,
                        std::string* diag,
                        asio::any_completion_handler<void(boost::system::error_code, lock_page)> h) {
  if (refused_as_empty(s, diag, h, lock_page{})) return;
  auto ex = s->ex;
  detail::launch(ex, list_impl(std::move(s), std::move(prefix), std::move(after), limit), diag, std::move(h));
}

void client::start_break(shared_ptr_t s, std::string key, std::uint64_t expected, std::string* diag,
                         asio::any_completion_handler<void(boost::system::error_code, holder_info)> h) {
  if (refused_as_empty(s, diag, h, holder_info{})) return;
  auto ex = s->ex;
  detail::launch(ex, break_impl(std::move(s), std::move(key), expected), diag, std::move(h));
}

void client::start_shutdown(shared_ptr_t s, milliseconds timeout, std::string* diag,
                            asio::any_completion_handler<void(boost::system::error_code)> h) {
  if (refused_as_empty(s, diag, h)) return;
  auto ex = s->ex;
  detail::launch(ex, shutdown_impl(std::move(s), timeout), diag, std::move(h));
}

asio::awaitable<lease> client::acquire_for(shared_ptr_t s, std::string key, lease_options options,
                                           std::optional<milliseconds> wait_timeout, std::uint32_t permits) {
  return asio::async_initiate<const default_token_t&, void(boost::system::error_code, lease)>(
      [s = std::move(s), permits](auto handler, std::string k, lease_options o,
                                  std::optional<milliseconds> w) {
        auto* diag = detail::diagnostic_slot(handler);
        start_acquire(s, std::move(k), o, permits, w, diag, std::move(handler));
      },
      default_token, std::move(key), options, wait_timeout);
}

asio::any_io_executor client::work_executor(const shared_ptr_t& s) {
  if (s) return s->ex;
  return asio::system_executor();
}

tls_reload_result client::reload_tls() {
  return shared()->backend->reload_tls(std::nullopt);
}

tls_reload_result client::reload_tls(const tls_config& tls) {
  return shared()->backend->reload_tls(tls);
}

const std::string& client::identity() const {
  return shared()->identity;
}
const client_config& client::config() const {
  return shared()->config;
}
const asio::any_io_executor& client::get_executor() const {
  return shared()->ex;
}

client_stats client::stats() const {
  auto& s = *shared();
  client_stats out;
  out.acquires = s.acquires.load();
  out.acquire_refusals = s.acquire_refusals.load();
  out.acquire_retries = s.acquire_retries.load();
  out.renews = s.renews.load();
  out.renew_retries = s.renew_retries.load();
  out.losses = s.losses.load();
  out.releases = s.releases.load();
  out.last_renew_latency = std::chrono::microseconds(s.last_renew_us.load());
  out.max_renew_latency = std::chrono::microseconds(s.max_renew_us.load());
  return out;
}

}  // namespace baton
