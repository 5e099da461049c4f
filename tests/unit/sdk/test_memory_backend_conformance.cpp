// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE memory_backend_conformance
#include <boost/test/unit_test.hpp>

// baton::testing::memory_backend is the server users' tests run against, so it must follow docs/protocol.md
// as a real server does (issue 25, defect 7: it shortened leases). It is checked here with the same checks
// `baton conformance` makes through a backend against etcd (sdk/cli/backend_conformance.cpp), each by name.
//
// Those checks run on real time (they sleep, and judge expiry against steady_clock), while the test double's
// clock moves only when told. So each backend the suite opens is a thin wrapper that moves the shared test
// double's clock to the real time elapsed before every request, and keeps moving it while a long-poll waits.

#include "backend_conformance.hpp"

#include "baton/backend.hpp"
#include "baton/testing.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <memory>
#include <set>
#include <string>

namespace asio = boost::asio;
using namespace boost::asio::experimental::awaitable_operators;
using namespace std::chrono_literals;
using baton::milliseconds;
using baton::testing::memory_backend;
using steady = std::chrono::steady_clock;

namespace {

// The test double's clock, following steady_clock from the moment it was made (nothing else moves it).
struct real_time {
  std::shared_ptr<memory_backend> server;
  steady::time_point started = steady::now();
  std::chrono::nanoseconds moved{0};

  void sync() {
    const auto behind = std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now() - started) - moved;
    if (behind <= 0ns) return;
    server->advance(behind);
    moved += behind;
  }
};

class real_time_backend final : public baton::forwarding_backend {
 public:
  explicit real_time_backend(std::shared_ptr<real_time> clock)
      : forwarding_backend(clock->server), clock_(std::move(clock)) {}

  asio::awaitable<baton::acquire_reply> acquire(std::string key, std::string owner, milliseconds ttl,
                                                std::string value, milliseconds timeout) override {
    clock_->sync();
    return forwarding_backend::acquire(std::move(key), std::move(owner), ttl, std::move(value), timeout);
  }
  asio::awaitable<baton::renew_reply> renew(std::string key, std::string owner, std::uint64_t token,
                                            milliseconds ttl, milliseconds timeout) override {
    clock_->sync();
    return forwarding_backend::renew(std::move(key), std::move(owner), token, ttl, timeout);
  }
  asio::awaitable<baton::release_reply> release(std::string key, std::string owner, std::uint64_t token,
                                                milliseconds timeout) override {
    clock_->sync();
    return forwarding_backend::release(std::move(key), std::move(owner), token, timeout);
  }
  asio::awaitable<baton::proclaim_reply> proclaim(std::string key, std::string owner, std::uint64_t token,
                                                  std::string value, milliseconds timeout) override {
    clock_->sync();
    return forwarding_backend::proclaim(std::move(key), std::move(owner), token, std::move(value), timeout);
  }
  asio::awaitable<std::vector<baton::renew_reply>> renew_batch(std::span<const baton::renew_entry> entries,
                                                               milliseconds timeout) override {
    clock_->sync();
    return forwarding_backend::renew_batch(entries, timeout);
  }
  asio::awaitable<baton::get_reply> get(std::string key, std::optional<baton::wait_for_change> wait,
                                        milliseconds timeout) override {
    clock_->sync();
    if (!wait) co_return co_await forwarding_backend::get(std::move(key), wait, timeout);
    // A long-poll answers when the lease expires on the double's clock: keep that clock moving meanwhile.
    auto answer = co_await (forwarding_backend::get(std::move(key), wait, timeout) || tick());
    co_return std::get<0>(std::move(answer));
  }

 private:
  asio::awaitable<void> tick() const {
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (;;) {
      t.expires_after(2ms);
      co_await t.async_wait(asio::use_awaitable);
      clock_->sync();
    }
  }

  std::shared_ptr<real_time> clock_;
};

}  // namespace

BOOST_AUTO_TEST_CASE(memory_backend_passes_every_check_conformance_makes_through_a_backend) {
  std::shared_ptr<real_time> clock;
  baton::cli::backend_suite suite(
      [&](asio::any_io_executor ex) -> std::shared_ptr<baton::backend> {
        // One server for the suite's backend and every other one it opens (a second client's).
        if (!clock) clock = std::make_shared<real_time>(real_time{std::make_shared<memory_backend>(ex)});
        return std::make_shared<real_time_backend>(clock);
      },
      milliseconds(10'000), std::nullopt);
  std::set<std::string_view> run;
  for (const auto& check : baton::cli::on_backend::checks()) {
    BOOST_TEST_CONTEXT("check \"" << check.name << "\"") {
      try {
        suite.run(check.run(suite));
      } catch (const baton::cli::check_skipped& e) {
        BOOST_ERROR("skipped: " << e.what());
      } catch (const std::exception& e) {
        BOOST_ERROR("failed: " << e.what());
      }
      (void)suite.take_note();
      run.insert(check.name);
    }
  }
  // The list the CLI runs against etcd, all of it.
  BOOST_TEST(run.size() == baton::cli::on_backend::checks().size());
  BOOST_TEST(run.count("a lease is held for its TTL from the acquire's sending") == 1u);
  BOOST_TEST(run.count("renew batch: a superseded token is refused") == 1u);
  BOOST_TEST(run.count("proclaim replaces the value and keeps token and expiry") == 1u);
  BOOST_TEST(run.count("lock record: it outlives release and expiry, and the old holder is refused") == 1u);
}

BOOST_AUTO_TEST_CASE(the_checks_are_found_by_the_names_the_cli_prints) {
  for (const auto& check : baton::cli::on_backend::checks())
    BOOST_TEST(baton::cli::on_backend::find(check.name) == check.run);
  for (const auto& check : baton::cli::on_backend::restart_checks())
    BOOST_TEST(baton::cli::on_backend::find(check.name) == check.run);
  // What only the wire shows has no counterpart through a backend.
  BOOST_TEST(!baton::cli::on_backend::find("malformed JSON is 400 bad_request"));
  BOOST_TEST(!baton::cli::on_backend::find("capabilities"));
  // Nor does a queued acquire, which no backend but the HTTP one has.
  BOOST_TEST(!baton::cli::on_backend::find("queued acquire: waiters are granted the lock in arrival order"));
}
