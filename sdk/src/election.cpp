// SPDX-License-Identifier: Apache-2.0
#include "baton/election.hpp"

#include "client_access.hpp"
#include "lease_core.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <mutex>
#include <random>

namespace baton {
namespace asio = boost::asio;

namespace detail {
std::shared_ptr<lease_core> core_of(const lease& l) {
  return l.core_;
}
}  // namespace detail

struct detail::election_state {
  client* c;
  std::string key;
  // The lease of the last campaign, without keeping it alive: the caller's handle decides its lifetime
  // (destroying it releases it). Guarded by mu: campaign and resign may complete on different threads.
  std::mutex mu;
  std::weak_ptr<detail::lease_core> held;
};

namespace {

// A long-poll's wait: well under batond's 60 s cap, and long enough that a quiet election costs a request
// per half minute per observer.
constexpr milliseconds observe_wait{30'000};

[[noreturn]] void throw_cancelled() {
  throw exception(make_error_code(asio::error::operation_aborted));
}

std::optional<leader_info> leader_of(const std::optional<holder_info>& h) {
  if (!h) return std::nullopt;
  return leader_info{h->owner, h->token, h->value};
}

bool active(const detail::lease_core& c) {
  return c.state.load(std::memory_order_acquire) == lease_state::active &&
         lease_clock::now().time_since_epoch().count() < c.deadline_ticks.load(std::memory_order_acquire);
}

// The next change of holder of `key` after `known` (without it: after the holder found by a first read).
// Runs on the client's executor, the only one the backend may be called from.
asio::awaitable<std::optional<leader_info>> observe_on_executor(std::shared_ptr<backend> b,
                                                                client_config config, std::string key,
                                                                std::optional<std::uint64_t> known) {
  auto ex = co_await asio::this_coro::executor;
  detail::jitter_rng rng(std::random_device{}());
  int failures = 0;
  for (;;) {
    std::optional<wait_for_change> wait;
    if (known) wait = wait_for_change{*known, observe_wait};
    auto r = co_await b->get(key, wait, config.request_timeout + (wait ? observe_wait : milliseconds{0}));
    if (r.ec == asio::error::operation_aborted || BATON_CANCELLED()) throw_cancelled();
    if (r.ec) {
      // No answer, or a server at a limit (too_many_waiters): wait a backoff, then ask again.
      if (!is_transient(r.ec)) throw exception(r.ec, r.diagnostic);
      detail::timer t(ex, detail::backoff(config.retry, ++failures, rng));
      auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec || BATON_CANCELLED()) throw_cancelled();
      continue;
    }
    failures = 0;
    const std::uint64_t current = r.holder ? r.holder->token : 0;
    if (!known) {
      known = current;
      continue;
    }
    // An unchanged holder is the long-poll's wait running out: wait again.
    if (current != *known) co_return leader_of(r.holder);
  }
}

using state = detail::election_state;

state& live(const std::shared_ptr<state>& s) {
  if (!s) throw exception(error::empty_handle, "this election is empty (moved from)");
  return *s;
}

// Each operation is a coroutine of its own that holds the election's state, so the election object may go
// (or move) while it runs. Every error, the checks' included, is thrown when the operation is awaited, never
// by the call that creates it.

asio::awaitable<lease> campaign_impl(std::shared_ptr<state> s, std::string value, lease_options options) {
  live(s);
  {
    std::lock_guard lk(s->mu);
    if (auto held = s->held.lock(); held && active(*held))
      throw exception(error::invalid_config, "this election already leads \"" + s->key + "\" (token " +
                                                 std::to_string(held->token) + "); resign first");
  }
  options.value = std::move(value);
  auto acquiring = s->c->acquire(s->key, std::move(options));  // validates the options
  lease l = co_await std::move(acquiring);
  std::lock_guard lk(s->mu);
  s->held = detail::core_of(l);
  co_return l;
}

asio::awaitable<void> resign_impl(std::shared_ptr<state> s) {
  live(s);
  std::shared_ptr<detail::lease_core> core;
  {
    std::lock_guard lk(s->mu);
    core = s->held.lock();
    s->held.reset();
  }
  if (!core) co_return;
  // A second handle on the campaign's lease: releasing through it is releasing the lease itself, so the
  // caller's handle reads `released` and its guarded work sees that.
  lease handle = detail::make_lease(core);
  try {
    co_await handle.release();
  } catch (...) {
    // Not released: resign() may be called again.
    std::lock_guard lk(s->mu);
    if (s->held.expired()) s->held = core;
    throw;
  }
}

asio::awaitable<std::optional<leader_info>> leader_impl(std::shared_ptr<state> s) {
  live(s);
  auto getting = s->c->get(s->key);
  co_return leader_of(co_await std::move(getting));
}

asio::awaitable<std::optional<leader_info>> observe_impl(std::shared_ptr<state> s,
                                                         std::optional<std::uint64_t> known) {
  live(s);
  client& c = *s->c;
  auto observing = observe_on_executor(detail::client_access::backend_of(c), c.config(), s->key, known);
  try {
    co_return co_await asio::co_spawn(c.get_executor(), std::move(observing), asio::use_awaitable);
  } catch (const exception&) {
    throw;
  } catch (const boost::system::system_error& e) {
    throw exception(e.code(), {});
  }
}

}  // namespace

struct detail::leader_stream_position {
  bool started = false;
  std::uint64_t last = 0;  // the token of the leader next() returned last (0: nobody)
};

namespace {

asio::awaitable<std::optional<leader_info>> next_impl(std::shared_ptr<state> s,
                                                      std::shared_ptr<detail::leader_stream_position> p) {
  std::optional<leader_info> who;
  if (!p->started) {
    who = co_await leader_impl(s);
    p->started = true;
  } else {
    who = co_await observe_impl(s, p->last);
  }
  p->last = who ? who->token : 0;
  co_return who;
}

}  // namespace

leader_stream::leader_stream(std::shared_ptr<detail::election_state> s,
                             std::shared_ptr<detail::leader_stream_position> p)
    : state_(std::move(s)), position_(std::move(p)) {}

asio::awaitable<std::optional<leader_info>> leader_stream::next() {
  return next_impl(state_, position_);
}

leader_stream election::follow() {
  live(state_);
  return leader_stream(state_, std::make_shared<detail::leader_stream_position>());
}

election::election(client& c, std::string key) : state_(std::make_shared<detail::election_state>()) {
  state_->c = &c;
  state_->key = std::move(key);
}

election::~election() = default;
election::election(election&&) noexcept = default;
election& election::operator=(election&&) noexcept = default;

const std::string& election::key() const {
  return live(state_).key;
}

asio::awaitable<lease> election::campaign(std::string value, lease_options options) {
  return campaign_impl(state_, std::move(value), std::move(options));
}

asio::awaitable<lease> election::campaign(std::string value) {
  return campaign_impl(state_, std::move(value), lease_options{});
}

asio::awaitable<void> election::resign() {
  return resign_impl(state_);
}

asio::awaitable<std::optional<leader_info>> election::leader() {
  return leader_impl(state_);
}

asio::awaitable<std::optional<leader_info>> election::observe(std::optional<std::uint64_t> known_token) {
  return observe_impl(state_, known_token);
}

asio::awaitable<std::optional<leader_info>> election::observe() {
  return observe_impl(state_, std::nullopt);
}

}  // namespace baton
