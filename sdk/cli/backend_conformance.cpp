// SPDX-License-Identifier: Apache-2.0
// baton conformance through baton::backend: the checks of conformance.cpp that a backend's interface can
// express, for servers that do not speak docs/protocol.md (etcd). Each check is a coroutine on the suite's
// io_context, on keys conformance/<random>/<check> like the HTTP checks.
//
// Timing follows the HTTP checks (conformance.cpp's header comment) with etcd's own granularity: etcd rounds
// a TTL up to whole seconds (its shortest lease is 2 s with the default heartbeat), looks for expired leases
// every 500 ms and revokes them through Raft. So the checks use TTLs of 2 s or more, a lease is never judged
// free before send(acquire) + ttl, and it must be free within `etcd_expiry_tolerance` after the TTL, rounded
// up to whole seconds, has passed since the acquire's answer.

#include "backend_conformance.hpp"

#include "baton/error.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <exception>
#include <vector>

namespace baton::cli {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr auto etcd_expiry_tolerance = 2s;
constexpr auto short_ttl = milliseconds(2000);  // etcd's shortest lease with the default heartbeat
constexpr auto long_ttl = milliseconds(30'000);

std::string why(const boost::system::error_code& ec, const std::string& diagnostic) {
  return ec.message() + (diagnostic.empty() ? "" : " (" + diagnostic + ")");
}

std::string describe(const std::optional<holder_info>& h) {
  if (!h) return "free";
  return "held by " + h->owner + " with token " + std::to_string(h->token);
}

bool held_by(const std::optional<holder_info>& h, const std::string& owner, std::uint64_t token) {
  return h && h->owner == owner && h->token == token;
}

asio::awaitable<void> sleep_until(steady::time_point t) {
  asio::steady_timer timer(co_await asio::this_coro::executor, t);
  co_await timer.async_wait(asio::use_awaitable);
}

// When a lease whose acquire was answered at `answered` must be free by.
steady::time_point expiry_bound(steady::time_point answered, milliseconds ttl) {
  return answered + std::chrono::ceil<std::chrono::seconds>(ttl) + etcd_expiry_tolerance;
}

// Reads `key` every 50 ms until it is free; returns when a read first found it so. Throws check_failed when
// it is still held at `bound`.
asio::awaitable<steady::time_point> wait_until_free(const backend_suite& s, const std::string& key,
                                                    steady::time_point bound, const std::string& what) {
  for (;;) {
    auto g = co_await s.get(key);
    if (!g.holder) co_return steady::now();
    expect(steady::now() <= bound, what + " is still " + describe(g.holder) +
                                       " (etcd tolerance: the TTL rounded up to whole seconds + " +
                                       ms(etcd_expiry_tolerance) + ")");
    co_await sleep_until(steady::now() + 50ms);
  }
}

}  // namespace

backend_suite::backend_suite(const client_config& config, std::optional<std::string> restart_command)
    : backend_suite([config](asio::any_io_executor ex) { return make_backend(std::move(ex), config); },
                    // The checks' own waits are longer than the CLI's default round trip.
                    std::max(config.request_timeout, milliseconds(10'000)), std::move(restart_command)) {}

backend_suite::backend_suite(backend_factory open, milliseconds request_timeout,
                             std::optional<std::string> restart_command)
    : open_(std::move(open)),
      request_timeout_(request_timeout),
      prefix_(run_prefix()),
      restart_command_(std::move(restart_command)) {
  backend_ = open_(ioc_.get_executor());
}

void backend_suite::run(asio::awaitable<void> check) const {
  std::exception_ptr failure;
  asio::co_spawn(ioc_, std::move(check), [&](std::exception_ptr e) {
    failure = e;
    ioc_.stop();  // idle connections may keep work queued; the check's end is the run's end
  });
  ioc_.restart();
  ioc_.run();
  if (failure) std::rethrow_exception(failure);
}

std::shared_ptr<backend> backend_suite::open() const {
  return open_(ioc_.get_executor());
}

void backend_suite::saw_token(std::uint64_t token) const {
  const auto t = static_cast<std::int64_t>(token);
  auto seen = max_token_.load();
  while (t > seen && !max_token_.compare_exchange_weak(seen, t)) {
  }
}

asio::awaitable<acquire_reply> backend_suite::acquire(backend& b, const std::string& key,
                                                      const std::string& owner, milliseconds ttl,
                                                      std::string value) const {
  const bool valued = !value.empty();
  auto r = co_await b.acquire(key, owner, ttl, std::move(value), request_timeout_);
  // A backend written before values refuses one (backend.hpp): there is nothing to check.
  if (valued && r.ec == error::invalid_config) throw check_skipped("the backend does not keep values");
  if (r.ec && r.ec != error::held) throw check_failed("acquire by " + owner + ": " + why(r.ec, r.diagnostic));
  // Granted or naming a holder, the token was issued: no restart may issue it, or a smaller one, again.
  saw_token(r.ec ? r.holder.token : r.token);
  co_return r;
}

asio::awaitable<acquire_reply> backend_suite::acquire(const std::string& key, const std::string& owner,
                                                      milliseconds ttl, std::string value) const {
  co_return co_await acquire(*backend_, key, owner, ttl, std::move(value));
}

asio::awaitable<acquire_reply> backend_suite::must_acquire(const std::string& key, const std::string& owner,
                                                           milliseconds ttl, std::string value) const {
  auto r = co_await acquire(key, owner, ttl, std::move(value));
  expect(!r.ec, "acquire by " + owner + " (ttl " + std::to_string(ttl.count()) +
                    " ms) was refused: the lock is held by " + r.holder.owner + " with token " +
                    std::to_string(r.holder.token));
  expect(r.token >= 1, "acquire by " + owner + " was granted without a token >= 1");
  co_return r;
}

asio::awaitable<renew_reply> backend_suite::renew(const std::string& key, const std::string& owner,
                                                  std::uint64_t token, milliseconds ttl) const {
  auto r = co_await backend_->renew(key, owner, token, ttl, request_timeout_);
  if (r.ec && r.ec != error::lease_lost)
    throw check_failed("renew by " + owner + ": " + why(r.ec, r.diagnostic));
  co_return r;
}

asio::awaitable<proclaim_reply> backend_suite::proclaim(const std::string& key, const std::string& owner,
                                                        std::uint64_t token, std::string value) const {
  auto r = co_await backend_->proclaim(key, owner, token, std::move(value), request_timeout_);
  if (r.ec == error::invalid_config) throw check_skipped("proclaim: " + why(r.ec, r.diagnostic));
  if (r.ec && r.ec != error::lease_lost)
    throw check_failed("proclaim by " + owner + ": " + why(r.ec, r.diagnostic));
  co_return r;
}

asio::awaitable<record_write_reply> backend_suite::write_record(const std::string& key,
                                                                const std::string& owner, std::uint64_t token,
                                                                std::string value) const {
  auto r = co_await backend_->write_record(key, owner, token, std::move(value), request_timeout_);
  if (r.ec == error::invalid_config) throw check_skipped("lock record: " + why(r.ec, r.diagnostic));
  if (r.ec && r.ec != error::lease_lost && r.ec != error::stale_token)
    throw check_failed("record write by " + owner + ": " + why(r.ec, r.diagnostic));
  co_return r;
}

asio::awaitable<std::optional<lock_record>> backend_suite::read_record(const std::string& key) const {
  auto r = co_await backend_->read_record(key, request_timeout_);
  if (r.ec == error::invalid_config) throw check_skipped("lock record: " + why(r.ec, r.diagnostic));
  if (r.ec) throw check_failed("record read: " + why(r.ec, r.diagnostic));
  co_return r.record;
}

asio::awaitable<std::vector<renew_reply>> backend_suite::renew_batch(std::vector<renew_entry> entries) const {
  const auto n = entries.size();
  auto out = co_await backend_->renew_batch(std::move(entries), request_timeout_);
  expect(out.size() == n,
         "a batch renewal of " + std::to_string(n) + " entries answered " + std::to_string(out.size()));
  for (std::size_t i = 0; i < out.size(); ++i)
    if (out[i].ec && out[i].ec != error::lease_lost)
      throw check_failed("batch renewal, entry " + std::to_string(i) + ": " +
                         why(out[i].ec, out[i].diagnostic));
  co_return out;
}

asio::awaitable<release_outcome> backend_suite::release(const std::string& key, const std::string& owner,
                                                        std::uint64_t token) const {
  auto r = co_await backend_->release(key, owner, token, request_timeout_);
  if (r.ec) throw check_failed("release by " + owner + ": " + why(r.ec, r.diagnostic));
  co_return r.outcome;
}

asio::awaitable<get_reply> backend_suite::get(const std::string& key) const {
  auto r = co_await backend_->get(key, std::nullopt, request_timeout_);
  if (r.ec) throw check_failed("get: " + why(r.ec, r.diagnostic));
  co_return r;
}

asio::awaitable<get_reply> backend_suite::poll(backend& b, const std::string& key, std::uint64_t token,
                                               milliseconds bound) const {
  auto r = co_await b.get(key, wait_for_change{token, bound}, request_timeout_ + bound);
  if (r.ec) throw check_failed("long-poll: " + why(r.ec, r.diagnostic));
  co_return r;
}

asio::awaitable<get_reply> backend_suite::poll_value(backend& b, const std::string& key, std::uint64_t token,
                                                     std::string value, milliseconds bound) const {
  const wait_for_change wait{token, bound, std::move(value)};
  auto r = co_await b.get(key, wait, request_timeout_ + bound);
  if (r.ec) throw check_failed("long-poll: " + why(r.ec, r.diagnostic));
  co_return r;
}

const restart_state& backend_suite::restarted() const {
  if (!restart_command_) throw check_skipped("no --restart-command");
  if (!restart_.error.empty()) throw check_failed(restart_.error);
  return restart_;
}

bool is_backend_url(const std::string& url) {
  return url.rfind("etcd://", 0) == 0 || url.rfind("etcds://", 0) == 0;
}

std::optional<std::string> unreachable(const backend_suite& s) {
  try {
    s.run([](const backend_suite& s) -> asio::awaitable<void> { co_await s.get(s.key("reachable")); }(s));
    return std::nullopt;
  } catch (const check_failed& e) {
    return e.what();
  }
}

restart_state restart_backend(const backend_suite& s) {
  restart_state st;
  try {
    s.run([](const backend_suite& s, restart_state& st) -> asio::awaitable<void> {
      st.held_key = s.key("restart-held");
      st.held_owner = "survivor";
      // Long enough to outlast the command and the wait for the server's return.
      const auto held = co_await s.must_acquire(st.held_key, st.held_owner, milliseconds(300'000));
      st.held_token = static_cast<std::int64_t>(held.token);
      st.released_key = s.key("restart-released");
      const auto r = co_await s.must_acquire(st.released_key, "leaver", milliseconds(300'000));
      expect(co_await s.release(st.released_key, "leaver", r.token) == release_outcome::released,
             "release before the restart was not answered \"released\"");
      const std::string proclaimed = "proclaimed-before-restart:80";
      auto p = co_await s.main().proclaim(st.held_key, st.held_owner, held.token, proclaimed,
                                          milliseconds(10'000));
      if (p.ec != error::invalid_config) {
        expect(!p.ec, "proclaim before the restart: " + why(p.ec, p.diagnostic));
        st.proclaimed_value = proclaimed;
      }
      const std::string recorded = "recorded-before-restart";
      auto w = co_await s.main().write_record(st.held_key, st.held_owner, held.token, recorded,
                                              milliseconds(10'000));
      if (w.ec != error::invalid_config) {
        expect(!w.ec, "record write before the restart: " + why(w.ec, w.diagnostic));
        st.record_value = recorded;
      }
    }(s, st));
    st.max_token_before = s.max_token();
    if (auto failed = run_restart_command(*s.restart_command())) throw check_failed(*failed);
    // Unlike an HTTP server, a backend shows no connection to watch close: the server is back when a read
    // is answered again.
    s.run([](const backend_suite& s, const restart_state& st) -> asio::awaitable<void> {
      const auto until = steady::now() + restart_return_bound;
      for (;;) {
        try {
          co_await s.get(st.held_key);
          co_return;
        } catch (const check_failed& e) {
          expect(steady::now() < until, "the server did not answer a read within " +
                                            std::to_string(restart_return_bound / 1s) +
                                            " s after --restart-command: " + e.what());
        }
        co_await sleep_until(steady::now() + 100ms);
      }
    }(s, st));
  } catch (const std::exception& e) {
    st.error = std::string("restart: ") + e.what();
  }
  return st;
}

namespace on_backend {

asio::awaitable<void> concurrent_acquires(const backend_suite& s) {
  // Each racer is a client of its own, with connections of its own.
  constexpr int n = 16;
  const auto key = s.key("concurrent");
  std::vector<std::shared_ptr<backend>> racers;
  for (int i = 0; i < n; ++i)
    racers.push_back(s.open());
  std::vector<std::string> owners;
  for (int i = 0; i < n; ++i)
    owners.push_back("racer-" + std::to_string(i));
  std::vector<acquire_reply> replies(n);
  std::exception_ptr failure;
  int left = n;
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer all_answered(ex, steady::time_point::max());
  for (int i = 0; i < n; ++i)
    asio::co_spawn(
        ex,
        s.acquire(*racers[static_cast<std::size_t>(i)], key, owners[static_cast<std::size_t>(i)], long_ttl),
        [&, i](std::exception_ptr e, acquire_reply r) {
          if (e) failure = e;
          replies[static_cast<std::size_t>(i)] = std::move(r);
          if (--left == 0) all_answered.cancel();
        });
  co_await all_answered.async_wait(asio::as_tuple(asio::use_awaitable));
  for (auto& r : racers)
    r->close();
  if (failure) std::rethrow_exception(failure);
  std::vector<int> winners;
  for (int i = 0; i < n; ++i)
    if (!replies[static_cast<std::size_t>(i)].ec) winners.push_back(i);
  for (int i : winners)  // tidy up
    co_await s.release(key, "racer-" + std::to_string(i), replies[static_cast<std::size_t>(i)].token);
  expect(winners.size() == 1,
         std::to_string(winners.size()) + " of " + std::to_string(n) +
             " concurrent acquirers of one free key were granted it (expected exactly 1)");
  const auto winner = "racer-" + std::to_string(winners.front());
  const auto token = replies[static_cast<std::size_t>(winners.front())].token;
  for (int i = 0; i < n; ++i) {
    const auto& r = replies[static_cast<std::size_t>(i)];
    if (i != winners.front())
      expect(r.holder.owner == winner && r.holder.token == token,
             "a refusal names " + r.holder.owner + " with token " + std::to_string(r.holder.token) +
                 " as the holder, not the winner " + winner + " with token " + std::to_string(token));
  }
}

asio::awaitable<void> held_names_holder(const backend_suite& s) {
  const auto key = s.key("held");
  auto a = co_await s.must_acquire(key, "holder-a", long_ttl);
  auto b = co_await s.acquire(key, "other-b", long_ttl);
  co_await s.release(key, "holder-a", a.token);
  expect(b.ec == error::held, "acquire by another owner while held was granted");
  expect(b.holder.owner == "holder-a" && b.holder.token == a.token,
         "the refusal does not name the holder holder-a with token " + std::to_string(a.token) +
             ": it names " + b.holder.owner + " with token " + std::to_string(b.holder.token));
  expect(b.holder.ttl_remaining > 0ms && b.holder.ttl_remaining <= long_ttl,
         "the refusal's remaining TTL is " + std::to_string(b.holder.ttl_remaining.count()) +
             " ms, not within (0, 30000]");
}

asio::awaitable<void> reacquire_larger_token(const backend_suite& s) {
  const auto key = s.key("reacquire");
  auto first = co_await s.must_acquire(key, "same", long_ttl);
  auto second = co_await s.must_acquire(key, "same", long_ttl);
  co_await s.release(key, "same", second.token);
  expect(second.token > first.token, "the same owner's second acquire got token " +
                                         std::to_string(second.token) + ", not larger than " +
                                         std::to_string(first.token));
}

// A shorter lease re-acquired for longer must show the longer remaining TTL (etcd reports whole seconds).
asio::awaitable<void> reacquire_refreshes_expiry(const backend_suite& s) {
  const auto key = s.key("reacquire-expiry");
  co_await s.must_acquire(key, "owner-a", short_ttl);
  const auto sent = steady::now();
  auto again = co_await s.must_acquire(key, "owner-a", long_ttl);
  auto g = co_await s.get(key);
  co_await s.release(key, "owner-a", again.token);
  expect(held_by(g.holder, "owner-a", again.token), "a read after the re-acquire should name its token " +
                                                        std::to_string(again.token) + ": " +
                                                        describe(g.holder));
  const auto at_least = long_ttl - std::chrono::ceil<milliseconds>(steady::now() - sent) - 1s;
  expect(g.holder->ttl_remaining >= at_least && g.holder->ttl_remaining <= long_ttl,
         "a lease acquired for 2000 ms, then re-acquired by its owner for 30000 ms, has " +
             std::to_string(g.holder->ttl_remaining.count()) + " ms left (expected " +
             std::to_string(at_least.count()) + " to 30000: the re-acquire must set a new expiry)");
}

// docs/protocol.md, "renew" and "acquire": no request shortens a lease. A long lease renewed, then
// re-acquired by its owner, each for a short TTL, keeps its long expiry (etcd reports whole seconds: a second
// of slack).
asio::awaitable<void> shorter_requests_keep_expiry(const backend_suite& s) {
  const auto key = s.key("no-shortening");
  const auto sent = steady::now();
  auto a = co_await s.must_acquire(key, "owner-a", long_ttl);
  auto shorter = co_await s.renew(key, "owner-a", a.token, short_ttl);
  expect(!shorter.ec, "renew with " + ms(short_ttl) + " of a lease acquired for " + ms(long_ttl) + ": " +
                          why(shorter.ec, shorter.diagnostic));
  auto after_renew = co_await s.get(key);
  auto again = co_await s.must_acquire(key, "owner-a", short_ttl);
  auto after_acquire = co_await s.get(key);
  co_await s.release(key, "owner-a", again.token);
  const auto at_least = long_ttl - std::chrono::ceil<milliseconds>(steady::now() - sent) - 1s;
  auto judge = [&](const get_reply& g, std::uint64_t token, const std::string& what) {
    expect(held_by(g.holder, "owner-a", token), "after the " + what + ": " + describe(g.holder));
    expect(g.holder->ttl_remaining >= at_least,
           "a lease acquired for " + ms(long_ttl) + ", then " + what + " for " + ms(short_ttl) + ", has " +
               std::to_string(g.holder->ttl_remaining.count()) + " ms left (expected at least " +
               std::to_string(at_least.count()) + ": a shorter request must not move the expiry earlier)");
  };
  judge(after_renew, a.token, "renew");
  judge(after_acquire, again.token, "renew and a re-acquire by its owner");
}

void expect_lost(const renew_reply& r, std::initializer_list<const char*> reasons, const std::string& what) {
  expect(r.ec == error::lease_lost, what + " was granted");
  std::string allowed;
  for (auto* x : reasons) {
    if (r.lost_reason == x) return;
    allowed += (allowed.empty() ? "" : " or ") + std::string(x);
  }
  throw check_failed(what + ": reason should be " + allowed + ", got \"" + r.lost_reason + "\"");
}

asio::awaitable<void> renew_wrong_owner(const backend_suite& s) {
  const auto key = s.key("renew-owner");
  auto a = co_await s.must_acquire(key, "owner-a", long_ttl);
  auto other = co_await s.renew(key, "owner-b", a.token, long_ttl);
  auto own = co_await s.renew(key, "owner-a", a.token, long_ttl);
  co_await s.release(key, "owner-a", a.token);
  expect_lost(other, {"owner_mismatch"}, "renew by another owner");
  expect(!own.ec, "the holder's own renew after the refusal: " + why(own.ec, own.diagnostic));
}

asio::awaitable<void> renew_wrong_token(const backend_suite& s) {
  const auto key = s.key("renew-token");
  auto first = co_await s.must_acquire(key, "owner-a", long_ttl);
  auto second = co_await s.must_acquire(key, "owner-a", long_ttl);
  auto old = co_await s.renew(key, "owner-a", first.token, long_ttl);
  auto made_up = co_await s.renew(key, "owner-a", second.token + 1'000'000, long_ttl);
  co_await s.release(key, "owner-a", second.token);
  expect_lost(old, {"token_mismatch"}, "renew with the superseded token");
  expect_lost(made_up, {"token_mismatch"}, "renew with a token never issued for this lease");
}

asio::awaitable<void> renew_expired(const backend_suite& s) {
  const auto key = s.key("renew-expired");
  auto a = co_await s.must_acquire(key, "owner-a", short_ttl);
  co_await wait_until_free(s, key, expiry_bound(steady::now(), short_ttl), "a 2000 ms lease");
  auto r = co_await s.renew(key, "owner-a", a.token, long_ttl);
  if (!r.ec) co_await s.release(key, "owner-a", a.token);
  expect_lost(r, {"expired", "not_held"}, "renew of a 2000 ms lease after it expired");
}

// A renew that succeeds must move the expiry: renewed every third of its TTL, a lease is still held after
// that first TTL has passed. A renew sent after its term ended (a slow machine) proves nothing; the TTL
// doubles.
asio::awaitable<void> renew_extends(const backend_suite& s) {
  for (auto ttl = short_ttl; ttl <= 2 * short_ttl; ttl *= 2) {
    const auto key = s.key("renew-extends-" + std::to_string(ttl.count()));
    const auto sent = steady::now();
    auto a = co_await s.must_acquire(key, "renewer", ttl);
    auto term_from = sent;  // the lease is held at least until term_from + ttl
    bool conclusive = true;
    for (int i = 0; i < 4 && conclusive; ++i) {
      co_await sleep_until(term_from + ttl / 3);
      const auto renew_sent = steady::now();
      auto r = co_await s.renew(key, "renewer", a.token, ttl);
      conclusive = renew_sent < term_from + ttl;
      if (!conclusive) break;
      expect(!r.ec, "renew " + std::to_string(i + 1) + ", sent " + ms(renew_sent - term_from) + " into a " +
                        std::to_string(ttl.count()) + " ms term: " + why(r.ec, r.diagnostic));
      term_from = renew_sent;
    }
    auto g = co_await s.get(key);
    const auto received = steady::now();
    co_await s.release(key, "renewer", a.token);
    if (!conclusive || received >= term_from + ttl) continue;
    expect(held_by(g.holder, "renewer", a.token),
           "a " + std::to_string(ttl.count()) + " ms lease renewed every " + std::to_string(ttl.count() / 3) +
               " ms is not held " + ms(received - sent) +
               " after its acquire (the renews succeeded but did not extend it): " + describe(g.holder));
    co_return;
  }
  throw check_failed("inconclusive: the renews could not be sent within their terms (machine too slow?)");
}

asio::awaitable<void> release_conditional(const backend_suite& s) {
  const auto key = s.key("release-conditional");
  auto a = co_await s.must_acquire(key, "owner-a", long_ttl);
  auto by_other = co_await s.release(key, "owner-b", a.token);
  auto by_wrong_token = co_await s.release(key, "owner-a", a.token + 1'000'000);
  auto still = co_await s.get(key);
  co_await s.release(key, "owner-a", a.token);
  expect(by_other == release_outcome::not_owner, "release by another owner was not refused as not_owner");
  expect(by_wrong_token == release_outcome::not_owner,
         "release with a wrong token was not refused as not_owner");
  expect(held_by(still.holder, "owner-a", a.token),
         "after the refused releases the lock should still be held by owner-a with token " +
             std::to_string(a.token) + ", a read says " + describe(still.holder));
}

// The owner's older token is superseded by its re-acquire: a delayed renew or release carrying it must change
// nothing, and the current token keeps working.
asio::awaitable<void> superseded_token_refused(const backend_suite& s) {
  const auto key = s.key("superseded");
  auto first = co_await s.must_acquire(key, "owner-a", long_ttl);
  auto second = co_await s.must_acquire(key, "owner-a", long_ttl);
  auto old_release = co_await s.release(key, "owner-a", first.token);
  auto old_renew = co_await s.renew(key, "owner-a", first.token, long_ttl);
  auto still = co_await s.get(key);
  auto renew = co_await s.renew(key, "owner-a", second.token, long_ttl);
  co_await s.release(key, "owner-a", second.token);
  expect(old_release == release_outcome::not_owner, "release with the superseded token was not refused");
  expect_lost(old_renew, {"token_mismatch"}, "renew with the superseded token");
  expect(held_by(still.holder, "owner-a", second.token),
         "after the refused release and renew with the superseded token, a read should name token " +
             std::to_string(second.token) + ": " + describe(still.holder));
  expect(!renew.ec, "renew with the current token afterwards: " + why(renew.ec, renew.diagnostic));
}

// A batch renewal through the backend (the etcd backend: the keys read in one txn, each lease kept alive on
// its own): each entry answered as its renew would be, in order. The HTTP check adds an expired lease; its
// 2 s minimum on etcd makes that one wait longer than it shows here.
asio::awaitable<void> renew_batch_mixed(const backend_suite& s) {
  const auto live = s.key("batch-live"), other = s.key("batch-other"), free = s.key("batch-free"),
             made_up = s.key("batch-made-up");
  auto mine = co_await s.must_acquire(live, "batcher", long_ttl);
  auto theirs = co_await s.must_acquire(other, "someone-else", long_ttl);
  auto held = co_await s.must_acquire(made_up, "batcher", long_ttl);
  std::vector<renew_entry> entries;
  entries.push_back(renew_entry{live, "batcher", mine.token, long_ttl});
  entries.push_back(renew_entry{other, "batcher", theirs.token, long_ttl});
  entries.push_back(renew_entry{free, "batcher", mine.token, long_ttl});
  entries.push_back(renew_entry{made_up, "batcher", held.token + 1'000'000, long_ttl});
  auto out = co_await s.renew_batch(std::move(entries));
  auto still = co_await s.get(other);
  co_await s.release(live, "batcher", mine.token);
  co_await s.release(other, "someone-else", theirs.token);
  co_await s.release(made_up, "batcher", held.token);
  expect(!out[0].ec, "entry 0 (the batcher's live lease): " + why(out[0].ec, out[0].diagnostic));
  expect_lost(out[1], {"owner_mismatch"}, "entry 1 (a key another owner holds)");
  expect_lost(out[2], {"not_held"}, "entry 2 (a key nobody holds)");
  expect_lost(out[3], {"token_mismatch"}, "entry 3 (the batcher's lease, a token never issued)");
  expect(held_by(still.holder, "someone-else", theirs.token),
         "the entry refused owner_mismatch changed its lease: " + describe(still.holder));
}

asio::awaitable<void> renew_batch_superseded(const backend_suite& s) {
  const auto key = s.key("batch-superseded"), beside = s.key("batch-beside");
  auto first = co_await s.must_acquire(key, "batcher", long_ttl);
  auto second = co_await s.must_acquire(key, "batcher", long_ttl);
  auto next = co_await s.must_acquire(beside, "batcher", long_ttl);
  std::vector<renew_entry> entries;
  entries.push_back(renew_entry{key, "batcher", first.token, long_ttl});
  entries.push_back(renew_entry{beside, "batcher", next.token, long_ttl});
  auto out = co_await s.renew_batch(std::move(entries));
  auto still = co_await s.get(key);
  co_await s.release(key, "batcher", second.token);
  co_await s.release(beside, "batcher", next.token);
  expect_lost(out[0], {"token_mismatch"}, "a batch entry with the superseded token");
  expect(!out[1].ec, "the entry beside it with its current token: " + why(out[1].ec, out[1].diagnostic));
  expect(held_by(still.holder, "batcher", second.token),
         "after a batch entry with the superseded token, a read should name token " +
             std::to_string(second.token) + ": " + describe(still.holder));
}

asio::awaitable<void> release_idempotent(const backend_suite& s) {
  const auto key = s.key("release-idempotent");
  auto a = co_await s.must_acquire(key, "owner-a", long_ttl);
  expect(co_await s.release(key, "owner-a", a.token) == release_outcome::released,
         "release by the holder was not answered \"released\"");
  expect(co_await s.release(key, "owner-a", a.token) == release_outcome::already_free,
         "the same release again was not answered \"already free\"");
  auto free = co_await s.get(key);
  expect(!free.holder, "a read after the release: " + describe(free.holder));
  expect(co_await s.release(s.key("release-never-held"), "owner-a", 1) == release_outcome::already_free,
         "release of a key nobody holds was not answered \"already free\"");
}

asio::awaitable<void> tokens_increase(const backend_suite& s) {
  const auto key = s.key("tokens");
  auto t1 = (co_await s.must_acquire(key, "owner-a", long_ttl)).token;
  co_await s.release(key, "owner-a", t1);
  auto t2 = (co_await s.must_acquire(key, "owner-b", short_ttl)).token;
  expect(t2 > t1,
         "token after a release is " + std::to_string(t2) + ", not larger than " + std::to_string(t1));
  co_await wait_until_free(s, key, expiry_bound(steady::now(), short_ttl), "a 2000 ms lease");
  auto t3 = (co_await s.must_acquire(key, "owner-c", long_ttl)).token;
  auto t4 = (co_await s.must_acquire(s.key("tokens-other-key"), "owner-d", long_ttl)).token;
  co_await s.release(key, "owner-c", t3);
  co_await s.release(s.key("tokens-other-key"), "owner-d", t4);
  expect(t3 > t2,
         "token after an expiry is " + std::to_string(t3) + ", not larger than " + std::to_string(t2));
  expect(t4 > t3,
         "token on another key is " + std::to_string(t4) + ", not larger than " + std::to_string(t3));
}

asio::awaitable<void> expiry_on_time(const backend_suite& s) {
  // Held while a read's answer arrives before send(acquire) + ttl; a slow machine may leave no read that
  // fast, so the TTL doubles until one is.
  for (auto ttl = short_ttl; ttl <= 2 * short_ttl; ttl *= 2) {
    const auto key = s.key("expiry-" + std::to_string(ttl.count()));
    const auto sent = steady::now();
    auto a = co_await s.must_acquire(key, "owner-a", ttl);
    const auto answered = steady::now();
    co_await sleep_until(sent + ttl * 6 / 10);
    auto g = co_await s.get(key);
    const bool conclusive = steady::now() < sent + ttl;
    if (conclusive)
      expect(held_by(g.holder, "owner-a", a.token),
             "a read answered " + ms(steady::now() - sent) + " after sending the acquire of a " +
                 std::to_string(ttl.count()) + " ms lease does not show it held: " + describe(g.holder));
    const auto freed = co_await wait_until_free(s, key, expiry_bound(answered, ttl),
                                                "a " + std::to_string(ttl.count()) + " ms lease");
    expect(freed >= sent + ttl, "the lease was reported free before its TTL had passed");
    if (conclusive) {
      s.note("freed " + ms(freed - answered) +
             " after the acquire's answer; etcd tolerance: the TTL rounded up "
             "to whole seconds + " +
             ms(etcd_expiry_tolerance));
      co_return;
    }
  }
  throw check_failed(
      "inconclusive: no read was answered before the lease's TTL had passed (machine too slow?)");
}

// A lease acquired by a request sent at client time a is held until at least a + ttl: reads sent back to back
// over the last 60 ms before that instant must all find it held.
asio::awaitable<void> never_expires_early(const backend_suite& s) {
  for (auto ttl = short_ttl; ttl <= 2 * short_ttl; ttl *= 2) {
    const auto key = s.key("never-early-" + std::to_string(ttl.count()));
    const auto end = steady::now() + ttl;
    auto a = co_await s.must_acquire(key, "punctual", ttl);
    co_await sleep_until(end - 60ms);
    int close_reads = 0;  // judged reads sent within the last 10 ms
    for (;;) {
      const auto sent = steady::now();
      auto g = co_await s.get(key);
      const auto received = steady::now();
      if (received >= end) break;
      expect(held_by(g.holder, "punctual", a.token),
             "a " + std::to_string(ttl.count()) + " ms lease is not held by a read answered " +
                 ms(end - received) + " before its TTL ended: " + describe(g.holder));
      if (sent >= end - 10ms) ++close_reads;
    }
    co_await s.release(key, "punctual", a.token);
    if (close_reads > 0) co_return;
  }
  throw check_failed(
      "inconclusive: no read was answered within 10 ms before a lease's TTL ended (machine too slow?)");
}

asio::awaitable<void> long_ttl_held(const backend_suite& s) {
  const auto key = s.key("long-ttl");
  constexpr auto hour = milliseconds(3'600'000);
  const auto sent = steady::now();
  auto a = co_await s.must_acquire(key, "patient", hour);
  auto g = co_await s.get(key);
  auto r = co_await s.renew(key, "patient", a.token, hour);
  auto after = co_await s.get(key);
  co_await s.release(key, "patient", a.token);
  // etcd reports whole seconds.
  const auto at_least = hour - std::chrono::ceil<milliseconds>(steady::now() - sent) - 1s;
  for (auto* x : {&g, &after})
    expect(held_by(x->holder, "patient", a.token) && x->holder->ttl_remaining >= at_least &&
               x->holder->ttl_remaining <= hour,
           std::string(x == &g ? "a read" : "a read after a renew") +
               " of a 1-hour lease should show it held with " + std::to_string(at_least.count()) +
               " to 3600000 ms left: " + describe(x->holder) +
               (x->holder ? ", " + std::to_string(x->holder->ttl_remaining.count()) + " ms left" : ""));
  expect(!r.ec, "renew for 1 hour: " + why(r.ec, r.diagnostic));
}

asio::awaitable<void> long_poll_release(const backend_suite& s) {
  auto poller = s.open();
  on_time_tally tally;
  for (int n = 0; !tally.done(); ++n) {
    const auto key = s.key("poll-release-" + std::to_string(n));
    auto a = co_await s.must_acquire(key, "owner-a", long_ttl);
    steady::time_point answered{}, release_sent{}, released{};
    auto polling = [&]() -> asio::awaitable<get_reply> {
      auto r = co_await s.poll(*poller, key, a.token, 300ms + wake_give_up);
      answered = steady::now();
      co_return r;
    };
    auto releasing = [&]() -> asio::awaitable<release_outcome> {
      co_await sleep_until(steady::now() + 300ms);
      release_sent = steady::now();
      auto o = co_await s.release(key, "owner-a", a.token);
      released = steady::now();
      co_return o;
    };
    auto [r, outcome] = co_await (polling() && releasing());
    expect(answered >= release_sent,
           "the long-poll answered while the holder's token was unchanged: " + describe(r.holder));
    expect(outcome == release_outcome::released, "release was not answered \"released\"");
    if (r.holder) {
      tally.add({{}, "the long-poll was not woken by the release: " + describe(r.holder)});
      continue;
    }
    const auto took = std::max(answered - released, steady::duration::zero());
    tally.add({took, took > wake_bound
                         ? std::optional("the long-poll answered " + ms(took) + " after the release's answer")
                         : std::nullopt});
  }
  poller->close();
  s.note(tally.result());
}

// etcd decides an expiry on its own schedule (the header comment), so the wake-up is measured from the first
// of reads every 50 ms that found the lease gone, not from the TTL.
asio::awaitable<void> long_poll_expiry(const backend_suite& s) {
  auto poller = s.open();
  on_time_tally tally;
  for (int n = 0; !tally.done(); ++n) {
    const auto key = s.key("poll-expiry-" + std::to_string(n));
    const auto sent = steady::now();
    auto a = co_await s.must_acquire(key, "owner-a", short_ttl);
    const auto bound = expiry_bound(steady::now(), short_ttl);
    steady::time_point answered{};
    auto polling = [&]() -> asio::awaitable<get_reply> {
      auto r = co_await s.poll(*poller, key, a.token,
                               std::chrono::ceil<milliseconds>(bound - steady::now()) + wake_give_up);
      answered = steady::now();
      co_return r;
    };
    auto [r, seen_free] = co_await (
        polling() && wait_until_free(s, key, bound, "a " + std::to_string(short_ttl.count()) + " ms lease"));
    expect(answered >= sent + short_ttl, "the long-poll reported the lease free before its TTL had passed");
    if (r.holder) {
      tally.add({{}, "the long-poll was not woken by the expiry: " + describe(r.holder)});
      continue;
    }
    const auto took = std::max(answered - seen_free, steady::duration::zero());
    tally.add({took, took > wake_bound ? std::optional("the long-poll answered " + ms(took) +
                                                       " after a read found the lease expired")
                                       : std::nullopt});
  }
  poller->close();
  s.note(tally.result());
}

asio::awaitable<void> long_poll_stale_token(const backend_suite& s) {
  on_time_tally tally;
  for (int n = 0; !tally.done(); ++n) {
    const auto key = s.key("poll-stale-" + std::to_string(n));
    auto first = co_await s.must_acquire(key, "owner-a", long_ttl);
    auto second = co_await s.must_acquire(key, "owner-a", long_ttl);
    // A token the key's holder does not have: superseded, 0 while held, and one never issued.
    const std::pair<std::uint64_t, std::string> tokens[] = {
        {first.token, "the superseded token " + std::to_string(first.token)},
        {0, "token 0 while the lock is held"},
        {second.token + 1'000'000, "a token never issued"},
    };
    wake_try t;  // the slowest of the three
    for (const auto& [token, about] : tokens) {
      const auto sent = steady::now();
      auto r = co_await s.poll(s.main(), key, token, wake_give_up);
      const auto took = steady::now() - sent;
      if (!held_by(r.holder, "owner-a", second.token)) {
        co_await s.release(key, "owner-a", second.token);
        throw check_failed("a long-poll with " + about + " should name token " +
                           std::to_string(second.token) + ": " + describe(r.holder));
      }
      t.took = std::max(t.took, took);
      if (took > wake_bound) {
        t.late = "a long-poll with " + about + " answered after " + ms(took);
        break;
      }
    }
    co_await s.release(key, "owner-a", second.token);
    tally.add(t);
  }
  s.note(tally.result());
}

// A lease's value is published with it (read, long-poll, refusal), replaced by a same-owner re-acquire and
// kept by a renew.
asio::awaitable<void> value_round_trip(const backend_suite& s) {
  const auto key = s.key("value");
  auto shown = [](const std::optional<holder_info>& h, const std::string& want, const std::string& what) {
    expect(h.has_value(), what + ": the lock is free");
    expect(h->value == want, what + ": expected value \"" + want + "\", got \"" + h->value + "\"");
  };
  co_await s.must_acquire(key, "valued-a", long_ttl, "10.0.0.1:8080");
  shown((co_await s.get(key)).holder, "10.0.0.1:8080", "a read of a lease acquired with a value");
  shown((co_await s.poll(s.main(), key, 0, 5000ms)).holder, "10.0.0.1:8080", "a long-poll's answer");
  auto held = co_await s.acquire(key, "other-b", long_ttl, "10.0.0.2:8080");
  expect(held.ec == error::held, "acquire by another owner while held was granted");
  shown(held.holder, "10.0.0.1:8080", "the held refusal");
  auto again = co_await s.must_acquire(key, "valued-a", long_ttl, "10.0.0.1:9090");
  shown((co_await s.get(key)).holder, "10.0.0.1:9090",
        "a read after a same-owner re-acquire with a new value");
  auto r = co_await s.renew(key, "valued-a", again.token, long_ttl);
  expect(!r.ec, "renew: " + why(r.ec, r.diagnostic));
  shown((co_await s.get(key)).holder, "10.0.0.1:9090", "a read after a renew");
  auto last = co_await s.must_acquire(key, "valued-a", long_ttl);
  shown((co_await s.get(key)).holder, "", "a read after a same-owner re-acquire without a value");
  co_await s.release(key, "valued-a", last.token);
}

// docs/protocol.md, "proclaim": the value is replaced under the lease's own token; read, long-poll and
// refusal show it.
asio::awaitable<void> proclaim_replaces_value(const backend_suite& s) {
  const auto key = s.key("proclaim");
  auto a = co_await s.must_acquire(key, "leader-a", long_ttl, "10.0.0.1:8080");
  auto p = co_await s.proclaim(key, "leader-a", a.token, "10.0.0.2:8080");
  if (p.ec) co_await s.release(key, "leader-a", a.token);
  expect(!p.ec, "proclaim by the holder: " + why(p.ec, p.diagnostic));
  auto g = co_await s.get(key);
  expect(held_by(g.holder, "leader-a", a.token) && g.holder->value == "10.0.0.2:8080",
         "a read after a proclaim should show token " + std::to_string(a.token) +
             " with value \"10.0.0.2:8080\": " + describe(g.holder) +
             (g.holder ? " value \"" + g.holder->value + "\"" : ""));
  expect(g.holder->ttl_remaining <= long_ttl, "a proclaim extended the lease past its TTL");
  auto held = co_await s.acquire(key, "other-b", long_ttl, "10.0.0.9:8080");
  expect(held.ec == error::held && held.holder.value == "10.0.0.2:8080",
         "the held refusal after a proclaim should show the new value, got \"" + held.holder.value + "\"");
  co_await s.release(key, "leader-a", a.token);
}

asio::awaitable<void> proclaim_refused(const backend_suite& s) {
  const auto key = s.key("proclaim-refused");
  auto lost = [](const proclaim_reply& r, const char* reason, const std::string& what) {
    expect(r.ec == error::lease_lost && r.lost_reason == reason,
           what + ": expected lost (" + reason + "), got " + why(r.ec, r.diagnostic) + " " + r.lost_reason);
  };
  lost(co_await s.proclaim(key, "leader-a", 1, "x"), "not_held", "proclaim of a free key");
  auto first = co_await s.must_acquire(key, "leader-a", long_ttl, "first");
  auto second = co_await s.must_acquire(key, "leader-a", long_ttl, "second");
  lost(co_await s.proclaim(key, "leader-a", first.token, "stale"), "token_mismatch",
       "proclaim with the superseded token");
  lost(co_await s.proclaim(key, "other-b", second.token, "stolen"), "owner_mismatch",
       "proclaim by another owner");
  auto g = co_await s.get(key);
  co_await s.release(key, "leader-a", second.token);
  expect(held_by(g.holder, "leader-a", second.token) && g.holder->value == "second",
         "a refused proclaim changed the lease: " + describe(g.holder));
}

asio::awaitable<void> proclaim_wakes_value_poll(const backend_suite& s) {
  const auto key = s.key("proclaim-poll");
  auto a = co_await s.must_acquire(key, "leader-a", long_ttl, "old:80");
  auto other = s.open();
  auto proclaim_later = [&]() -> asio::awaitable<proclaim_reply> {
    co_await sleep_until(steady::now() + 300ms);
    co_return co_await s.proclaim(key, "leader-a", a.token, "new:80");
  };
  const auto sent = steady::now();
  auto polling = s.poll_value(*other, key, a.token, "old:80", wake_give_up + 300ms);
  auto proclaiming = proclaim_later();
  auto [r, p] = co_await (std::move(polling) && std::move(proclaiming));
  const auto took = steady::now() - sent;
  co_await s.release(key, "leader-a", a.token);
  expect(!p.ec, "proclaim: " + why(p.ec, p.diagnostic));
  expect(r.holder && r.holder->value == "new:80",
         "a long-poll naming the old value should answer with the new one: " + describe(r.holder));
  expect(took >= 300ms, "the long-poll answered before the proclaim");
}

asio::awaitable<void> restart_keeps_proclaim(const backend_suite& s) {
  const auto& st = s.restarted();
  if (!st.proclaimed_value) throw check_skipped("the backend does not support proclaim");
  auto g = co_await s.get(st.held_key);
  expect(held_by(g.holder, st.held_owner, static_cast<std::uint64_t>(st.held_token)) &&
             g.holder->value == *st.proclaimed_value,
         "a value proclaimed before the restart: a read after it says " + describe(g.holder) +
             (g.holder ? " value \"" + g.holder->value + "\"" : ""));
}

// docs/protocol.md, "record": the lock's record, kept beyond any lease, replaced only by the live holder.
namespace {
void record_is(const std::optional<lock_record>& r, const std::string& value, std::uint64_t token,
               std::uint64_t version, const std::string& owner, const std::string& what) {
  expect(r && r->value == value && r->token == token && r->version == version && r->owner == owner,
         what + ": expected \"" + value + "\" (token " + std::to_string(token) + ", version " +
             std::to_string(version) + ", owner " + owner + "), got " +
             (r ? "\"" + r->value + "\" (token " + std::to_string(r->token) + ", version " +
                      std::to_string(r->version) + ", owner " + r->owner + ")"
                : std::string("none")));
}
void record_lost(const record_write_reply& r, const char* reason, const std::string& what) {
  expect(r.ec == error::lease_lost && r.lost_reason == reason,
         what + ": expected lost (" + reason + "), got " + why(r.ec, r.diagnostic) + " " + r.lost_reason);
}
}  // namespace

asio::awaitable<void> record_written(const backend_suite& s) {
  const auto key = s.key("record");
  auto a = co_await s.must_acquire(key, "leader-a", long_ttl, "addr");
  auto w1 = co_await s.write_record(key, "leader-a", a.token, "state-1");
  auto w2 = co_await s.write_record(key, "leader-a", a.token, "state-2");
  auto r = co_await s.read_record(key);
  auto g = co_await s.get(key);
  co_await s.release(key, "leader-a", a.token);
  expect(!w1.ec && w1.version == 1 && !w2.ec && w2.version == 2,
         "the holder's writes: expected versions 1 and 2, got " + why(w1.ec, w1.diagnostic) + " " +
             std::to_string(w1.version) + ", " + why(w2.ec, w2.diagnostic) + " " +
             std::to_string(w2.version));
  record_is(r, "state-2", a.token, 2, "leader-a", "a read of the record");
  expect(held_by(g.holder, "leader-a", a.token) && g.holder->value == "addr" &&
             g.holder->ttl_remaining <= long_ttl,
         "a record write changed the lease: " + describe(g.holder));
}

asio::awaitable<void> record_refused(const backend_suite& s) {
  const auto key = s.key("record-refused");
  record_lost(co_await s.write_record(key, "leader-a", 1, "x"), "not_held", "a record write for a free key");
  auto first = co_await s.must_acquire(key, "leader-a", long_ttl);
  auto w = co_await s.write_record(key, "leader-a", first.token, "kept");
  expect(!w.ec, "the holder's write: " + why(w.ec, w.diagnostic));
  auto second = co_await s.must_acquire(key, "leader-a", long_ttl);
  record_lost(co_await s.write_record(key, "leader-a", first.token, "stale"), "token_mismatch",
              "a record write with the superseded token");
  record_lost(co_await s.write_record(key, "other-b", second.token, "stolen"), "owner_mismatch",
              "a record write by another owner");
  auto r = co_await s.read_record(key);
  co_await s.release(key, "leader-a", second.token);
  record_is(r, "kept", first.token, 1, "leader-a", "a read after refused writes");
}

asio::awaitable<void> record_outlives_lease(const backend_suite& s) {
  const auto key = s.key("record-outlives");
  auto a = co_await s.must_acquire(key, "leader-a", long_ttl);
  auto w = co_await s.write_record(key, "leader-a", a.token, "state");
  expect(!w.ec, "the holder's write: " + why(w.ec, w.diagnostic));
  co_await s.release(key, "leader-a", a.token);
  record_is(co_await s.read_record(key), "state", a.token, 1, "leader-a", "a read after the release");
  record_lost(co_await s.write_record(key, "leader-a", a.token, "late"), "not_held",
              "a record write after the lease's release");
}

asio::awaitable<void> record_missing(const backend_suite& s) {
  auto r = co_await s.read_record(s.key("record-none"));
  expect(!r, "a read of a record never written found one: \"" + (r ? r->value : std::string()) + "\"");
}

asio::awaitable<void> restart_keeps_record(const backend_suite& s) {
  const auto& st = s.restarted();
  if (!st.record_value) throw check_skipped("the backend does not keep lock records");
  record_is(co_await s.read_record(st.held_key), *st.record_value, static_cast<std::uint64_t>(st.held_token),
            1, st.held_owner, "a record written before the restart, read after it");
}

asio::awaitable<void> restart_keeps_held_lease(const backend_suite& s) {
  const auto& st = s.restarted();
  const auto token = static_cast<std::uint64_t>(st.held_token);
  auto g = co_await s.get(st.held_key);
  expect(held_by(g.holder, st.held_owner, token),
         "a lease held by " + st.held_owner + " with token " + std::to_string(token) +
             " before the restart: a read after it says " + describe(g.holder));
  auto r = co_await s.renew(st.held_key, st.held_owner, token, milliseconds(300'000));
  expect(!r.ec, "renew of that lease after the restart: " + why(r.ec, r.diagnostic));
}

asio::awaitable<void> restart_keeps_release(const backend_suite& s) {
  const auto& st = s.restarted();
  auto g = co_await s.get(st.released_key);
  expect(!g.holder, "a read after the restart of a lock released before it: " + describe(g.holder));
}

asio::awaitable<void> restart_tokens_increase(const backend_suite& s) {
  const auto& st = s.restarted();
  const auto before = static_cast<std::uint64_t>(st.max_token_before);
  auto fresh = co_await s.must_acquire(s.key("restart-fresh"), "newcomer", long_ttl);
  auto freed = co_await s.must_acquire(st.released_key, "newcomer", long_ttl);
  auto again = co_await s.must_acquire(st.held_key, st.held_owner, long_ttl);
  co_await s.release(s.key("restart-fresh"), "newcomer", fresh.token);
  co_await s.release(st.released_key, "newcomer", freed.token);
  co_await s.release(st.held_key, st.held_owner, again.token);
  const auto larger = [&](std::uint64_t t, const std::string& what) {
    expect(t > before, what + " after the restart got token " + std::to_string(t) + ", not larger than " +
                           std::to_string(before) + " (issued before it)");
  };
  larger(fresh.token, "an acquire of a new key");
  larger(freed.token, "an acquire of the lock released before the restart");
  larger(again.token, "the holder's re-acquire");
}

// Feature lock_delay (docs/protocol.md, "Lock-delay") through baton::backend: skipped where the backend
// refuses the option (the etcd and memory backends: error::invalid_config, nothing sent). Elsewhere as the
// HTTP check: a release frees at once; an expiry keeps the key from everyone until the delay has passed.
asio::awaitable<void> lock_delay_after_expiry(const backend_suite& s) {
  auto delayed = [&](const std::string& key, const std::string& owner, milliseconds ttl,
                     milliseconds delay) -> asio::awaitable<acquire_reply> {
    auto r = co_await s.main().acquire_with_delay(key, owner, ttl, {}, delay, std::nullopt, 10'000ms);
    if (r.ec == error::invalid_config) throw check_skipped("lock-delay: " + why(r.ec, r.diagnostic));
    if (r.ec) throw check_failed("acquire with a lock-delay by " + owner + ": " + why(r.ec, r.diagnostic));
    co_return r;
  };
  const auto released = s.key("lock-delay-release");
  auto r = co_await delayed(released, "a", long_ttl, 60'000ms);
  co_await s.release(released, "a", r.token);
  auto next = co_await s.must_acquire(released, "b", long_ttl);
  co_await s.release(released, "b", next.token);

  const auto key = s.key("lock-delay-expiry");
  const auto delay = 2000ms;
  const auto sent = steady::now();
  auto a = co_await delayed(key, "a", short_ttl, delay);
  const auto answered = steady::now();
  co_await wait_until_free(s, key, expiry_bound(answered, short_ttl), "a lease with a lock-delay");
  auto refused = co_await s.acquire(key, "b", long_ttl);
  if (!refused.ec) {
    expect(steady::now() >= sent + short_ttl + delay,
           "an acquire " + ms(steady::now() - sent) +
               " after the acquire of a lease with a 2 s lock-delay "
               "was granted inside the delay");
    co_await s.release(key, "b", refused.token);
    throw check_failed("inconclusive: the machine was too slow to ask within the delay");
  }
  expect(refused.holder.lock_delay_remaining > 0ms,
         "the key is free of its holder but refused without a lock-delay: " + describe(refused.holder));
  const auto bound = expiry_bound(answered, short_ttl) + delay + 5s;
  for (;;) {
    auto b = co_await s.acquire(key, "b", long_ttl);
    if (!b.ec) {
      expect(b.token > a.token, "the grant after a lock-delay has a token not larger than the lease before");
      co_await s.release(key, "b", b.token);
      co_return;
    }
    expect(steady::now() < bound, "the key is still refused " + ms(steady::now() - answered) +
                                      " after its lease's acquire: " + describe(b.holder));
    co_await sleep_until(steady::now() + 100ms);
  }
}

// Semaphores (docs/protocol.md, "semaphores") through baton::backend::acquire_with: skipped where the
// backend refuses more than 1 permit (error::invalid_config, nothing sent: a server without the feature).
asio::awaitable<acquire_reply> permit(const backend_suite& s, const std::string& key,
                                      const std::string& owner, std::uint32_t permits) {
  acquire_request q;
  q.key = key;
  q.owner = owner;
  q.ttl = long_ttl;
  q.permits = permits;
  q.timeout = 10'000ms;
  auto r = co_await s.main().acquire_with(std::move(q));
  if (r.ec == error::invalid_config) throw check_skipped("semaphores: " + why(r.ec, r.diagnostic));
  co_return r;
}

asio::awaitable<acquire_reply> granted_permit(const backend_suite& s, const std::string& key,
                                              const std::string& owner, std::uint32_t permits,
                                              std::uint32_t slot) {
  auto r = co_await permit(s, key, owner, permits);
  if (r.ec)
    throw check_failed("acquire of one of " + std::to_string(permits) + " permits by " + owner + ": " +
                       why(r.ec, r.diagnostic));
  expect(r.permits == permits && r.slot == slot,
         "the grant to " + owner + " names permits " + std::to_string(r.permits) + " and slot " +
             std::to_string(r.slot) + ", not " + std::to_string(permits) + " and " + std::to_string(slot));
  co_return r;
}

asio::awaitable<void> semaphore_at_most_n(const backend_suite& s) {
  const auto key = s.key("semaphore-at-most-n");
  std::vector<std::pair<std::string, std::uint64_t>> held;
  std::uint64_t last = 0;
  for (std::uint32_t i = 0; i < 3; ++i) {
    const std::string owner = "p" + std::to_string(i);
    auto g = co_await granted_permit(s, key, owner, 3, i);
    expect(g.token > last, "the permit tokens should grow");
    last = g.token;
    held.emplace_back(owner, g.token);
  }
  auto full = co_await permit(s, key, "p3", 3);
  expect(full.ec == error::held,
         "a fourth owner's acquire of 3 held permits: " + why(full.ec, full.diagnostic));
  expect(full.permits == 3 && full.holders.size() == 3,
         "the refusal should name permits 3 and three holders");
  for (std::uint32_t i = 0; i < full.holders.size(); ++i)
    expect(full.holders[i].slot == i, "the refusal's holders should be in slot order");
  co_await s.release(key, "p1", held[1].second);
  auto next = co_await granted_permit(s, key, "p3", 3, 1);
  expect(next.token > last, "the grant after a release should have a larger token");
  held[1] = {"p3", next.token};
  for (const auto& [owner, token] : held)
    co_await s.release(key, owner, token);
}

asio::awaitable<void> semaphore_same_holder(const backend_suite& s) {
  const auto key = s.key("semaphore-same-holder");
  auto a = co_await granted_permit(s, key, "a", 2, 0);
  auto b = co_await granted_permit(s, key, "b", 2, 1);
  auto again = co_await granted_permit(s, key, "b", 2, 1);
  expect(again.token > b.token, "the same holder's new token should be larger");
  auto old = co_await s.renew(key, "b", b.token, long_ttl);
  expect(old.ec == error::lease_lost && old.lost_reason == "token_mismatch",
         "a renew with the superseded token: " + why(old.ec, old.lost_reason));
  co_await s.release(key, "a", a.token);
  co_await s.release(key, "b", again.token);
}

asio::awaitable<void> semaphore_mismatch(const backend_suite& s) {
  const auto key = s.key("semaphore-mismatch");
  auto a = co_await granted_permit(s, key, "a", 3, 0);
  auto two = co_await permit(s, key, "b", 2);
  expect(two.ec == error::permits_mismatch && two.permits == 3,
         "an acquire of 2 permits of a key held with 3: " + why(two.ec, two.diagnostic));
  auto lock = co_await s.main().acquire(key, "b", long_ttl, {}, 10'000ms);
  expect(lock.ec == error::permits_mismatch,
         "a lock's acquire of a key held with 3 permits: " + why(lock.ec, lock.diagnostic));
  co_await s.release(key, "a", a.token);
  auto b = co_await granted_permit(s, key, "b", 2, 0);  // free again: the next grant sets the count
  co_await s.release(key, "b", b.token);
}

asio::awaitable<void> semaphore_release(const backend_suite& s) {
  const auto key = s.key("semaphore-release");
  auto a = co_await granted_permit(s, key, "a", 2, 0);
  auto b = co_await granted_permit(s, key, "b", 2, 1);
  expect(co_await s.release(key, "a", b.token) == release_outcome::not_owner,
         "a release of b's permit in a's name should be not_owner");
  expect(co_await s.release(key, "a", a.token) == release_outcome::released, "the release of a's permit");
  auto now = co_await s.get(key);
  expect(now.holder && now.holder->token == b.token, "after a's release, b's permit should still be held");
  expect(co_await s.release(key, "a", a.token) == release_outcome::already_free,
         "a second release of a's permit should be already_free");
  co_await s.release(key, "b", b.token);
}

constexpr named_check lease_checks[] = {
    {check_name::concurrent_acquires, concurrent_acquires},
    {check_name::held_names_holder, held_names_holder},
    {check_name::reacquire_larger_token, reacquire_larger_token},
    {check_name::reacquire_refreshes_expiry, reacquire_refreshes_expiry},
    {check_name::renew_wrong_owner, renew_wrong_owner},
    {check_name::renew_wrong_token, renew_wrong_token},
    {check_name::renew_expired, renew_expired},
    {check_name::renew_extends, renew_extends},
    {check_name::shorter_requests_keep_expiry, shorter_requests_keep_expiry},
    {check_name::release_conditional, release_conditional},
    {check_name::superseded_token_refused, superseded_token_refused},
    {check_name::release_idempotent, release_idempotent},
    {check_name::tokens_increase, tokens_increase},
    {check_name::expiry_on_time, expiry_on_time},
    {check_name::never_expires_early, never_expires_early},
    {check_name::long_ttl_held, long_ttl_held},
    {check_name::long_poll_release, long_poll_release},
    {check_name::long_poll_expiry, long_poll_expiry},
    {check_name::long_poll_stale_token, long_poll_stale_token},
    {check_name::value_round_trip, value_round_trip},
    {check_name::renew_batch_mixed, renew_batch_mixed},
    {check_name::renew_batch_superseded, renew_batch_superseded},
    {check_name::proclaim_replaces_value, proclaim_replaces_value},
    {check_name::proclaim_refused, proclaim_refused},
    {check_name::proclaim_wakes_value_poll, proclaim_wakes_value_poll},
    {check_name::record_written, record_written},
    {check_name::record_refused, record_refused},
    {check_name::record_outlives_lease, record_outlives_lease},
    {check_name::record_missing, record_missing},
    {check_name::lock_delay_after_expiry, lock_delay_after_expiry},
    {check_name::semaphore_at_most_n, semaphore_at_most_n},
    {check_name::semaphore_same_holder, semaphore_same_holder},
    {check_name::semaphore_mismatch, semaphore_mismatch},
    {check_name::semaphore_release, semaphore_release},
};

constexpr named_check after_restart[] = {
    {check_name::restart_keeps_held_lease, restart_keeps_held_lease},
    {check_name::restart_keeps_release, restart_keeps_release},
    {check_name::restart_keeps_proclaim, restart_keeps_proclaim},
    {check_name::restart_keeps_record, restart_keeps_record},
    {check_name::restart_tokens_increase, restart_tokens_increase},
};

std::span<const named_check> checks() {
  return lease_checks;
}
std::span<const named_check> restart_checks() {
  return after_restart;
}

check find(std::string_view name) {
  for (auto list : {checks(), restart_checks()})
    for (const auto& c : list)
      if (c.name == name) return c.run;
  return nullptr;
}

}  // namespace on_backend

}  // namespace baton::cli
