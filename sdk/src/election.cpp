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
  std::shared_ptr<client_shared> client;  // null: made from a moved-from client
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
  return c.observed_state() == lease_state::active;
}

// The next change of leader of `key` after `known` (the leader a stream returned last; empty: nobody).
// Runs on the client's executor, the only one the backend may be called from.
asio::awaitable<std::optional<leader_info>> observe_on_executor(std::shared_ptr<detail::client_shared> cs,
                                                                std::string key,
                                                                std::optional<leader_info> known) {
  auto& b = cs->backend;
  const auto& config = cs->config;
  for (;;) {
    // Woken by a change of leader, or of the leader's value (a proclaim), where the backend can tell.
    const wait_for_change wait{known ? known->token : 0, observe_wait,
                               known ? std::optional<std::string>(known->value) : std::nullopt};
    // No answer, or a server at a limit (too_many_waiters): wait a backoff, then ask again, for as long as
    // it takes.
    auto r = co_await detail::with_retries(
        cs, 0, [&] { return b->get(key, wait, config.request_timeout + observe_wait); },
        detail::no_retry_hook);
    if (r.ec == asio::error::operation_aborted || BATON_CANCELLED()) throw_cancelled();
    if (r.ec) throw exception(r.ec, r.diagnostic);
    // An unchanged leader is the long-poll's wait running out: wait again.
    auto current = leader_of(r.holder);
    const bool same = current.has_value() == known.has_value() &&
                      (!current || (current->token == known->token && current->value == known->value));
    if (!same) co_return current;
  }
}

using state = detail::election_state;

std::shared_ptr<detail::client_shared> live(const std::shared_ptr<state>& s) {
  if (!s) throw exception(error::empty_handle, "this election is empty (moved from)");
  if (!s->client)
    throw exception(error::empty_handle, "this election's client handle was empty (moved from)");
  return s->client;
}

// Each operation is a coroutine of its own, run on the client's executor, that holds the election's state,
// so the election object may go (or move) while it runs. Every error, the checks' included, reaches the
// handler.

asio::awaitable<lease> campaign_impl(std::shared_ptr<state> s, std::string value, lease_options options) {
  auto cs = live(s);
  {
    std::lock_guard lk(s->mu);
    if (auto held = s->held.lock(); held && active(*held))
      throw exception(error::invalid_config, "this election already leads \"" + s->key + "\" (token " +
                                                 std::to_string(held->token) + "); resign first");
  }
  options.value = std::move(value);
  lease l = co_await detail::client_access::acquire(cs, s->key, options);  // validates the options
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
    co_await handle.async_release();
  } catch (...) {
    // Not released: resign may be called again.
    std::lock_guard lk(s->mu);
    if (s->held.expired()) s->held = core;
    throw;
  }
}

asio::awaitable<void> proclaim_impl(std::shared_ptr<state> s, std::string value) {
  auto cs = live(s);
  std::shared_ptr<detail::lease_core> core;
  {
    std::lock_guard lk(s->mu);
    core = s->held.lock();
  }
  if (!core || !active(*core))
    throw exception(error::invalid_config, "this election does not lead \"" + s->key + "\": campaign first");
  lease_options check;
  check.value = value;
  check.validate();  // the protocol's limits on a value, before anything is sent
  auto r = co_await detail::with_retries(
      cs, cs->config.retry.max_attempts,
      [&] {
        return cs->backend->proclaim(s->key, core->owner, core->token, value, cs->config.request_timeout);
      },
      detail::no_retry_hook);
  if (!r.ec) {
    std::lock_guard lk(core->reason_mu);
    core->value = std::move(value);
    co_return;
  }
  if (r.ec == asio::error::operation_aborted) throw_cancelled();
  if (r.ec == error::lease_lost)
    throw exception(error::lease_lost, "proclaim refused: the server no longer holds this leader's lease (" +
                                           r.lost_reason + ")");
  throw exception(r.ec, r.diagnostic);
}

asio::awaitable<std::optional<leader_info>> leader_impl(std::shared_ptr<state> s) {
  co_return leader_of(co_await detail::client_access::get(live(s), s->key));
}

}  // namespace

struct detail::leader_stream_position {
  bool started = false;
  std::optional<leader_info> last;  // what async_next() returned last
};

namespace {

asio::awaitable<std::optional<leader_info>> next_impl(std::shared_ptr<state> s,
                                                      std::shared_ptr<detail::leader_stream_position> p) {
  std::optional<leader_info> who;
  if (!p->started) {
    who = co_await leader_impl(s);
    p->started = true;
  } else {
    who = co_await observe_on_executor(live(s), s->key, p->last);
  }
  p->last = who;
  co_return who;
}

// Runs an election operation on its client's executor; a moved-from client or election completes with
// error::empty_handle.
template <class T, class Handler>
void run(const std::shared_ptr<state>& s, asio::awaitable<T> op, std::string* diag, Handler h,
         bool cancellable = true) {
  std::shared_ptr<detail::client_shared> cs;
  try {
    cs = live(s);
  } catch (const exception& e) {
    if (diag) *diag = e.diagnostic();
    if constexpr (std::is_void_v<T>)
      detail::fail_at_start(std::move(h), e.code(), {});
    else
      detail::fail_at_start(std::move(h), e.code(), {}, T{});
    return;
  }
  detail::launch(cs->ex, std::move(op), diag, std::move(h), cancellable);
}

}  // namespace

leader_stream::leader_stream(std::shared_ptr<detail::election_state> s,
                             std::shared_ptr<detail::leader_stream_position> p)
    : state_(std::move(s)), position_(std::move(p)) {}

void leader_stream::start_next(
    std::shared_ptr<detail::election_state> s, std::shared_ptr<detail::leader_stream_position> p,
    std::string* diag,
    asio::any_completion_handler<void(boost::system::error_code, std::optional<leader_info>)> h) {
  if (!p) {
    if (diag) *diag = "this leader stream is empty";
    return detail::fail_at_start(std::move(h), make_error_code(error::empty_handle), {},
                                 std::optional<leader_info>{});
  }
  auto op = next_impl(s, std::move(p));
  run(s, std::move(op), diag, std::move(h));
}

leader_stream election::observe() {
  return leader_stream(state_, std::make_shared<detail::leader_stream_position>());
}

election::election(client& c, std::string key) : state_(std::make_shared<detail::election_state>()) {
  state_->client = detail::client_access::shared_of(c);
  state_->key = std::move(key);
}

election::~election() = default;
election::election(election&&) noexcept = default;
election& election::operator=(election&&) noexcept = default;

const std::string& election::key() const {
  if (!state_) throw exception(error::empty_handle, "this election is empty (moved from)");
  return state_->key;
}

void election::start_campaign(std::shared_ptr<detail::election_state> s, std::string value,
                              lease_options options, std::string* diag,
                              asio::any_completion_handler<void(boost::system::error_code, lease)> h) {
  auto op = campaign_impl(s, std::move(value), options);
  run(s, std::move(op), diag, std::move(h));
}

void election::start_resign(std::shared_ptr<detail::election_state> s, std::string* diag,
                            asio::any_completion_handler<void(boost::system::error_code)> h) {
  auto op = resign_impl(s);
  run(s, std::move(op), diag, std::move(h), /*cancellable=*/false);
}

void election::start_proclaim(std::shared_ptr<detail::election_state> s, std::string value, std::string* diag,
                              asio::any_completion_handler<void(boost::system::error_code)> h) {
  auto op = proclaim_impl(s, std::move(value));
  run(s, std::move(op), diag, std::move(h));
}

void election::start_leader(
    std::shared_ptr<detail::election_state> s, std::string* diag,
    asio::any_completion_handler<void(boost::system::error_code, std::optional<leader_info>)> h) {
  auto op = leader_impl(s);
  run(s, std::move(op), diag, std::move(h));
}

}  // namespace baton
