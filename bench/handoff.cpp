// SPDX-License-Identifier: Apache-2.0
// baton-bench-handoff: what waiting for one lock costs, and whether waiters are served in arrival order.
//
// N clients (each its own baton::client and connections, as N processes would have) arrive --arrival apart
// and wait for one key with async_acquire; each holds it for --hold, then releases it. Every request a client
// sends is counted through a forwarding backend. Reported, per run:
// - requests per hand-off: every acquire, queued acquire, long-poll and release the waiters sent, divided by
//   the hand-offs (one per waiter);
// - inversions: pairs of waiters granted in the opposite order of their arrival;
// - hand-off latency, two ways: from the moment a holder sends its release, and from the moment its release
//   is answered, to the moment the next holder's async_acquire completes (percentiles; the second may be
//   negative: the server answers the grant and the release after the same log write, in either order):
//   sent_*_ms and answered_*_ms.
// --mode queue uses the server's queued acquire when it offers it (feature acquire_queue, the SDK's default);
// --mode poll makes the backend say it cannot queue, so the SDK long-polls and races, as before the feature.
//
// Output: one `mode=... key=value ...` line on stdout. docs/benchmarks.md has the method and figures.

#include <baton/backend.hpp>
#include <baton/client.hpp>
#include <baton/error.hpp>
#include <baton/lease.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/program_options.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace baton::bench {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

struct counts {
  std::atomic<std::uint64_t> acquire{0}, queued{0}, poll{0}, release{0};
};

// Counts every request; with `no_queue`, refuses queued acquires as a server without the feature would.
class counting_backend final : public forwarding_backend {
 public:
  counting_backend(std::shared_ptr<backend> inner, counts& c, bool no_queue)
      : forwarding_backend(std::move(inner)), c_(c), no_queue_(no_queue) {}

  asio::awaitable<acquire_reply> acquire(std::string key, std::string owner, milliseconds ttl,
                                         std::string value, milliseconds timeout) override {
    ++c_.acquire;
    return forwarding_backend::acquire(std::move(key), std::move(owner), ttl, std::move(value), timeout);
  }
  asio::awaitable<acquire_reply> acquire_queued(std::string key, std::string owner, milliseconds ttl,
                                                std::string value, milliseconds wait,
                                                milliseconds timeout) override {
    if (no_queue_) return backend::acquire_queued(key, owner, ttl, value, wait, timeout);
    ++c_.queued;
    return forwarding_backend::acquire_queued(std::move(key), std::move(owner), ttl, std::move(value), wait,
                                              timeout);
  }
  asio::awaitable<get_reply> get(std::string key, std::optional<wait_for_change> wait,
                                 milliseconds timeout) override {
    if (wait) ++c_.poll;
    return forwarding_backend::get(std::move(key), wait, timeout);
  }
  asio::awaitable<release_reply> release(std::string key, std::string owner, std::uint64_t token,
                                         milliseconds timeout) override {
    ++c_.release;
    return forwarding_backend::release(std::move(key), std::move(owner), token, timeout);
  }

 private:
  counts& c_;
  bool no_queue_;
};

struct options {
  std::string server;
  std::string mode = "queue";
  std::size_t waiters = 50;
  milliseconds arrival{20};
  milliseconds hold{50};
  milliseconds ttl{30'000};
};

int run(const options& o) {
  asio::io_context ioc;
  counts c;
  client_config cfg;
  cfg.server_url = o.server;
  cfg.identity = "handoff";
  cfg.request_timeout = milliseconds(5000);
  cfg.max_idle_connections = 2;
  std::vector<std::unique_ptr<client>> clients;
  for (std::size_t i = 0; i < o.waiters + 1; ++i)
    clients.push_back(std::make_unique<client>(
        ioc.get_executor(), cfg,
        std::make_shared<counting_backend>(make_backend(ioc.get_executor(), cfg), c, o.mode == "poll")));
  std::vector<std::size_t> grant_order;
  std::vector<double> handoff_ms, after_answer_ms;
  std::optional<steady::time_point> release_sent, release_answered;
  std::size_t failures = 0;
  std::uint64_t base = 0;
  steady::time_point granted_at{};
  const std::string key = "bench/handoff";
  lease_options lo;
  lo.ttl = o.ttl;
  // A release was answered: its time is kept for the next grant, or, when that grant came first (the server
  // answers both after one log write, in either order), the grant's figure is taken now, negative.
  const auto release_answered_now = [&] {
    if (granted_at < *release_sent)
      release_answered = steady::now();
    else
      after_answer_ms.push_back(
          std::chrono::duration<double, std::milli>(granted_at - steady::now()).count());
  };
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        // The first client holds the key while the waiters arrive.
        auto first = co_await clients[0]->async_acquire(key, lo);
        base = c.acquire + c.queued + c.poll + c.release;  // the holder's own acquire is no hand-off's cost
        std::size_t done = 0;
        for (std::size_t i = 1; i <= o.waiters; ++i) {
          asio::co_spawn(
              ex,
              [&, i]() -> asio::awaitable<void> {
                try {
                  auto l = co_await clients[i]->async_acquire(key, lo);
                  const auto now = steady::now();
                  if (release_sent)
                    handoff_ms.push_back(
                        std::chrono::duration<double, std::milli>(now - *release_sent).count());
                  if (release_answered)
                    after_answer_ms.push_back(
                        std::chrono::duration<double, std::milli>(now - *release_answered).count());
                  granted_at = now;
                  grant_order.push_back(i);
                  asio::steady_timer t(co_await asio::this_coro::executor, o.hold);
                  co_await t.async_wait(asio::use_awaitable);
                  release_sent = steady::now();
                  release_answered.reset();
                  co_await l.async_release();
                  release_answered_now();
                } catch (const std::exception& e) {
                  ++failures;
                  std::cerr << "waiter " << i << ": " << e.what() << "\n";
                }
                ++done;
              },
              asio::detached);
          asio::steady_timer t(ex, o.arrival);
          co_await t.async_wait(asio::use_awaitable);
        }
        // Every waiter has arrived; hand the key over.
        release_sent = steady::now();
        co_await first.async_release();
        release_answered_now();
        while (done < o.waiters) {
          asio::steady_timer t(ex, milliseconds(20));
          co_await t.async_wait(asio::use_awaitable);
        }
        for (auto& cl : clients)
          co_await cl->async_shutdown(milliseconds(2000));
      },
      asio::detached);
  ioc.run();

  std::size_t inversions = 0;
  for (std::size_t a = 0; a < grant_order.size(); ++a)
    for (std::size_t b = a + 1; b < grant_order.size(); ++b)
      if (grant_order[a] > grant_order[b]) ++inversions;
  std::sort(handoff_ms.begin(), handoff_ms.end());
  std::sort(after_answer_ms.begin(), after_answer_ms.end());
  auto pct_of = [](const std::vector<double>& v, double p) {
    if (v.empty()) return 0.0;
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
  };
  auto pct = [&](double p) { return pct_of(handoff_ms, p); };
  const double requests = static_cast<double>(c.acquire + c.queued + c.poll + c.release - base);
  const double handoffs = static_cast<double>(std::max<std::size_t>(grant_order.size(), 1));
  std::printf(
      "mode=%s waiters=%zu arrival_ms=%lld hold_ms=%lld handoffs=%zu requests_per_handoff=%.2f "
      "acquires=%llu queued=%llu polls=%llu releases=%llu inversions=%zu pairs=%zu "
      "sent_p50_ms=%.2f sent_p90_ms=%.2f sent_p99_ms=%.2f sent_max_ms=%.2f "
      "answered_p50_ms=%.2f answered_p99_ms=%.2f answered_max_ms=%.2f failures=%zu\n",
      o.mode.c_str(), o.waiters, static_cast<long long>(o.arrival.count()),
      static_cast<long long>(o.hold.count()), grant_order.size(), requests / handoffs,
      static_cast<unsigned long long>(c.acquire.load()), static_cast<unsigned long long>(c.queued.load()),
      static_cast<unsigned long long>(c.poll.load()), static_cast<unsigned long long>(c.release.load()),
      inversions, grant_order.size() * (grant_order.size() - 1) / 2, pct(0.5), pct(0.9), pct(0.99),
      handoff_ms.empty() ? 0.0 : handoff_ms.back(), pct_of(after_answer_ms, 0.5),
      pct_of(after_answer_ms, 0.99), after_answer_ms.empty() ? 0.0 : after_answer_ms.back(), failures);
  return failures == 0 ? 0 : 3;
}

}  // namespace
}  // namespace baton::bench

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  baton::bench::options o;
  long long arrival = 20, hold = 50;
  po::options_description desc("baton-bench-handoff options");
  desc.add_options()("help", "this text")("server", po::value(&o.server)->required(),
                                          "lock server URL (http://127.0.0.1:7070)")(
      "mode", po::value(&o.mode)->default_value("queue"), "queue (the SDK's default) or poll (long-poll)")(
      "waiters", po::value(&o.waiters)->default_value(50), "clients waiting for the key")(
      "arrival-ms", po::value(&arrival)->default_value(20), "time between two waiters' arrivals")(
      "hold-ms", po::value(&hold)->default_value(50), "how long each holds the key");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "baton-bench-handoff: " << e.what() << "\n" << desc << "\n";
    return 2;
  }
  if (o.mode != "queue" && o.mode != "poll") {
    std::cerr << "baton-bench-handoff: --mode must be queue or poll\n";
    return 2;
  }
  o.arrival = std::chrono::milliseconds(arrival);
  o.hold = std::chrono::milliseconds(hold);
  // Each waiter has its own connections: raise the descriptor limit for large runs.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  return baton::bench::run(o);
}
