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

#include <deque>

using namespace baton;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;
using baton::test::run_coro;
using baton::test::lease_opts;

namespace {

enum class mode { ok, refuse, hang, fail, late_ok, already_free, not_owner };

class scripted_backend final : public backend {
 public:
  explicit scripted_backend(asio::any_io_executor ex) : ex_(std::move(ex)) {}

  std::deque<mode> renew_script;  // consumed per call; when empty, renew_default
  mode renew_default = mode::ok;
  std::deque<mode> release_script;
  int renew_calls = 0, release_calls = 0;
  clock_type::duration late_by = 0ms;

  asio::awaitable<acquire_reply> acquire(std::string, std::string, milliseconds, milliseconds) override {
    acquire_reply r;
    r.token = ++tokens_;
    co_return r;
  }

  asio::awaitable<renew_reply> renew(std::string, std::string, std::uint64_t, milliseconds,
                                     milliseconds timeout) override {
    ++renew_calls;
    mode m = renew_default;
    if (!renew_script.empty()) {
      m = renew_script.front();
      renew_script.pop_front();
    }
    renew_reply r;
    switch (m) {
      case mode::ok: break;
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
        co_await asio::this_coro::reset_cancellation_state([](asio::cancellation_type) {
          return asio::cancellation_type::none;
        });
        asio::steady_timer t(ex_, late_by);
        co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        break;
      }
      default: r.ec = error::connection_failed;
    }
    co_return r;
  }

  asio::awaitable<release_reply> release(std::string, std::string, std::uint64_t, milliseconds) override {
    ++release_calls;
    mode m = mode::ok;
    if (!release_script.empty()) {
      m = release_script.front();
      release_script.pop_front();
    }
    release_reply r;
    if (m == mode::fail) r.ec = error::connection_failed;
    if (m == mode::already_free) r.outcome = release_outcome::already_free;
    if (m == mode::not_owner) r.outcome = release_outcome::not_owner;
    co_return r;
  }

  asio::awaitable<get_reply> get(std::string, std::optional<wait_for_change>, milliseconds) override {
    co_return get_reply{};
  }
  void close() override {}

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
    auto l = co_await c.acquire("k", lease_opts(30'000ms, 100ms));
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

BOOST_FIXTURE_TEST_CASE(guarded_work_is_cancelled_at_the_deadline_when_nothing_answers, fixture) {
  b->renew_default = mode::hang;
  std::optional<clock_type::time_point> cancelled_at;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.acquire("k", lease_opts(600ms, 100ms, 100ms));
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
    auto l = co_await c.acquire("k", lease_opts(3000ms, 100ms));
    asio::steady_timer t(co_await asio::this_coro::executor, 800ms);
    co_await t.async_wait(asio::use_awaitable);
    BOOST_TEST(l.active());
    BOOST_TEST(c.stats().renew_retries == 3u);
    BOOST_TEST(c.stats().renews >= 1u);
    co_await l.release();
  }());
}

BOOST_FIXTURE_TEST_CASE(a_late_renew_success_does_not_revive_and_releases_in_the_background, fixture) {
  b->renew_default = mode::late_ok;
  b->late_by = 800ms;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.acquire("k", lease_opts(500ms, 100ms, 100ms));  // deadline 400 ms after the acquire
    co_await l.wait_lost();
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
    auto l1 = co_await c.acquire("a", lease_opts(5000ms, 1000ms));
    b->release_script = {mode::fail, mode::fail, mode::already_free};
    BOOST_TEST((co_await l1.release() == release_outcome::already_free));
    BOOST_TEST(b->release_calls == 3);
    BOOST_TEST((l1.state() == lease_state::released));

    auto l2 = co_await c.acquire("b", lease_opts(5000ms, 1000ms));
    b->release_script = {mode::not_owner};
    BOOST_TEST((co_await l2.release() == release_outcome::not_owner));

    auto l3 = co_await c.acquire("c", lease_opts(5000ms, 1000ms));
    b->release_script = {mode::fail, mode::fail, mode::fail, mode::fail, mode::fail};
    b->release_calls = 0;
    try {
      co_await l3.release();
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
    auto l = co_await c.acquire("k", lease_opts(5000ms, 1000ms));
    int v = co_await with_lease(l, []() -> asio::awaitable<int> { co_return 42; }());
    BOOST_TEST(v == 42);
    bool woke = false;
    asio::co_spawn(co_await asio::this_coro::executor, [&]() -> asio::awaitable<void> {
      co_await l.wait_lost();
      woke = true;
    }, asio::detached);
    co_await l.release();
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
    auto l = co_await watched.acquire("k", lease_opts(5000ms, 100ms));
    co_await l.wait_lost();
  }());
  using k = lease_event::kind;
  std::vector<k> expected{k::acquired, k::renew_retry, k::renewed, k::lost};
  BOOST_TEST((seen == expected));
}

BOOST_FIXTURE_TEST_CASE(with_lease_rethrows_what_the_work_threw_at_once, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.acquire("k", lease_opts(30'000ms, 10'000ms));
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
    co_await l.release();
  }());
}
