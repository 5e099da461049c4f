// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE lease
#include <boost/test/unit_test.hpp>

// The lease driver against a scripted in-process backend: no network. The state machine's timing rules are
// tested with hand-driven time in test_lease_fsm.cpp; here real (short) timers check that the driver carries
// the decisions out: cancellation of guarded work, retries, release mapping.

#include "coro.hpp"
#include "lease_opts.hpp"

#include "baton/client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <deque>
#include <vector>

using namespace baton;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using clock_type = baton::lease_clock;
using baton::test::lease_opts;
using baton::test::run_coro;

namespace {

// unavailable: a 503 storage_unavailable, which leaves the request's outcome unknown. held: acquire refused.
enum class mode { ok, refuse, hang, fail, late_ok, already_free, not_owner, unavailable, held };

// The next mode of a script, or the default once the script has run out.
mode next(std::deque<mode>& script, mode fallback) {
  if (script.empty()) return fallback;
  mode m = script.front();
  script.pop_front();
  return m;
}

class scripted_backend final : public backend {
 public:
  explicit scripted_backend(asio::any_io_executor ex) : ex_(std::move(ex)) {}

  std::deque<mode> renew_script;  // consumed per call; when empty, renew_default
  mode renew_default = mode::ok;
  std::deque<mode> release_script;
  std::deque<mode> acquire_script;
  mode acquire_default = mode::ok;
  boost::system::error_code get_error;  // what every long-poll answers
  int renew_calls = 0, release_calls = 0, get_calls = 0;
  std::vector<std::string> acquire_owners;  // the owner of each acquire request, in order
  std::vector<std::string> acquire_values;  // and its value
  clock_type::duration late_by = 0ms;

  asio::awaitable<acquire_reply> acquire(std::string, std::string owner, milliseconds, std::string value,
                                         milliseconds) override {
    acquire_owners.push_back(owner);
    acquire_values.push_back(value);
    acquire_reply r;
    // Every request reaches the server and takes a token, even one whose answer is a 503.
    r.token = ++tokens_;
    switch (next(acquire_script, acquire_default)) {
      case mode::unavailable:
        r.ec = error::storage_unavailable;
        break;
      case mode::held:
        r.ec = error::held;
        r.holder = {"someone-else", 1, 10s};
        break;
      default:
        break;
    }
    co_return r;
  }

  asio::awaitable<renew_reply> renew(std::string, std::string, std::uint64_t, milliseconds,
                                     milliseconds timeout) override {
    ++renew_calls;
    renew_reply r;
    switch (next(renew_script, renew_default)) {
      case mode::ok:
        break;
      case mode::unavailable:
        r.ec = error::storage_unavailable;
        break;
      case mode::refuse:
        r.ec = error::lease_lost;
        r.lost_reason = "token_mismatch";
        break;
      case mode::hang: {
        // No answer: the request runs into its timeout (or is cancelled).
        asio::steady_timer t(ex_, timeout);
        auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        r.ec = ec ? make_error_code(asio::error::operation_aborted) : make_error_code(error::request_timeout);
        break;
      }
      case mode::late_ok: {
        // A server that answers "renewed" only after the client's deadline, ignoring the client's timeout.
        co_await asio::this_coro::reset_cancellation_state(
            [](asio::cancellation_type) { return asio::cancellation_type::none; });
        asio::steady_timer t(ex_, late_by);
        co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        break;
      }
      default:
        r.ec = error::connection_failed;
    }
    co_return r;
  }

  asio::awaitable<release_reply> release(std::string, std::string, std::uint64_t, milliseconds) override {
    ++release_calls;
    for (auto& w : watches)
      if (!w->ended) watch_open_at_release = true;
    mode m = next(release_script, mode::ok);
    release_reply r;
    if (m == mode::fail) r.ec = error::connection_failed;
    if (m == mode::unavailable) r.ec = error::storage_unavailable;
    if (m == mode::already_free) r.outcome = release_outcome::already_free;
    if (m == mode::not_owner) r.outcome = release_outcome::not_owner;
    co_return r;
  }

  asio::awaitable<get_reply> get(std::string, std::optional<wait_for_change>, milliseconds) override {
    ++get_calls;
    get_reply r;
    r.ec = get_error;
    co_return r;
  }
  void close() override {}

  // A watch per lease, as the etcd backend keeps one: the test calls `on_lost` as a watch event would.
  struct watched {
    std::string key;
    std::uint64_t token = 0;
    std::function<void(std::string_view)> on_lost;
    bool ended = false;  // the lease code destroyed its handle
  };
  std::vector<std::shared_ptr<watched>> watches;
  bool watch_open_at_release = false;  // whether a watch was still open when a release was sent
  std::unique_ptr<loss_watch> watch_loss(const std::string& key, const std::string&, std::uint64_t token,
                                         std::function<void(std::string_view)> on_lost) override {
    struct handle final : loss_watch {
      std::shared_ptr<watched> w;
      ~handle() override { w->ended = true; }
    };
    auto w = std::make_shared<watched>(watched{key, token, std::move(on_lost)});
    watches.push_back(w);
    auto h = std::make_unique<handle>();
    h->w = w;
    return h;
  }

 private:
  asio::any_io_executor ex_;
  std::uint64_t tokens_ = 0;
};

struct fixture {
  asio::io_context ioc;
  std::shared_ptr<scripted_backend> b = std::make_shared<scripted_backend>(ioc.get_executor());
  client c{ioc.get_executor(), make_config(), b};

  static client_config make_config() {
    client_config cfg;
    cfg.identity = "unit";
    cfg.request_timeout = 200ms;
    cfg.retry.initial_backoff = 10ms;
    cfg.retry.max_backoff = 50ms;
    return cfg;
  }
};

// Guarded work: waits a minute unless cancelled; records when it saw the cancellation.
asio::awaitable<void> long_work(std::optional<clock_type::time_point>& cancelled_at) {
  asio::steady_timer t(co_await asio::this_coro::executor, 60s);
  auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  if (ec == asio::error::operation_aborted) cancelled_at = clock_type::now();
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(guarded_work_is_cancelled_when_a_renew_is_refused, fixture) {
  b->renew_default = mode::refuse;
  std::optional<clock_type::time_point> cancelled_at;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.async_acquire("k", lease_opts(30'000ms, 100ms));
    try {
      co_await with_lease(l, long_work(cancelled_at));
      BOOST_FAIL("expected lease_lost");
    } catch (const exception& e) {
      BOOST_TEST((e.code() == error::lease_lost));
    }
    BOOST_TEST((l.state() == lease_state::lost));
    BOOST_TEST(cancelled_at.has_value());
    // Lost on the 409, long before the 27 s deadline.
    BOOST_TEST((*cancelled_at < l.deadline()));
    BOOST_TEST(c.stats().losses == 1u);
  }());
}

BOOST_FIXTURE_TEST_CASE(a_loss_the_backends_watch_reports_ends_the_lease_at_once, fixture) {
  std::optional<clock_type::time_point> cancelled_at;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.async_acquire("k", lease_opts(30'000ms, 10'000ms));
    BOOST_REQUIRE(b->watches.size() == 1u);
    BOOST_TEST(b->watches[0]->key == "k");
    BOOST_TEST(b->watches[0]->token == l.token());
    const auto renews = b->renew_calls;
    // The key deleted behind the holder's back 100 ms into guarded work: lost then, not at the next renew.
    asio::steady_timer event(ioc, 100ms);
    event.async_wait(
        [&](boost::system::error_code) { b->watches[0]->on_lost("not_held: the key was deleted"); });
    try {
      co_await with_lease(l, long_work(cancelled_at));
      BOOST_FAIL("expected lease_lost");
    } catch (const exception& e) {
      BOOST_TEST((e.code() == error::lease_lost));
    }
    BOOST_TEST((l.state() == lease_state::lost));
    BOOST_TEST(l.loss_reason().find("not_held: the key was deleted") != std::string::npos, l.loss_reason());
    BOOST_TEST(cancelled_at.has_value());
    BOOST_TEST(b->watches[0]->ended);  // the watch ends with the lease
    BOOST_TEST(c.stats().losses == 1u);
    co_await baton::test::sleep_for(50ms);
    BOOST_TEST(b->renew_calls == renews);  // and so does its renewal
  }());
}

BOOST_FIXTURE_TEST_CASE(a_release_ends_the_leases_watch_before_it_is_sent_and_is_no_loss, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.async_acquire("k", lease_opts(30'000ms, 10'000ms));
    BOOST_REQUIRE(b->watches.size() == 1u);
    BOOST_TEST(!b->watches[0]->ended);
    BOOST_TEST((co_await l.async_release() == release_outcome::released));
    BOOST_TEST(b->release_calls == 1);
    BOOST_TEST(!b->watch_open_at_release);  // the delete of the release could not read as a loss
    BOOST_TEST(b->watches[0]->ended);
    BOOST_TEST((l.state() == lease_state::released));
    BOOST_TEST(c.stats().losses == 0u);
  }());
}

BOOST_FIXTURE_TEST_CASE(guarded_work_is_cancelled_at_the_deadline_when_nothing_answers, fixture) {
  b->renew_default = mode::hang;
  std::optional<clock_type::time_point> cancelled_at;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.async_acquire("k", lease_opts(600ms, 100ms, 100ms));
    auto deadline = l.deadline();
    BOOST_CHECK_THROW(co_await with_lease(l, long_work(cancelled_at)), exception);
    BOOST_TEST((l.state() == lease_state::lost));
    BOOST_TEST(l.loss_reason().find("deadline") != std::string::npos);
    BOOST_REQUIRE(cancelled_at.has_value());
    BOOST_TEST((*cancelled_at >= deadline));  // never before the deadline: nothing said it was lost
    BOOST_TEST((*cancelled_at < deadline + 5s));
    BOOST_TEST(b->renew_calls >= 1);
  }());
}

BOOST_FIXTURE_TEST_CASE(transport_errors_are_retried_and_the_lease_survives, fixture) {
  b->renew_script = {mode::fail, mode::fail, mode::fail};
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.async_acquire("k", lease_opts(3000ms, 100ms));
    asio::steady_timer t(co_await asio::this_coro::executor, 800ms);
    co_await t.async_wait(asio::use_awaitable);
    BOOST_TEST(l.active());
    BOOST_TEST(c.stats().renew_retries == 3u);
    BOOST_TEST(c.stats().renews >= 1u);
    co_await l.async_release();
  }());
}

BOOST_FIXTURE_TEST_CASE(a_late_renew_success_does_not_revive_and_releases_in_the_background, fixture) {
  b->renew_default = mode::late_ok;
  b->late_by = 800ms;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l =
        co_await c.async_acquire("k", lease_opts(500ms, 100ms, 100ms));  // deadline 400 ms after the acquire
    co_await l.async_wait_lost();
    BOOST_TEST((l.state() == lease_state::lost));
    // The "renewed" answer arrives after the deadline: the lease stays lost and is handed back.
    for (int i = 0; i < 300 && b->release_calls == 0; ++i) {
      asio::steady_timer t(co_await asio::this_coro::executor, 10ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    BOOST_TEST(b->release_calls == 1);
    BOOST_TEST((l.state() == lease_state::lost));
    BOOST_TEST(!l.active());
  }());
}

BOOST_FIXTURE_TEST_CASE(release_retries_transport_errors_and_maps_the_answer, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l1 = co_await c.async_acquire("a", lease_opts(5000ms, 1000ms));
    b->release_script = {mode::fail, mode::fail, mode::already_free};
    BOOST_TEST((co_await l1.async_release() == release_outcome::already_free));
    BOOST_TEST(b->release_calls == 3);
    BOOST_TEST((l1.state() == lease_state::released));

    auto l2 = co_await c.async_acquire("b", lease_opts(5000ms, 1000ms));
    b->release_script = {mode::not_owner};
    BOOST_TEST((co_await l2.async_release() == release_outcome::not_owner));

    auto l3 = co_await c.async_acquire("c", lease_opts(5000ms, 1000ms));
    b->release_script = {mode::fail, mode::fail, mode::fail, mode::fail, mode::fail};
    b->release_calls = 0;
    try {
      co_await l3.async_release();
      BOOST_FAIL("expected connection_failed");
    } catch (const exception& e) {
      BOOST_TEST((e.code() == error::connection_failed));
    }
    BOOST_TEST(b->release_calls == 4);  // retry_policy.max_attempts
    // Even when the server could not be told, the lease no longer counts as held.
    BOOST_TEST(!l3.active());
  }());
}

BOOST_FIXTURE_TEST_CASE(with_lease_returns_the_work_result_and_wait_lost_ends_on_release, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.async_acquire("k", lease_opts(5000ms, 1000ms));
    int v = co_await with_lease(l, []() -> asio::awaitable<int> { co_return 42; }());
    BOOST_TEST(v == 42);
    bool woke = false;
    asio::co_spawn(
        co_await asio::this_coro::executor,
        [&]() -> asio::awaitable<void> {
          co_await l.async_wait_lost();
          woke = true;
        },
        asio::detached);
    co_await l.async_release();
    asio::steady_timer t(co_await asio::this_coro::executor, 50ms);
    co_await t.async_wait(asio::use_awaitable);
    BOOST_TEST(woke);
    BOOST_CHECK_THROW(co_await with_lease(l, []() -> asio::awaitable<int> { co_return 1; }()), exception);
  }());
}

BOOST_FIXTURE_TEST_CASE(events_report_the_lease_lifecycle, fixture) {
  std::vector<lease_event::kind> seen;
  auto cfg = make_config();
  cfg.on_event = [&](const lease_event& e) { seen.push_back(e.what); };
  client watched(ioc.get_executor(), cfg, b);
  b->renew_script = {mode::fail, mode::ok, mode::refuse};
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await watched.async_acquire("k", lease_opts(5000ms, 100ms));
    co_await l.async_wait_lost();
  }());
  using k = lease_event::kind;
  std::vector<k> expected{k::acquired, k::renew_retry, k::renewed, k::lost};
  BOOST_TEST((seen == expected));
}

// Issue 25, defect 6: a renew that timed out at the deadline was reported as a renew_retry after the lease's
// `lost` event. The loss is the last event of a lease.
BOOST_FIXTURE_TEST_CASE(no_renew_retry_event_follows_the_loss, fixture) {
  std::vector<lease_event::kind> seen;
  auto cfg = make_config();
  cfg.on_event = [&](const lease_event& e) { seen.push_back(e.what); };
  client watched(ioc.get_executor(), cfg, b);
  b->renew_default = mode::hang;  // each renew waits out its whole budget, which ends at the deadline
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await watched.async_acquire("k", lease_opts(600ms, 100ms, 100ms));
    co_await l.async_wait_lost();
    co_await baton::test::sleep_for(300ms);  // the renew that was in flight at the deadline has ended by now
  }());
  using k = lease_event::kind;
  const auto lost = std::ranges::find(seen, k::lost);
  BOOST_REQUIRE((lost != seen.end()));
  BOOST_TEST(std::count(lost, seen.end(), k::renew_retry) == 0, "a renew_retry event came after lost");
  BOOST_TEST(std::count(seen.begin(), seen.end(), k::lost) == 1);
}

BOOST_FIXTURE_TEST_CASE(with_lease_rethrows_what_the_work_threw_at_once, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.async_acquire("k", lease_opts(30'000ms, 10'000ms));
    auto started = clock_type::now();
    try {
      co_await with_lease(l, []() -> asio::awaitable<void> {
        throw std::runtime_error("job failed");
        co_return;
      }());
      BOOST_FAIL("expected the work's exception");
    } catch (const std::runtime_error& e) {
      BOOST_TEST(std::string(e.what()) == "job failed");
    }
    // Not held up until the lease ends: the exception came straight through, and the lease is still ours.
    BOOST_TEST((clock_type::now() - started < 10s));
    BOOST_TEST(l.active());
    co_await l.async_release();
  }());
}

// ---- 503 storage_unavailable: the outcome is unknown, as after a lost reply. Each test fails if the SDK
// took the 503 for a definite refusal (acquire or release given up at once, the lease declared lost) or, for
// a renew, for a success.

BOOST_FIXTURE_TEST_CASE(acquire_answered_storage_unavailable_is_retried_with_the_same_owner, fixture) {
  b->acquire_script = {mode::unavailable, mode::unavailable};
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto r = co_await c.async_try_acquire("k", lease_opts(5000ms, 1000ms));
    BOOST_REQUIRE(r.acquired.has_value());
    // The server may have granted the first two; the third, by the same owner, superseded them.
    BOOST_TEST(b->acquire_owners.size() == 3u);
    for (const auto& owner : b->acquire_owners)
      BOOST_TEST(owner == r.acquired->owner());
    BOOST_TEST(r.acquired->token() == 3u);
    co_await r.acquired->async_release();

    b->acquire_owners.clear();
    b->acquire_script = {mode::unavailable};
    auto l = co_await c.async_acquire("k2", lease_opts(5000ms, 1000ms));
    BOOST_TEST(b->acquire_owners.size() == 2u);
    for (const auto& owner : b->acquire_owners)
      BOOST_TEST(owner == l.owner());
    co_await l.async_release();
  }());
}

BOOST_FIXTURE_TEST_CASE(acquire_given_up_after_storage_unavailable_reports_an_unknown_outcome, fixture) {
  b->acquire_default = mode::unavailable;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    // Not "held" (that would say someone else has it) and no lease: an error a caller must not read as
    // "nothing was granted".
    try {
      co_await c.async_try_acquire("k", lease_opts(5000ms, 1000ms));
      BOOST_FAIL("expected storage_unavailable");
    } catch (const exception& e) {
      BOOST_TEST((e.code() == error::storage_unavailable));
      BOOST_TEST(is_transient(e.code()));
    }
    BOOST_TEST(b->acquire_owners.size() == 4u);  // retry_policy.max_attempts, one owner throughout
    BOOST_TEST(b->acquire_owners.front() == b->acquire_owners.back());
    try {
      co_await c.async_acquire("k", lease_opts(5000ms, 1000ms), 300ms);
      BOOST_FAIL("expected wait_timeout");
    } catch (const exception& e) {
      BOOST_TEST((e.code() == error::wait_timeout));
      BOOST_TEST(e.diagnostic().find("no definite answer") != std::string::npos, e.diagnostic());
      BOOST_TEST(e.diagnostic().find("if it was granted, it is released") != std::string::npos,
                 e.diagnostic());
    }
  }());
}

BOOST_FIXTURE_TEST_CASE(renew_answered_storage_unavailable_keeps_the_deadline_and_is_retried, fixture) {
  b->renew_default = mode::unavailable;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.async_acquire("k", lease_opts(3000ms, 100ms));
    const auto acquired_deadline = l.deadline();
    co_await baton::test::sleep_for(600ms);
    // Several renews went out and may have extended the server's lease; none counts locally.
    BOOST_TEST(b->renew_calls >= 2);
    BOOST_TEST(c.stats().renew_retries == static_cast<std::uint64_t>(b->renew_calls));
    BOOST_TEST(c.stats().renews == 0u);
    BOOST_TEST((l.deadline() == acquired_deadline));
    BOOST_TEST(l.active());  // not lost either: the server did not refuse
    // Once the server answers again, a confirmed renew moves the deadline.
    b->renew_default = mode::ok;
    co_await baton::test::sleep_for(600ms);
    BOOST_TEST(c.stats().renews >= 1u);
    BOOST_TEST((l.deadline() > acquired_deadline));
    co_await l.async_release();
  }());
}

BOOST_FIXTURE_TEST_CASE(renews_answered_storage_unavailable_until_the_deadline_lose_the_lease_there,
                        fixture) {
  b->renew_default = mode::unavailable;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.async_acquire("k", lease_opts(600ms, 100ms, 100ms));
    const auto deadline = l.deadline();
    co_await l.async_wait_lost();
    BOOST_TEST((clock_type::now() >= deadline));  // not at the first 503: it refused nothing
    BOOST_TEST(l.loss_reason().find("deadline") != std::string::npos, l.loss_reason());
    BOOST_TEST(c.stats().renews == 0u);
  }());
}

BOOST_FIXTURE_TEST_CASE(release_answered_storage_unavailable_is_retried, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.async_acquire("k", lease_opts(5000ms, 1000ms));
    // The first release may have freed the lock: its retry then finds it free.
    b->release_script = {mode::unavailable, mode::already_free};
    BOOST_TEST((co_await l.async_release() == release_outcome::already_free));
    BOOST_TEST(b->release_calls == 2);
    BOOST_TEST((l.state() == lease_state::released));
  }());
}

BOOST_FIXTURE_TEST_CASE(a_waiter_refused_long_polls_backs_off_more_and_more, fixture) {
  b->acquire_default = mode::held;
  b->get_error = error::server_busy;  // 503 too_many_waiters
  auto cfg = make_config();
  cfg.retry.initial_backoff = 10ms;
  cfg.retry.max_backoff = 400ms;
  client waiter(ioc.get_executor(), cfg, b);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    BOOST_CHECK_THROW(co_await waiter.async_acquire("k", lease_opts(5000ms, 1000ms), 1500ms), exception);
  }());
  // Backoff 10, 20, 40 ... 400 ms: about ten tries in 1.5 s. Restarting it at 10 ms after every "held"
  // would make it about two hundred.
  BOOST_TEST(b->get_calls >= 3);
  BOOST_TEST(b->get_calls <= 20);
  // Each long-poll follows a try, and the wait ends with one more try at its deadline.
  BOOST_TEST(b->acquire_owners.size() == static_cast<std::size_t>(b->get_calls) + 1);
}

BOOST_FIXTURE_TEST_CASE(a_lease_options_value_is_sent_with_each_acquire_try_and_kept_by_the_lease, fixture) {
  b->acquire_script = {mode::unavailable};  // the retry carries the value too
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease_options o = lease_opts(30'000ms);
    o.value = "10.0.0.7:8080";
    auto l = co_await c.async_acquire("k", o);
    BOOST_TEST(l.value() == "10.0.0.7:8080");
    BOOST_TEST(b->acquire_values == (std::vector<std::string>{"10.0.0.7:8080", "10.0.0.7:8080"}));
    auto plain = co_await c.async_acquire("other", lease_opts(30'000ms));
    BOOST_TEST(plain.value().empty());
    co_await l.async_release();
    co_await plain.async_release();
  }());
  for (const std::string& bad : {std::string(1025, 'v'), std::string("a\nb")}) {
    lease_options o = lease_opts(30'000ms);
    o.value = bad;
    try {
      o.validate();
      BOOST_FAIL("expected invalid_config");
    } catch (const exception& e) {
      BOOST_TEST((e.code() == error::invalid_config));
      BOOST_TEST(std::string(e.what()).find("value") != std::string::npos);
    }
  }
}
