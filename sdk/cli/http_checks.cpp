// SPDX-License-Identifier: Apache-2.0
// `baton conformance` over HTTP: the checks of docs/protocol.md, each on keys of its own
// (conformance/<random>/<check>), throwing check_failed with the reason.
//
// Timing is judged the way the protocol's Time section allows: a lease acquired with a request *sent* at
// client time a is held at least until a + ttl, so a read whose reply *arrived* before a + ttl must see it
// held; and it ends at most ttl after the acquire reply arrived, so the checks wait for it with generous
// bounds (5x the TTL) rather than tight ones.

#include "http_suite.hpp"

#include <boost/json/array.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

namespace baton::cli::http_conformance {
namespace {

// --- the checks
// ---------------------------------------------------------------------------------------------

void concurrent_acquires(const suite& s) {
  constexpr int n = 32;
  const auto key = s.key("concurrent");
  std::vector<std::unique_ptr<connection>> conns;
  for (int i = 0; i < n; ++i) {
    conns.push_back(std::make_unique<connection>(s.address()));
    auto h = conns.back()->request(http::verb::get, "/healthz", {}, s.timeout());
    expect(h.status == 200, "GET /healthz before the race: " + h.describe());
  }
  std::vector<reply> replies(n);
  std::latch start(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      replies[static_cast<std::size_t>(i)] =
          s.acquire(*conns[static_cast<std::size_t>(i)], key, "racer-" + std::to_string(i), 30'000);
    });
  for (auto& t : threads)
    t.join();
  std::vector<int> winners;
  for (int i = 0; i < n; ++i) {
    const auto& r = replies[static_cast<std::size_t>(i)];
    if (r.status == 200)
      winners.push_back(i);
    else
      suite::expect_error(r, 409, "held", "racer-" + std::to_string(i));
  }
  if (!winners.empty()) {  // tidy up
    auto w = static_cast<std::size_t>(winners.front());
    auto token = replies[w].num("token").value_or(1);
    for (int i : winners)
      s.release(*conns[static_cast<std::size_t>(i)], key, "racer-" + std::to_string(i),
                replies[static_cast<std::size_t>(i)].num("token").value_or(token));
  }
  expect(winners.size() == 1, std::to_string(winners.size()) + " of " + std::to_string(n) +
                                  " concurrent acquirers of one free key got 200 (expected exactly 1)");
  const auto winner = "racer-" + std::to_string(winners.front());
  const auto token = replies[static_cast<std::size_t>(winners.front())].num("token");
  for (int i = 0; i < n; ++i) {
    const auto& r = replies[static_cast<std::size_t>(i)];
    if (i != winners.front())
      expect(r.str("owner") == winner && r.num("token") == token, "a refusal names " + r.str("owner") +
                                                                      " as the holder, not the winner " +
                                                                      winner + ": " + r.describe());
  }
}

void held_names_holder(const suite& s) {
  auto c = s.open();
  const auto key = s.key("held");
  auto a = s.must_acquire(c, key, "holder-a", 30'000);
  auto b = s.acquire(c, key, "other-b", 30'000);
  suite::expect_error(b, 409, "held", "acquire by another owner while held");
  expect(b.str("owner") == "holder-a" && b.num("token") == a.num("token"),
         "the refusal does not name the holder holder-a with token " + std::to_string(a.token()) + ": " +
             b.describe());
  expect(b.num("ttl_remaining_ms").has_value(),
         "the refusal has no integer ttl_remaining_ms: " + b.describe());
  s.release(c, key, "holder-a", a.token());
}

void reacquire_larger_token(const suite& s) {
  auto c = s.open();
  const auto key = s.key("reacquire");
  auto first = s.must_acquire(c, key, "same", 30'000);
  auto second = s.must_acquire(c, key, "same", 30'000);
  s.release(c, key, "same", second.token());
  expect(second.token() > first.token(), "the same owner's second acquire got token " +
                                             std::to_string(second.token()) + ", not larger than " +
                                             std::to_string(first.token()));
}

void expect_lost(const reply& r, std::initializer_list<const char*> reasons, const std::string& what) {
  suite::expect_error(r, 409, "lost", what);
  const auto reason = r.str("reason");
  bool ok = false;
  for (auto* x : reasons)
    ok = ok || reason == x;
  std::string allowed;
  for (auto* x : reasons)
    allowed += (allowed.empty() ? "" : " or ") + std::string(x);
  expect(ok, what + ": reason should be " + allowed + ", got " + r.describe());
}

void renew_wrong_owner(const suite& s) {
  auto c = s.open();
  const auto key = s.key("renew-owner");
  auto a = s.must_acquire(c, key, "owner-a", 30'000);
  expect_lost(s.renew(c, key, "owner-b", a.token(), 30'000), {"owner_mismatch"}, "renew by another owner");
  auto ok = s.renew(c, key, "owner-a", a.token(), 30'000);
  s.release(c, key, "owner-a", a.token());
  expect(ok.status == 200, "the holder's own renew after the refusal: expected 200, got " + ok.describe());
}

void renew_wrong_token(const suite& s) {
  auto c = s.open();
  const auto key = s.key("renew-token");
  auto first = s.must_acquire(c, key, "owner-a", 30'000);
  auto second = s.must_acquire(c, key, "owner-a", 30'000);
  auto old = s.renew(c, key, "owner-a", first.token(), 30'000);
  auto made_up = s.renew(c, key, "owner-a", second.token() + 1'000'000, 30'000);
  s.release(c, key, "owner-a", second.token());
  expect_lost(old, {"token_mismatch"}, "renew with the superseded token");
  expect_lost(made_up, {"token_mismatch"}, "renew with a token never issued for this lease");
}

void renew_expired(const suite& s) {
  auto c = s.open();
  const auto key = s.key("renew-expired");
  auto a = s.must_acquire(c, key, "owner-a", 200);
  std::this_thread::sleep_until(a.received + 1200ms);
  auto r = s.renew(c, key, "owner-a", a.token(), 30'000);
  if (r.status == 200) s.release(c, key, "owner-a", a.token());
  expect_lost(r, {"expired", "not_held"}, "renew 1.2 s after a 200 ms lease was granted");
}

void release_conditional(const suite& s) {
  auto c = s.open();
  const auto key = s.key("release-conditional");
  auto a = s.must_acquire(c, key, "owner-a", 30'000);
  auto by_other = s.release(c, key, "owner-b", a.token());
  auto by_wrong_token = s.release(c, key, "owner-a", a.token() + 1'000'000);
  auto still = s.get(c, key);
  s.release(c, key, "owner-a", a.token());
  suite::expect_error(by_other, 409, "not_owner", "release by another owner");
  suite::expect_error(by_wrong_token, 409, "not_owner", "release with a wrong token");
  expect(still.status == 200 && still.str("owner") == "owner-a" && still.num("token") == a.num("token"),
         "after the refused releases the lock should still be held by owner-a with token " +
             std::to_string(a.token()) + ", GET says " + still.describe());
}

void release_idempotent(const suite& s) {
  auto c = s.open();
  const auto key = s.key("release-idempotent");
  auto a = s.must_acquire(c, key, "owner-a", 30'000);
  auto first = s.release(c, key, "owner-a", a.token());
  expect(first.status == 200, "release by the holder: expected 200, got " + first.describe());
  auto second = s.release(c, key, "owner-a", a.token());
  expect(second.status == 200, "the same release again: expected 200, got " + second.describe());
  auto free = s.get(c, key);
  suite::expect_error(free, 404, "not_held", "GET after the release");
  auto never = s.release(c, s.key("release-never-held"), "owner-a", 1);
  expect(never.status == 200, "release of a key nobody holds: expected 200, got " + never.describe());
}

void tokens_increase(const suite& s) {
  auto c = s.open();
  const auto key = s.key("tokens");
  auto t1 = s.must_acquire(c, key, "owner-a", 30'000).token();
  auto rel = s.release(c, key, "owner-a", t1);
  expect(rel.status == 200, "release: expected 200, got " + rel.describe());
  auto b = s.must_acquire(c, key, "owner-b", 200);
  auto t2 = b.token();
  expect(t2 > t1,
         "token after a release is " + std::to_string(t2) + ", not larger than " + std::to_string(t1));
  std::this_thread::sleep_until(b.received + 1200ms);
  auto t3 = s.must_acquire(c, key, "owner-c", 30'000).token();
  expect(t3 > t2,
         "token after an expiry is " + std::to_string(t3) + ", not larger than " + std::to_string(t2));
  auto t4 = s.must_acquire(c, s.key("tokens-other-key"), "owner-d", 30'000).token();
  s.release(c, key, "owner-c", t3);
  s.release(c, s.key("tokens-other-key"), "owner-d", t4);
  expect(t4 > t3,
         "token on another key is " + std::to_string(t4) + ", not larger than " + std::to_string(t3));
}

void expiry_on_time(const suite& s) {
  auto c = s.open();
  const auto key = s.key("expiry");
  // Held while a read's reply arrives before send(acquire) + ttl; a slow machine may leave no read that fast,
  // so the TTL doubles until one is (inconclusive attempts prove nothing either way).
  for (std::int64_t ttl = 1000; ttl <= 4000; ttl *= 2) {
    const auto ttl_d = milliseconds(ttl);
    auto a = s.must_acquire(c, key + "-" + std::to_string(ttl), "owner-a", ttl);
    const auto k = key + "-" + std::to_string(ttl);
    std::this_thread::sleep_until(a.sent + ttl_d * 6 / 10);
    auto g = s.get(c, k);
    const bool conclusive = g.received < a.sent + ttl_d;
    if (conclusive)
      expect(g.status == 200 && g.num("token") == a.num("token"),
             "a GET answered " + std::to_string((g.received - a.sent) / 1ms) +
                 " ms after sending the acquire of a " + std::to_string(ttl) +
                 " ms lease does not show it held: " + g.describe());
    // Free within 5x the TTL of the acquire's reply.
    const auto bound = a.received + ttl_d * 5;
    for (;;) {
      auto f = s.get(c, k);
      if (f.status == 404) {
        suite::expect_error(f, 404, "not_held", "GET after expiry");
        expect(f.received >= a.sent + ttl_d, "the lease was reported free before its TTL had passed");
        break;
      }
      expect(f.status == 200, "GET while waiting for the expiry: " + f.describe());
      if (steady::now() > bound) {
        s.release(c, k, "owner-a", a.token());
        throw check_failed("a " + std::to_string(ttl) + " ms lease is still held " +
                           std::to_string((steady::now() - a.received) / 1ms) + " ms after it was granted");
      }
      std::this_thread::sleep_for(50ms);
    }
    if (conclusive) return;
  }
  throw check_failed(
      "inconclusive: no GET was answered before the lease's TTL had passed (machine too slow?)");
}

// A renew that answers 200 must move the expiry: renewed every third of its TTL, a lease is still held after
// that first TTL has passed. A renew sent before the last term ended must be granted; one sent later (a slow
// machine) proves nothing, and the TTL doubles.
void renew_extends(const suite& s) {
  auto c = s.open();
  for (std::int64_t ttl = 400; ttl <= 1600; ttl *= 2) {
    const auto ttl_d = milliseconds(ttl);
    const auto key = s.key("renew-extends-" + std::to_string(ttl));
    auto a = s.must_acquire(c, key, "renewer", ttl);
    auto term_from = a.sent;  // the lease is held at least until term_from + ttl
    bool conclusive = true;
    for (int i = 0; i < 4 && conclusive; ++i) {
      std::this_thread::sleep_until(term_from + ttl_d / 3);
      auto r = s.renew(c, key, "renewer", a.token(), ttl);
      conclusive = r.sent < term_from + ttl_d;
      if (!conclusive) break;
      expect(r.status == 200, "renew " + std::to_string(i + 1) + ", sent " +
                                  std::to_string((r.sent - term_from) / 1ms) + " ms into a " +
                                  std::to_string(ttl) + " ms term: expected 200, got " + r.describe());
      term_from = r.sent;
    }
    auto g = s.get(c, key);
    s.release(c, key, "renewer", a.token());
    if (!conclusive || g.received >= term_from + ttl_d) continue;
    expect(g.status == 200 && g.num("token") == a.num("token"),
           "a " + std::to_string(ttl) + " ms lease renewed every " + std::to_string(ttl / 3) +
               " ms is not held " + std::to_string((g.received - a.sent) / 1ms) +
               " ms after its acquire (the renews answered 200 but did not extend it): " + g.describe());
    return;
  }
  throw check_failed("inconclusive: the renews could not be sent within their terms (machine too slow?)");
}

// The owner's older token is superseded by its re-acquire (docs/protocol.md, acquire): a delayed renew or
// release carrying it must change nothing, and the current token keeps working.
void superseded_token_refused(const suite& s) {
  auto c = s.open();
  const auto key = s.key("superseded");
  auto first = s.must_acquire(c, key, "owner-a", 30'000);
  auto second = s.must_acquire(c, key, "owner-a", 30'000);
  auto old_release = s.release(c, key, "owner-a", first.token());
  auto old_renew = s.renew(c, key, "owner-a", first.token(), 30'000);
  auto still = s.get(c, key);
  auto renew = s.renew(c, key, "owner-a", second.token(), 30'000);
  s.release(c, key, "owner-a", second.token());
  suite::expect_error(old_release, 409, "not_owner", "release with the superseded token");
  expect_lost(old_renew, {"token_mismatch"}, "renew with the superseded token");
  expect(still.status == 200 && still.num("token") == second.num("token"),
         "after the refused release and renew with the superseded token, GET should name token " +
             std::to_string(second.token()) + ": " + still.describe());
  expect(renew.status == 200,
         "renew with the current token afterwards: expected 200, got " + renew.describe());
}

void long_poll_stale_token(const suite& s) {
  auto c = s.open();
  int n = 0;
  s.note(twice_on_time([&] {
    const auto key = s.key("poll-stale-" + std::to_string(n++));
    auto first = s.must_acquire(c, key, "owner-a", 30'000);
    auto second = s.must_acquire(c, key, "owner-a", 30'000);
    // A token the key's holder does not have: superseded, 0 while held, and one never issued.
    const std::pair<std::int64_t, std::string> tokens[] = {
        {first.token(), "the superseded token " + std::to_string(first.token())},
        {0, "token=0 while the lock is held"},
        {second.token() + 1'000'000, "a token never issued"},
    };
    wake_try t;  // the slowest of the three
    for (const auto& [token, about] : tokens) {
      const auto what = "a long-poll with " + about;
      auto r = s.poll(c, key, token, wake_give_up);
      if (r.status == 0) {
        t.late = what + " did not answer within " + ms(wake_give_up) + ": " + r.describe();
        break;
      }
      if (r.status != 200 || r.num("token") != second.num("token")) {
        s.release(c, key, "owner-a", second.token());
        throw check_failed(what + ": expected 200 naming token " + std::to_string(second.token()) + ", got " +
                           r.describe());
      }
      t.took = std::max(t.took, r.received - r.sent);
      if (r.received - r.sent > wake_bound) {
        t.late = what + " answered after " + ms(r.received - r.sent);
        break;
      }
    }
    s.release(c, key, "owner-a", second.token());
    return t;
  }));
}

// Starts a long-poll on its own connection and thread.
std::future<reply> long_poll(const suite& s, const std::string& key, std::int64_t token,
                             steady::duration bound) {
  return std::async(std::launch::async, [&s, key, token, bound] {
    auto c = s.open();
    return s.poll(c, key, token, bound);
  });
}

void long_poll_release(const suite& s) {
  auto c = s.open();
  int n = 0;
  s.note(twice_on_time([&]() -> wake_try {
    const auto key = s.key("poll-release-" + std::to_string(n++));
    auto a = s.must_acquire(c, key, "owner-a", 30'000);
    auto poll = long_poll(s, key, a.token(), 300ms + wake_give_up);
    const bool early = poll.wait_for(300ms) == std::future_status::ready;
    auto rel = s.release(c, key, "owner-a", a.token());
    auto r = poll.get();
    expect(!early, "the long-poll answered while the holder's token was unchanged: " + r.describe());
    expect(rel.status == 200, "release: expected 200, got " + rel.describe());
    if (r.status == 0) return {{}, "the long-poll was not woken by the release: " + r.describe()};
    suite::expect_error(r, 404, "not_held", "the long-poll's answer after the release");
    const auto took = std::max(r.received - rel.received, steady::duration::zero());
    if (took > wake_bound)
      return {took, "the long-poll answered " + ms(took) + " after the release's answer"};
    return {took, std::nullopt};
  }));
}

void long_poll_expiry(const suite& s) {
  auto c = s.open();
  constexpr auto ttl = 300ms;
  int n = 0;
  s.note(twice_on_time([&]() -> wake_try {
    const auto key = s.key("poll-expiry-" + std::to_string(n++));
    auto a = s.must_acquire(c, key, "owner-a", ttl.count());
    auto r = s.poll(c, key, a.token(), ttl + wake_give_up);
    if (r.status == 0) {
      s.release(c, key, "owner-a", a.token());
      return {{}, "the long-poll was not woken by the expiry of a " + ms(ttl) + " lease: " + r.describe()};
    }
    suite::expect_error(r, 404, "not_held", "the long-poll's answer after the expiry");
    expect(r.received >= a.sent + ttl, "the long-poll reported the lease free before its TTL had passed");
    // The server's expiry is at most the TTL after the acquire's answer arrived.
    const auto took = std::max(r.received - (a.received + ttl), steady::duration::zero());
    if (took > wake_bound)
      return {took, "the long-poll answered " + ms(took) + " after the lease's TTL had ended"};
    return {took, std::nullopt};
  }));
}

// docs/protocol.md, acquire: a granted acquire records expiry = now + ttl_ms, the same owner's included. A
// longer TTL on the re-acquire shows it without waiting: ttl_remaining_ms must be about the new TTL.
void reacquire_refreshes_expiry(const suite& s) {
  auto c = s.open();
  const auto key = s.key("reacquire-expiry");
  s.must_acquire(c, key, "owner-a", 1000);
  auto again = s.must_acquire(c, key, "owner-a", 30'000);
  auto g = s.get(c, key);
  s.release(c, key, "owner-a", again.token());
  expect(g.status == 200 && g.num("token") == again.num("token"),
         "GET after the re-acquire should name its token " + std::to_string(again.token()) + ": " +
             g.describe());
  const auto at_least = 30'000 - std::chrono::ceil<milliseconds>(g.received - again.sent).count();
  const auto left = g.num("ttl_remaining_ms").value_or(-1);
  expect(left >= at_least && left <= 30'000,
         "a lease acquired for 1000 ms, then re-acquired by its owner for 30000 ms, has ttl_remaining_ms " +
             std::to_string(left) + " (expected " + std::to_string(at_least) +
             " to 30000: the re-acquire must set a new expiry)");
}

// docs/protocol.md, "renew" and "acquire": no request shortens a lease. A late copy of an earlier, shorter
// renew or acquire (a retrying proxy) reaching the server after a renew raised the TTL must not free the key
// while its holder counts on the raised TTL.
void shorter_requests_keep_expiry(const suite& s) {
  auto c = s.open();
  const auto key = s.key("no-shortening");
  auto a = s.must_acquire(c, key, "owner-a", 1000);
  auto raised = s.renew(c, key, "owner-a", a.token(), 30'000);
  expect(raised.status == 200, "renew raising the TTL to 30000 ms: expected 200, got " + raised.describe());
  auto shorter = s.renew(c, key, "owner-a", a.token(), 1000);
  expect(shorter.status == 200, "renew with 1000 ms after it: expected 200, got " + shorter.describe());
  auto after_renew = s.get(c, key);
  auto again = s.must_acquire(c, key, "owner-a", 1000);
  auto after_acquire = s.get(c, key);
  s.release(c, key, "owner-a", again.token());
  auto judge = [&](const reply& g, const char* what) {
    const auto at_least = 30'000 - std::chrono::ceil<milliseconds>(g.received - raised.sent).count();
    const auto left = g.num("ttl_remaining_ms").value_or(-1);
    expect(g.status == 200 && left >= at_least,
           std::string("a lease renewed for 30000 ms, then ") + what + " for 1000 ms, has ttl_remaining_ms " +
               std::to_string(left) + " (expected at least " + std::to_string(at_least) +
               ": a shorter request must not move the expiry earlier): " + g.describe());
  };
  judge(after_renew, "renewed");
  judge(after_acquire, "renewed and re-acquired by its owner");
}

// docs/protocol.md, Time: a lease acquired by a request sent at client time a is held until at least a + ttl.
// GETs sent back to back over the last 60 ms before that instant must all find it held; those answered within
// `expiry_tolerance` of it are not judged (the protocol's TTLs are whole milliseconds).
constexpr auto expiry_tolerance = 1ms;

void never_expires_early(const suite& s) {
  auto c = s.open();
  for (std::int64_t ttl = 500; ttl <= 2000; ttl *= 2) {
    const auto key = s.key("never-early-" + std::to_string(ttl));
    auto a = s.must_acquire(c, key, "punctual", ttl);
    const auto end = a.sent + milliseconds(ttl) - expiry_tolerance;
    std::this_thread::sleep_until(end - 60ms);
    int close_reads = 0;  // judged reads sent within the last 10 ms: they catch a server a few ms early
    for (;;) {
      auto g = s.get(c, key);
      if (g.received >= end) break;
      expect(g.status == 200 && g.num("token") == a.num("token"),
             "a " + std::to_string(ttl) + " ms lease is not held by a GET answered " +
                 ms(g.received - a.sent) + " after its acquire was sent (it expired at least " +
                 ms(a.sent + milliseconds(ttl) - g.received) + " early): " + g.describe());
      if (g.sent >= end - 10ms) ++close_reads;
    }
    s.release(c, key, "punctual", a.token());
    if (close_reads > 0) return;
  }
  throw check_failed(
      "inconclusive: no GET was answered within 10 ms before a lease's TTL ended (machine too slow?)");
}

// The largest TTL batond accepts by default: nothing in the server may overflow or truncate it.
void long_ttl_held(const suite& s) {
  auto c = s.open();
  const auto key = s.key("long-ttl");
  constexpr std::int64_t hour = 3'600'000;
  auto a = s.must_acquire(c, key, "patient", hour);
  auto g = s.get(c, key);
  auto r = s.renew(c, key, "patient", a.token(), hour);
  auto after = s.get(c, key);
  s.release(c, key, "patient", a.token());
  for (auto* x : {&g, &after}) {
    const auto at_least = hour - std::chrono::ceil<milliseconds>(x->received - a.sent).count();
    const auto left = x->num("ttl_remaining_ms").value_or(-1);
    expect(x->status == 200 && x->num("token") == a.num("token") && left >= at_least && left <= hour,
           std::string(x == &g ? "GET" : "GET after a renew") +
               " of a 1-hour lease should show it held with " + "ttl_remaining_ms " +
               std::to_string(at_least) + " to " + std::to_string(hour) + ": " + x->describe());
  }
  expect(r.status == 200, "renew for 1 hour: expected 200, got " + r.describe());
}

// Bad inputs: each on a fresh connection (the server may close it after an error).
reply bad(const suite& s, http::verb method, const std::string& target, std::string body = {}) {
  auto c = s.open();
  return c.request(method, target, std::move(body), s.timeout());
}

void malformed_json(const suite& s) {
  suite::expect_error(
      bad(s, http::verb::post, suite::path(s.key("bad-json"), "/acquire"), R"({"owner":"x","ttl_ms":)"), 400,
      "bad_request", "truncated JSON");
  suite::expect_error(bad(s, http::verb::post, suite::path(s.key("bad-json"), "/acquire"), "[1,2,3]"), 400,
                      "bad_request", "a JSON array instead of an object");
}

void missing_field(const suite& s) {
  const auto key = s.key("missing-field");
  suite::expect_error(bad(s, http::verb::post, suite::path(key, "/acquire"), R"({"ttl_ms":1000})"), 400,
                      "bad_request", "acquire without owner");
  suite::expect_error(bad(s, http::verb::post, suite::path(key, "/acquire"), R"({"owner":"x"})"), 400,
                      "bad_request", "acquire without ttl_ms");
  suite::expect_error(bad(s, http::verb::post, suite::path(key, "/renew"), R"({"owner":"x","ttl_ms":1000})"),
                      400, "bad_request", "renew without token");
}

void ttl_out_of_range(const suite& s) {
  const auto key = s.key("ttl-range");
  suite::expect_error(bad(s, http::verb::post, suite::path(key, "/acquire"), R"({"owner":"x","ttl_ms":0})"),
                      400, "bad_request", "acquire with ttl_ms 0");
  suite::expect_error(
      bad(s, http::verb::post, suite::path(key, "/acquire"), R"({"owner":"x","ttl_ms":-1000})"), 400,
      "bad_request", "acquire with ttl_ms -1000");
  auto c = s.open();
  suite::expect_error(s.get(c, key), 404, "not_held", "GET after the refused acquires (nothing may change)");
}

void unknown_route(const suite& s) {
  suite::expect_error(bad(s, http::verb::get, "/v1/no-such-route"), 404, "not_found",
                      "GET /v1/no-such-route");
  suite::expect_error(bad(s, http::verb::post, suite::path(s.key("route"), "/frobnicate"), "{}"), 404,
                      "not_found", "POST /v1/locks/{key}/frobnicate");
}

void wrong_method(const suite& s) {
  auto r = bad(s, http::verb::get, suite::path(s.key("method"), "/acquire"));
  suite::expect_error(r, 405, "method_not_allowed", "GET on the acquire route");
  expect(r.allow.find("POST") != std::string::npos,
         "405 without an Allow header naming POST: Allow: " + r.allow);
}

void body_too_large(const suite& s) {
  const auto key = s.key("large-body");
  std::string body = R"({"owner":"x","ttl_ms":1000,"pad":")" + std::string(70 * 1024, 'a') + "\"}";
  auto r = bad(s, http::verb::post, suite::path(key, "/acquire"), std::move(body));
  suite::expect_error(r, 413, "body_too_large", "a 70 KiB acquire body");
  auto c = s.open();
  suite::expect_error(s.get(c, key), 404, "not_held", "GET after the refused acquire (nothing may change)");
}

void still_serves(const suite& s) {
  auto c = s.open();
  auto h = c.request(http::verb::get, "/healthz", {}, s.timeout());
  expect(h.status == 200 && h.str("status") == "ok",
         "GET /healthz: expected 200 {\"status\":\"ok\"}, got " + h.describe());
  const auto key = s.key("still-serves");
  auto a = s.must_acquire(c, key, "owner-a", 30'000);
  auto r = s.release(c, key, "owner-a", a.token());
  expect(r.status == 200, "release: expected 200, got " + r.describe());
}

// docs/protocol.md, "value": published with the lease in GET, long-poll and 409 answers, replaced by a
// same-owner re-acquire, kept by renew. Optional (feature lease_values): a server from before values ignores
// the field and never answers it, and is not checked for them.
void value_round_trip(const suite& s) {
  s.require_feature("lease_values");
  auto c = s.open();
  const auto key = s.key("value");
  auto shown = [&](const reply& r, const std::string& want, const std::string& what) {
    const auto* o = r.json.if_object();
    expect(o && o->if_contains("value"),
           what +
               " has no \"value\" field, although the server advertises lease_values (docs/protocol.md, "
               "\"value\"): " +
               r.describe());
    expect(r.str("value") == want, what + ": expected value \"" + want + "\", got " + r.describe());
  };
  s.must_acquire(c, key, "valued-a", 30'000, "10.0.0.1:8080");
  shown(s.get(c, key), "10.0.0.1:8080", "GET of a lease acquired with a value");
  shown(c.request(http::verb::get, suite::path(key, "?wait_ms=5000&token=0"), {}, s.timeout()),
        "10.0.0.1:8080", "a long-poll's answer");
  auto held = s.acquire(c, key, "other-b", 30'000, "10.0.0.2:8080");
  suite::expect_error(held, 409, "held", "acquire by another owner while held");
  shown(held, "10.0.0.1:8080", "the 409 held refusal");
  auto again = s.must_acquire(c, key, "valued-a", 30'000, "10.0.0.1:9090");
  shown(s.get(c, key), "10.0.0.1:9090", "GET after a same-owner re-acquire with a new value");
  auto r = s.renew(c, key, "valued-a", again.token(), 30'000);
  expect(r.status == 200, "renew: expected 200, got " + r.describe());
  shown(s.get(c, key), "10.0.0.1:9090", "GET after a renew");
  s.must_acquire(c, key, "valued-a", 30'000);
  auto last = s.get(c, key);
  shown(last, "", "GET after a same-owner re-acquire without a value");
  s.release(c, key, "valued-a", last.token());
}

// --- proclaim (docs/protocol.md, "proclaim"): run when the server advertises proclaim. A value they compare
// against is set by a proclaim, not by the acquire: an acquire's value is feature lease_values, which a
// server may advertise or not.

// A proclaim by the holder that must succeed.
void must_proclaim(const suite& s, connection& c, const std::string& key, const std::string& owner,
                   std::int64_t token, const std::string& value) {
  auto p = s.proclaim(c, key, owner, token, value);
  expect(p.status == 200, "proclaim of \"" + value + "\" by the holder: expected 200, got " + p.describe());
}

// The value is replaced, in the answer, GET and a 409 held; the token and the expiry are not (a proclaim is
// no renew: 300 ms after the acquire, the lease has no more than its TTL less those 300 ms left).
void proclaim_replaces_value(const suite& s) {
  s.require_feature("proclaim");
  auto c = s.open();
  const auto key = s.key("proclaim");
  auto a = s.must_acquire(c, key, "leader-a", 30'000, "10.0.0.1:8080");
  std::this_thread::sleep_for(300ms);
  auto p = s.proclaim(c, key, "leader-a", a.token(), "10.0.0.2:8080");
  expect(p.status == 200, "proclaim by the holder: expected 200, got " + p.describe());
  expect(p.num("token") == a.token() && p.str("value") == "10.0.0.2:8080",
         "proclaim's answer should name token " + std::to_string(a.token()) +
             " and value \"10.0.0.2:8080\": " + p.describe());
  auto g = s.get(c, key);
  expect(g.status == 200 && g.num("token") == a.token() && g.str("value") == "10.0.0.2:8080",
         "GET after a proclaim should show token " + std::to_string(a.token()) +
             " and the new value: " + g.describe());
  expect(g.num("ttl_remaining_ms").value_or(0) <= 29'800,
         "a proclaim 300 ms into a 30 s lease extended it (a proclaim is no renew): " + g.describe());
  auto held = s.acquire(c, key, "other-b", 30'000, "10.0.0.9:8080");
  suite::expect_error(held, 409, "held", "acquire by another owner after a proclaim");
  expect(held.str("value") == "10.0.0.2:8080", "the 409 held refusal after a proclaim: " + held.describe());
  s.release(c, key, "leader-a", a.token());
}

// Refused as a renew would be (same reasons, same order), and nothing changes.
void proclaim_refused(const suite& s) {
  s.require_feature("proclaim");
  auto c = s.open();
  const auto key = s.key("proclaim-refused");
  expect_lost(s.proclaim(c, key, "leader-a", 1, "x"), {"not_held"}, "proclaim of a free key");
  auto first = s.must_acquire(c, key, "leader-a", 30'000, "first");
  auto second = s.must_acquire(c, key, "leader-a", 30'000, "second");
  must_proclaim(s, c, key, "leader-a", second.token(), "second");
  expect_lost(s.proclaim(c, key, "leader-a", first.token(), "stale"), {"token_mismatch"},
              "proclaim with the superseded token");
  expect_lost(s.proclaim(c, key, "other-b", second.token(), "stolen"), {"owner_mismatch"},
              "proclaim by another owner");
  auto g = s.get(c, key);
  expect(g.str("value") == "second" && g.num("token") == second.token(),
         "a refused proclaim changed the lease: " + g.describe());
  s.release(c, key, "leader-a", second.token());
}

void proclaim_bad_value(const suite& s) {
  s.require_feature("proclaim");
  auto c = s.open();
  const auto key = s.key("proclaim-bad");
  auto a = s.must_acquire(c, key, "leader-a", 30'000, "good");
  const auto t = a.token();
  must_proclaim(s, c, key, "leader-a", t, "good");
  suite::expect_error(s.proclaim(c, key, "leader-a", t, std::string(1025, 'v')), 400, "bad_request",
                      "proclaim with a 1025-byte value");
  suite::expect_error(s.proclaim(c, key, "leader-a", t, "two\nlines"), 400, "bad_request",
                      "proclaim with a control character in the value");
  suite::expect_error(bad(s, http::verb::post, suite::path(key, "/proclaim"),
                          json::serialize(json::object{{"owner", "leader-a"}, {"token", t}})),
                      400, "bad_request", "proclaim without a value");
  auto g = s.get(c, key);
  expect(g.str("value") == "good", "a refused proclaim changed the value: " + g.describe());
  s.release(c, key, "leader-a", t);
}

// An observer waiting with the token and value it saw is woken by a proclaim.
void proclaim_wakes_value_poll(const suite& s) {
  s.require_feature("proclaim");
  auto c = s.open();
  const auto key = s.key("proclaim-poll");
  auto a = s.must_acquire(c, key, "leader-a", 30'000, "old:80");
  must_proclaim(s, c, key, "leader-a", a.token(), "old:80");
  auto poll = std::async(std::launch::async, [&s, key, token = a.token()] {
    auto pc = s.open();
    return pc.request(http::verb::get,
                      suite::path(key) + "?wait_ms=20000&token=" + std::to_string(token) + "&value=old%3A80",
                      {}, 300ms + wake_give_up);
  });
  const bool early = poll.wait_for(300ms) == std::future_status::ready;
  auto p = s.proclaim(c, key, "leader-a", a.token(), "new:80");
  auto r = poll.get();
  s.release(c, key, "leader-a", a.token());
  expect(!early, "the long-poll answered while the holder and its value were unchanged: " + r.describe());
  expect(p.status == 200, "proclaim: expected 200, got " + p.describe());
  expect(r.status == 200 && r.str("value") == "new:80",
         "a long-poll naming the old value was not answered with the new one within " + ms(wake_give_up) +
             " of the proclaim: " + r.describe());
}

// --- the lock's record (docs/protocol.md, "record"): run when the server advertises lock_record

// 200 {"key","token","version"} with the expected version, or why not.
void written(const reply& r, std::int64_t token, std::int64_t version, const std::string& what) {
  expect(r.status == 200 && r.num("token") == token && r.num("version") == version,
         what + ": expected 200 with token " + std::to_string(token) + " and version " +
             std::to_string(version) + ", got " + r.describe());
}

// The record as GET shows it, or why not.
void record_is(const reply& r, const std::string& value, std::int64_t token, std::int64_t version,
               const std::string& owner, const std::string& what) {
  expect(r.status == 200 && r.str("value") == value && r.num("token") == token &&
             r.num("version") == version && r.str("owner") == owner,
         what + ": expected the record \"" + value + "\" (token " + std::to_string(token) + ", version " +
             std::to_string(version) + ", owner " + owner + "), got " + r.describe());
}

void record_written(const suite& s) {
  s.require_feature("lock_record");
  auto c = s.open();
  const auto key = s.key("record");
  auto a = s.must_acquire(c, key, "leader-a", 30'000, "addr");
  // The lease's value as the server keeps it: "addr", or "" without feature lease_values.
  const auto value = s.get(c, key).str("value");
  std::this_thread::sleep_for(300ms);
  written(s.write_record(c, key, "leader-a", a.token(), "{\"slot\":1}\n"), a.token(), 1,
          "the holder's write");
  written(s.write_record(c, key, "leader-a", a.token(), "{\"slot\":2}\n"), a.token(), 2, "its second write");
  record_is(s.read_record(c, key), "{\"slot\":2}\n", a.token(), 2, "leader-a", "GET of the record");
  auto g = s.get(c, key);
  s.release(c, key, "leader-a", a.token());
  expect(
      g.status == 200 && g.num("token") == a.token() && g.str("value") == value &&
          g.num("ttl_remaining_ms").value_or(0) <= 29'800,
      "a record write 300 ms into a 30 s lease changed the lease (no renew, no new value): " + g.describe());
}

void record_refused(const suite& s) {
  s.require_feature("lock_record");
  auto c = s.open();
  const auto key = s.key("record-refused");
  expect_lost(s.write_record(c, key, "leader-a", 1, "x"), {"not_held"}, "a record write for a free key");
  auto first = s.must_acquire(c, key, "leader-a", 30'000);
  written(s.write_record(c, key, "leader-a", first.token(), "kept"), first.token(), 1, "the holder's write");
  auto second = s.must_acquire(c, key, "leader-a", 30'000);
  expect_lost(s.write_record(c, key, "leader-a", first.token(), "stale"), {"token_mismatch"},
              "a record write with the superseded token");
  expect_lost(s.write_record(c, key, "other-b", second.token(), "stolen"), {"owner_mismatch"},
              "a record write by another owner");
  auto r = s.read_record(c, key);
  s.release(c, key, "leader-a", second.token());
  record_is(r, "kept", first.token(), 1, "leader-a", "GET of the record after refused writes");
}

void record_outlives_lease(const suite& s) {
  s.require_feature("lock_record");
  auto c = s.open();
  const auto key = s.key("record-outlives");
  auto a = s.must_acquire(c, key, "leader-a", 30'000);
  written(s.write_record(c, key, "leader-a", a.token(), "state"), a.token(), 1, "the holder's write");
  s.release(c, key, "leader-a", a.token());
  record_is(s.read_record(c, key), "state", a.token(), 1, "leader-a", "GET of the record after a release");
  expect_lost(s.write_record(c, key, "leader-a", a.token(), "late"), {"not_held"},
              "a record write after the lease's release");
  auto b = s.must_acquire(c, key, "leader-b", 200);
  std::this_thread::sleep_until(b.sent + 1'200ms);
  expect_lost(s.write_record(c, key, "leader-b", b.token(), "late"), {"not_held"},
              "a record write 1.2 s into a 200 ms lease (nobody else took the key)");
  record_is(s.read_record(c, key), "state", a.token(), 1, "leader-a", "GET of the record after an expiry");
}

void record_missing(const suite& s) {
  s.require_feature("lock_record");
  auto c = s.open();
  suite::expect_error(s.read_record(c, s.key("record-none")), 404, "no_record",
                      "GET of a record never written");
}

// --- queued acquire (docs/protocol.md, "queued acquire"): run when the server advertises acquire_queue.
// Each waiter waits on a connection and a thread of its own. One joins the queue only once the one before it
// is in (its request written, a moment for the server to take it in, and a GET showing the key unchanged), so
// the arrival order the checks judge is the order they made.

constexpr std::int64_t queue_wait_ms = 5'000;  // what a failing check waits out at most
constexpr auto queue_bound = milliseconds(queue_wait_ms) + wake_give_up;
constexpr auto queue_settle = 50ms;  // from a waiter's request written to the next step
// How long a second waiter must stay unanswered after the first was granted the lock.
constexpr auto still_waiting = 300ms;

struct waiter {
  std::string owner;
  std::shared_ptr<connection> conn;
  std::future<reply> answer;
  std::optional<reply> got;  // its answer, once taken
};

// Sends `owner`'s queued acquire for `key`, which `held` (an acquire's 200) holds, and returns once it waits
// there; fails when it was answered instead.
waiter join_queue(const suite& s, connection& c, const std::string& key, const std::string& owner,
                  const reply& held, std::int64_t ttl_ms = 30'000) {
  waiter w{owner, std::make_shared<connection>(s.address()), {}, {}};
  auto h = w.conn->request(http::verb::get, "/healthz", {}, s.timeout());
  expect(h.status == 200, "GET /healthz before " + owner + " joins the queue: " + h.describe());
  auto written = std::make_shared<std::atomic<bool>>(false);
  w.answer = std::async(std::launch::async, [&s, conn = w.conn, key, owner, ttl_ms, written] {
    return s.acquire_queued(*conn, key, owner, ttl_ms, queue_wait_ms, queue_bound,
                            [written] { *written = true; });
  });
  while (!*written && w.answer.wait_for(1ms) != std::future_status::ready) {
  }
  std::this_thread::sleep_for(queue_settle);
  if (w.answer.wait_for(0s) == std::future_status::ready) {
    auto r = w.answer.get();
    throw check_failed("a queued acquire (wait_ms=" + std::to_string(queue_wait_ms) + ") by " + owner +
                       " of a key " + held.str("owner") +
                       " holds was answered instead of waiting: " + r.describe());
  }
  auto g = s.get(c, key);
  expect(g.status == 200 && g.num("token") == held.num("token"),
         "while " + owner + " waits in the queue, GET should name " + held.str("owner") + " with token " +
             std::to_string(held.token()) + ": " + g.describe());
  return w;
}

// Waiters joining the queue of `key`, which `held` holds, in this order.
std::vector<waiter> queue_up(const suite& s, connection& c, const std::string& key, const reply& held,
                             std::initializer_list<const char*> owners, std::int64_t ttl_ms = 30'000) {
  std::vector<waiter> ws;
  for (const auto* owner : owners)
    ws.push_back(join_queue(s, c, key, owner, held, ttl_ms));
  return ws;
}

// A release that must be answered 200.
void must_release(const suite& s, connection& c, const std::string& key, const std::string& owner,
                  std::int64_t token) {
  auto r = s.release(c, key, owner, token);
  expect(r.status == 200, owner + "'s release: expected 200, got " + r.describe());
}

// The waiters answered within `bound` (none when none was): once one is, those answered beside it too.
std::vector<waiter*> answered(std::span<waiter> ws, steady::duration bound) {
  const auto until = steady::now() + bound;
  for (;;) {
    std::vector<waiter*> out;
    for (auto& w : ws)
      if (!w.got && w.answer.valid() && w.answer.wait_for(0s) == std::future_status::ready) {
        w.got = w.answer.get();
        out.push_back(&w);
      }
    if (!out.empty() || steady::now() >= until) return out;
    std::this_thread::sleep_for(2ms);
  }
}

// The one waiter answered next; fails when several are at one hand-off (one is woken, the others wait).
waiter& answered_next(std::span<waiter> ws, const std::string& after) {
  auto out = answered(ws, queue_bound);
  expect(!out.empty(), "no waiter was answered within " + ms(queue_bound) + " after " + after);
  if (out.size() > 1) {
    std::string who;
    for (auto* w : out)
      who += (who.empty() ? "" : "; ") + w->owner + ": " + w->got->describe();
    throw check_failed(std::to_string(out.size()) + " waiters were answered after " + after +
                       " (one is granted the lock, the others keep waiting): " + who);
  }
  return *out.front();
}

// A waiter's grant: 200 as an acquire's, with an integer queued_ms within the time its request was out.
std::int64_t granted(const waiter& w, const std::string& after) {
  const auto& r = *w.got;
  expect(
      r.status == 200 && r.num("token").value_or(0) >= 1,
      w.owner + "'s queued acquire after " + after + ": expected 200 granting the lock, got " + r.describe());
  const auto queued = r.num("queued_ms");
  expect(queued.has_value(), w.owner + "'s grant has no integer queued_ms: " + r.describe());
  const auto out_for = std::chrono::ceil<milliseconds>(r.received - r.sent).count();
  expect(*queued >= 0 && *queued <= out_for, w.owner + "'s grant says queued_ms " + std::to_string(*queued) +
                                                 ", but its request was out for " + std::to_string(out_for) +
                                                 " ms: " + r.describe());
  return r.token();
}

void queue_order(const suite& s) {
  s.require_feature("acquire_queue");
  auto c = s.open();
  const auto key = s.key("queue-order");
  // A free key nobody waits for: an acquire, answered at once.
  auto held = s.acquire_queued(c, key, "holder", 30'000, queue_wait_ms, s.timeout());
  expect(held.status == 200 && held.num("queued_ms") == 0 && held.num("token").value_or(0) >= 1,
         "a queued acquire of a free key: expected 200 at once with queued_ms 0, got " + held.describe());
  auto ws = queue_up(s, c, key, held, {"waiter-1", "waiter-2", "waiter-3"});
  must_release(s, c, key, "holder", held.token());
  std::string order, after = "the holder's release";
  auto last = held.token();
  for (std::size_t i = 0; i < ws.size(); ++i) {
    auto& w = answered_next(ws, after);
    const auto token = granted(w, after);
    expect(token > last, w.owner + " was granted token " + std::to_string(token) + ", not larger than " +
                             std::to_string(last) + " before it");
    last = token;
    order += (order.empty() ? "" : ", ") + w.owner;
    after = w.owner + "'s release";
    must_release(s, c, key, w.owner, token);
  }
  expect(order == "waiter-1, waiter-2, waiter-3", "the lock went to " + order +
                                                      ", in that order; they joined the queue as waiter-1, "
                                                      "waiter-2, waiter-3 (first come, first served)");
}

void queue_one_answer_per_hand_off(const suite& s) {
  s.require_feature("acquire_queue");
  auto c = s.open();
  const auto key = s.key("queue-hand-off");
  auto held = s.must_acquire(c, key, "holder", 30'000);
  auto ws = queue_up(s, c, key, held, {"waiter-1", "waiter-2"});
  must_release(s, c, key, "holder", held.token());
  auto& first = answered_next(ws, "the holder's release");
  const auto token = granted(first, "the holder's release");
  auto& other = &first == &ws[0] ? ws[1] : ws[0];
  if (other.answer.wait_until(first.got->received + still_waiting) == std::future_status::ready) {
    auto r = other.answer.get();
    s.release(c, key, first.owner, token);
    throw check_failed(other.owner + " was answered " + ms(r.received - first.got->received) + " after " +
                       first.owner +
                       " was granted the lock, which it still held (one waiter is answered "
                       "per hand-off; the others keep waiting): " +
                       r.describe());
  }
  must_release(s, c, key, first.owner, token);
  const auto after = first.owner + "'s release";
  auto& second = answered_next(ws, after);
  const auto next = granted(second, after);
  s.release(c, key, second.owner, next);
  expect(next > token, second.owner + " was granted token " + std::to_string(next) + ", not larger than " +
                           std::to_string(token) + " before it");
}

// The queue's head takes the key in the step that frees it: a plain acquire sent at once after a release, or
// after the expiry of the lease the head then got, finds it held by the next waiter.
void queue_plain_acquire_waits_its_turn(const suite& s) {
  s.require_feature("acquire_queue");
  constexpr std::int64_t ttl = 500;
  auto c = s.open();
  const auto key = s.key("queue-no-jump");
  auto held = s.must_acquire(c, key, "holder", 30'000);
  auto ws = queue_up(s, c, key, held, {"waiter-1"}, ttl);
  ws.reserve(2);  // waiter-2 joins while `first` refers to waiter-1
  must_release(s, c, key, "holder", held.token());
  auto plain = s.acquire(c, key, "plain", 30'000);
  if (plain.status == 200) s.release(c, key, "plain", plain.token());  // then the waiter gets it
  suite::expect_error(plain, 409, "held", "a plain acquire sent once the holder's release was answered");
  auto& first = answered_next(ws, "the holder's release");
  const auto token = granted(first, "the holder's release");
  expect(plain.str("owner") == "waiter-1" && plain.num("token") == token,
         "a plain acquire sent once the holder's release was answered should be refused naming waiter-1, "
         "which the release handed the lock to with token " +
             std::to_string(token) + ": " + plain.describe());
  ws.push_back(join_queue(s, c, key, "waiter-2", *first.got));
  // The lease's TTL runs from the grant, which came before its answer.
  std::this_thread::sleep_until(first.got->received + milliseconds(ttl) + 5ms);
  auto late = s.acquire(c, key, "plain", 30'000);
  if (late.status == 200) s.release(c, key, "plain", late.token());
  suite::expect_error(late, 409, "held", "a plain acquire sent after waiter-1's lease had expired");
  auto& second = answered_next(ws, "the expiry of waiter-1's " + std::to_string(ttl) + " ms lease");
  const auto next = granted(second, "the expiry of waiter-1's lease");
  s.release(c, key, "waiter-2", next);
  expect(late.str("owner") == "waiter-2" && late.num("token") == next,
         "a plain acquire sent after waiter-1's " + std::to_string(ttl) +
             " ms lease had expired should be refused naming waiter-2, which the expiry handed the lock to "
             "with token " +
             std::to_string(next) + ": " + late.describe());
}

// A waiter whose client goes away leaves the queue: the next one gets the lock, and the one that left holds
// it at no time after (a server may grant it and give the grant back at once, never keep it).
void queue_closed_waiter_skipped(const suite& s) {
  s.require_feature("acquire_queue");
  auto c = s.open();
  const auto key = s.key("queue-closed");
  auto held = s.must_acquire(c, key, "holder", 30'000);
  auto ws = queue_up(s, c, key, held, {"departed", "next"});
  ws[0].conn->abandon();
  auto gone = ws[0].answer.get();
  ws[0].got = gone;
  expect(gone.status == 0,
         "departed's queued acquire was answered while the key was still held: " + gone.describe());
  std::this_thread::sleep_for(100ms);  // for the server to see the connection closed
  must_release(s, c, key, "holder", held.token());
  auto& next = answered_next(ws, "the holder's release");
  const auto token = granted(next, "the holder's release (departed, ahead of it, had closed its connection)");
  auto g = s.get(c, key);
  expect(g.status == 200 && g.str("owner") == "next" && g.num("token") == token,
         "GET after next was granted the lock should name next with token " + std::to_string(token) + ": " +
             g.describe());
  must_release(s, c, key, "next", token);
  auto after = s.get(c, key);
  suite::expect_error(
      after, 404, "not_held",
      "GET after next released the lock (nothing may be granted to departed, whose connection "
      "closed while it waited)");
}

// The wait passing is a refused acquire: 409 held naming the holder, no sooner than wait_ms, and the place
// is not kept.
void queue_wait_passes(const suite& s) {
  s.require_feature("acquire_queue");
  constexpr std::int64_t wait = 300;
  auto c = s.open();
  const auto key = s.key("queue-wait");
  auto held = s.must_acquire(c, key, "holder", 30'000);
  auto wc = s.open();
  auto r = s.acquire_queued(wc, key, "impatient", 30'000, wait, milliseconds(wait * 5));
  auto g = s.get(c, key);
  auto rel = s.release(c, key, "holder", held.token());
  auto after = s.get(c, key);
  const auto what = "a queued acquire with wait_ms=" + std::to_string(wait) + " of a key held throughout";
  expect(r.status != 0, what + " was not answered within " + ms(milliseconds(wait * 5)) +
                            " (5 times its wait): " + r.describe());
  suite::expect_error(r, 409, "held", what);
  expect(r.str("owner") == "holder" && r.num("token") == held.num("token"),
         what + ": the refusal does not name the holder with token " + std::to_string(held.token()) + ": " +
             r.describe());
  expect(r.received - r.sent >= milliseconds(wait) - expiry_tolerance,
         what + " was answered after " + ms(r.received - r.sent) + ", before its wait had passed");
  expect(g.status == 200 && g.num("token") == held.num("token"),
         "GET after the refusal should still name the holder: " + g.describe());
  expect(rel.status == 200, "the holder's release: expected 200, got " + rel.describe());
  suite::expect_error(after, 404, "not_held",
                      "GET after the holder's release (a request whose wait passed keeps no place)");
}

// Optional features a server may advertise, and the check that exercises each.
struct feature_check {
  const char* feature;
  const char* check;
};
constexpr feature_check known_features[] = {
    {"lease_values", "a lease's value is published, replaced and kept"},
    {"renew_batch", "renew batch"},
    {"proclaim", "proclaim"},
    {"lock_record", "lock record"},
    {"acquire_queue", "queued acquire"},
    {"list_locks", "list"},
    {"break_lease", "break"},
    {"lock_delay", "lock-delay"},
};

// GET /v1/capabilities: optional itself (a 404 is a version 1 server with no optional features). When
// answered, it must have the documented shape; each advertised feature this baton knows has checks of its
// own, which run only when it is advertised.
void capabilities(const suite& s) {
  auto c = s.open();
  auto r = c.request(http::verb::get, "/v1/capabilities", {}, s.timeout());
  if (r.status == 404)
    throw check_skipped(not_advertised,
                        "GET /v1/capabilities is 404: protocol version 1, no optional features",
                        "capabilities");
  expect(r.status == 200,
         "GET /v1/capabilities: expected 200, or 404 when not advertised; got " + r.describe());
  const auto* o = r.json.if_object();
  expect(o != nullptr, "GET /v1/capabilities: the body is not a JSON object: " + r.describe());
  const auto version = r.num("protocol_version");
  expect(version && *version >= 1, "GET /v1/capabilities: no integer protocol_version >= 1: " + r.describe());
  const auto* features = o->if_contains("features");
  expect(features && features->is_array(), "GET /v1/capabilities: no \"features\" array: " + r.describe());
  std::string checked, unknown;
  for (const auto& f : features->get_array()) {
    expect(f.is_string(), "GET /v1/capabilities: a feature that is not a string: " + r.describe());
    const std::string name(f.get_string());
    auto known = std::find_if(std::begin(known_features), std::end(known_features),
                              [&](const feature_check& k) { return name == k.feature; });
    auto& list = known != std::end(known_features) ? checked : unknown;
    list += (list.empty() ? "" : ", ") + name;
  }
  std::string note = "protocol_version " + std::to_string(*version);
  if (!checked.empty()) note += "; checked: " + checked;
  if (!unknown.empty()) note += "; not known to this baton, not checked: " + unknown;
  s.note(note);
}

// --- renew batch (docs/protocol.md, "renew batch"): run when the server advertises renew_batch

// The results array of a 200 batch answer with one result per entry.
const json::array& batch_results(const reply& r, std::size_t entries, const std::string& what) {
  expect(r.status == 200, what + ": expected 200, got " + r.describe());
  const json::value* v = r.json.is_object() ? r.json.as_object().if_contains("results") : nullptr;
  expect(v && v->is_array() && v->as_array().size() == entries,
         what + ": expected \"results\" with " + std::to_string(entries) + " entries, got " + r.describe());
  return v->as_array();
}

// One result as a reply of its own, so a result is judged with the single renew's words.
reply result_reply(const json::value& v) {
  reply r;
  r.json = v;
  r.body = json::serialize(v);
  r.status = r.str("error").empty() ? 200 : 409;
  return r;
}

// Leases in five states, renewed in one batch: each answered as a single renew of it is
// (docs/protocol.md, renew), in request order, and only the live one's expiry moves.
void renew_batch_mixed(const suite& s) {
  s.require_feature("renew_batch");
  auto c = s.open();
  const auto live = s.key("batch-live"), other = s.key("batch-other"), free = s.key("batch-free"),
             gone = s.key("batch-expired"), made_up = s.key("batch-made-up");
  auto mine = s.must_acquire(c, live, "batcher", 2'000);
  auto theirs = s.must_acquire(c, other, "someone-else", 30'000);
  auto held = s.must_acquire(c, made_up, "batcher", 30'000);
  auto short_lived = s.must_acquire(c, gone, "batcher", 200);
  std::this_thread::sleep_until(short_lived.sent + 1'200ms);
  auto r = s.renew_batch(c, {{live, "batcher", mine.token(), 60'000},
                             {other, "batcher", theirs.token(), 60'000},
                             {free, "batcher", mine.token(), 60'000},
                             {gone, "batcher", short_lived.token(), 60'000},
                             {made_up, "batcher", held.token() + 1'000'000, 60'000}});
  auto g = s.get(c, live);
  auto still = s.get(c, other);
  s.release(c, live, "batcher", mine.token());
  s.release(c, other, "someone-else", theirs.token());
  s.release(c, made_up, "batcher", held.token());
  const auto& out = batch_results(r, 5, "a batch of 5 entries");
  auto first = result_reply(out[0]);
  expect(first.status == 200 && first.num("token") == mine.num("token") && first.num("ttl_ms") == 60'000,
         "entry 0 (the batcher's live lease): expected its lease back, got " + first.describe());
  expect_lost(result_reply(out[1]), {"owner_mismatch"}, "entry 1 (a key another owner holds)");
  expect_lost(result_reply(out[2]), {"not_held"}, "entry 2 (a key nobody holds)");
  expect_lost(result_reply(out[3]), {"expired", "not_held"}, "entry 3 (a 200 ms lease renewed 1.2 s on)");
  expect_lost(result_reply(out[4]), {"token_mismatch"},
              "entry 4 (the batcher's lease, a token never issued)");
  expect(g.status == 200 && g.num("ttl_remaining_ms").value_or(0) > 2'000,
         "after the batch renewed a 2 s lease for 60 s, GET should show more than 2 s left: " + g.describe());
  expect(still.status == 200 && still.num("token") == theirs.num("token"),
         "the entry refused owner_mismatch changed its lease: " + still.describe());
}

// A re-acquire supersedes the old token: in a batch too, the old one renews nothing, and the entry beside
// it with the current token is renewed.
void renew_batch_superseded(const suite& s) {
  s.require_feature("renew_batch");
  auto c = s.open();
  const auto key = s.key("batch-superseded"), beside = s.key("batch-beside");
  auto first = s.must_acquire(c, key, "batcher", 30'000);
  auto second = s.must_acquire(c, key, "batcher", 30'000);
  auto next = s.must_acquire(c, beside, "batcher", 30'000);
  auto r =
      s.renew_batch(c, {{key, "batcher", first.token(), 60'000}, {beside, "batcher", next.token(), 60'000}});
  auto still = s.get(c, key);
  s.release(c, key, "batcher", second.token());
  s.release(c, beside, "batcher", next.token());
  const auto& out = batch_results(r, 2, "a batch with a superseded token");
  expect_lost(result_reply(out[0]), {"token_mismatch"}, "a batch entry with the superseded token");
  expect(result_reply(out[1]).status == 200,
         "the entry beside it with its current token: expected its lease, got " + json::serialize(out[1]));
  expect(still.status == 200 && still.num("token") == second.num("token") &&
             still.num("ttl_remaining_ms").value_or(60'000) <= 30'000,
         "after a batch entry with the superseded token, the lease should keep token " +
             std::to_string(second.token()) + " and its 30 s: " + still.describe());
}

// A malformed entry refuses the whole batch: 400 with a JSON error, and the well-formed entry beside it is
// not renewed. A key given twice is malformed too.
void renew_batch_malformed(const suite& s) {
  s.require_feature("renew_batch");
  auto c = s.open();
  const auto key = s.key("batch-malformed");
  auto a = s.must_acquire(c, key, "batcher", 20'000);
  auto bad_token =
      s.renew_batch(c, {{key, "batcher", a.token(), 3'600'000}, {s.key("batch-x"), "batcher", 0, 1'000}});
  auto twice =
      s.renew_batch(c, {{key, "batcher", a.token(), 3'600'000}, {key, "batcher", a.token(), 3'600'000}});
  auto g = s.get(c, key);
  s.release(c, key, "batcher", a.token());
  suite::expect_error(bad_token, 400, "bad_request", "a batch with an entry whose token is 0");
  suite::expect_error(twice, 400, "bad_request", "a batch that names one key twice");
  expect(g.status == 200 && g.num("ttl_remaining_ms").value_or(3'600'000) <= 20'000,
         "after refused batches, the lease should keep its 20 s (nothing renewed): " + g.describe());
}

// --- restart mode
// -------------------------------------------------------------------------------------------

constexpr auto restart_close_bound = 5s;  // for the old server's connections to close after the command

// Leaves a lease held and a lock released, restarts the server with the command, and waits for it to answer.

}  // namespace

restart_state restart_server(const suite& s) {
  restart_state st;
  try {
    auto c = s.open();
    st.held_key = s.key("restart-held");
    st.held_owner = "survivor";
    // Long enough to outlast the command and the wait for the server's return (a restart restores it with its
    // full TTL, docs/protocol.md, Restart).
    st.held_token = s.must_acquire(c, st.held_key, st.held_owner, 300'000).token();
    st.released_key = s.key("restart-released");
    auto r = s.must_acquire(c, st.released_key, "leaver", 300'000);
    auto rel = s.release(c, st.released_key, "leaver", r.token());
    expect(rel.status == 200, "release before the restart: expected 200, got " + rel.describe());
    // An idle connection from before: a server that really went down closed it.
    auto witness = s.open();
    auto h = witness.request(http::verb::get, "/healthz", {}, s.timeout());
    expect(h.status == 200, "GET /healthz before the restart: " + h.describe());
    if (s.has_feature("renew_batch")) {
      // A 2 s lease raised to 300 s by a batch: restored with 2 s if the raise was not durable.
      suite::batch_raise b{s.key("restart-batch"), "batch-survivor", 0, {}};
      b.token = s.must_acquire(c, b.key, b.owner, 2'000).token();
      auto r = s.renew_batch(c, {{b.key, b.owner, b.token, 300'000}});
      try {
        auto one = result_reply(batch_results(r, 1, "batch renewal before the restart")[0]);
        expect(one.status == 200, "batch renewal before the restart: " + one.describe());
      } catch (const check_failed& e) {
        b.error = e.what();
      }
      s.batch_raised = std::move(b);
    }
    if (s.has_feature("proclaim")) {
      st.proclaimed_value = "proclaimed-before-restart:80";
      auto p = s.proclaim(c, st.held_key, st.held_owner, st.held_token, *st.proclaimed_value);
      expect(p.status == 200, "proclaim before the restart: expected 200, got " + p.describe());
    }
    if (s.has_feature("lock_record")) {
      st.record_value = "recorded-before-restart";
      written(s.write_record(c, st.held_key, st.held_owner, st.held_token, *st.record_value), st.held_token,
              1, "a record write before the restart");
    }
    st.max_token_before = s.max_token();
    if (auto failed = run_restart_command(*s.restart_command())) throw check_failed(*failed);
    // A signal sent by CMD may land a moment after CMD returned.
    for (const auto until = steady::now() + restart_close_bound;;) {
      if (witness.request(http::verb::get, "/healthz", {}, 2s).status == 0) break;
      expect(steady::now() < until,
             "the server was not restarted: a connection opened before --restart-command "
             "still answers " +
                 std::to_string(restart_close_bound / 1s) + " s after it");
      std::this_thread::sleep_for(100ms);
    }
    const auto until = steady::now() + restart_return_bound;
    for (auto probe = s.open();;) {
      auto back = probe.request(http::verb::get, "/healthz", {}, 1s);
      if (back.status == 200) break;
      expect(steady::now() < until, "the server did not answer GET /healthz within " +
                                        std::to_string(restart_return_bound / 1s) +
                                        " s after --restart-command: " + back.describe());
      std::this_thread::sleep_for(50ms);
    }
  } catch (const std::exception& e) {
    st.error = std::string("restart: ") + e.what();
  }
  return st;
}

namespace {

void restart_keeps_held_lease(const suite& s) {
  const auto& st = s.restarted();
  auto c = s.open();
  auto g = s.get(c, st.held_key);
  expect(g.status == 200 && g.str("owner") == st.held_owner && g.num("token") == st.held_token,
         "a lease held by " + st.held_owner + " with token " + std::to_string(st.held_token) +
             " before the restart: GET after it says " + g.describe());
  auto r = s.renew(c, st.held_key, st.held_owner, st.held_token, 300'000);
  expect(r.status == 200, "renew of that lease after the restart: expected 200, got " + r.describe());
}

void restart_keeps_proclaim(const suite& s) {
  const auto& st = s.restarted();
  s.require_feature("proclaim");
  expect(st.proclaimed_value.has_value(),
         "no value was proclaimed before the restart (GET /v1/capabilities did not name proclaim then)");
  auto c = s.open();
  auto g = s.get(c, st.held_key);
  expect(g.status == 200 && g.num("token") == st.held_token && g.str("value") == *st.proclaimed_value,
         "a value proclaimed before the restart (\"" + *st.proclaimed_value + "\", token " +
             std::to_string(st.held_token) + "): GET after it says " + g.describe());
}

void restart_keeps_record(const suite& s) {
  const auto& st = s.restarted();
  s.require_feature("lock_record");
  expect(st.record_value.has_value(),
         "no record was written before the restart (GET /v1/capabilities did not name lock_record then)");
  auto c = s.open();
  record_is(s.read_record(c, st.held_key), *st.record_value, st.held_token, 1, st.held_owner,
            "a record written before the restart, read after it");
}

void restart_keeps_batch_raise(const suite& s) {
  s.restarted();
  s.require_feature("renew_batch");
  expect(s.batch_raised.has_value(), "no lease was batch-renewed before the restart");
  const auto& b = *s.batch_raised;
  expect(b.error.empty(), b.error);
  auto c = s.open();
  auto g = s.get(c, b.key);
  s.release(c, b.key, b.owner, b.token);
  expect(g.status == 200 && g.num("token") == b.token && g.num("ttl_remaining_ms").value_or(0) > 60'000,
         "a 2 s lease a batch renewed for 300 s before the restart should be held with most of the 300 s "
         "after it (a server that answered before storing the raise restores 2 s): " +
             g.describe());
}

void restart_keeps_release(const suite& s) {
  const auto& st = s.restarted();
  auto c = s.open();
  suite::expect_error(s.get(c, st.released_key), 404, "not_held",
                      "GET after the restart of a lock released before it");
}

void restart_tokens_increase(const suite& s) {
  const auto& st = s.restarted();
  auto c = s.open();
  const auto before = std::to_string(st.max_token_before);
  auto fresh = s.must_acquire(c, s.key("restart-fresh"), "newcomer", 30'000);
  auto freed = s.must_acquire(c, st.released_key, "newcomer", 30'000);
  auto again = s.must_acquire(c, st.held_key, st.held_owner, 30'000);
  s.release(c, s.key("restart-fresh"), "newcomer", fresh.token());
  s.release(c, st.released_key, "newcomer", freed.token());
  s.release(c, st.held_key, st.held_owner, again.token());
  expect(fresh.token() > st.max_token_before, "an acquire of a new key after the restart got token " +
                                                  std::to_string(fresh.token()) + ", not larger than " +
                                                  before + " (issued before it)");
  expect(freed.token() > st.max_token_before,
         "an acquire of the lock released before the restart got token " + std::to_string(freed.token()) +
             ", not larger than " + before);
  expect(again.token() > st.max_token_before, "the holder's re-acquire after the restart got token " +
                                                  std::to_string(again.token()) + ", not larger than " +
                                                  before);
}

// Feature list_locks (docs/protocol.md, "list"): the held locks under a prefix in key order, page by page
// with a cursor; a released one is gone, an absent prefix lists nothing, a limit of 0 is 400.
void list_pages_in_key_order(const suite& s) {
  s.require_feature("list_locks");
  auto c = s.open();
  const auto prefix = s.key("list") + "/";
  std::vector<std::int64_t> tokens;
  for (const char* name : {"c", "a", "b", "gone"})
    tokens.push_back(s.must_acquire(c, prefix + name, "lister", 30'000).token());
  s.release(c, prefix + "gone", "lister", tokens.back());
  auto list = [&](const std::string& query) {
    return c.request(http::verb::get, "/v1/locks?prefix=" + encode_segment(prefix) + query, {}, s.timeout());
  };
  std::vector<std::string> keys;
  std::string after;
  for (int page = 0; page < 4; ++page) {
    auto r = list("&limit=2" + (after.empty() ? "" : "&after=" + encode_segment(after)));
    expect(r.status == 200 && r.json.is_object() && r.json.as_object().if_contains("locks") &&
               r.json.at("locks").is_array() && r.json.as_object().if_contains("next"),
           "GET /v1/locks: expected 200 {\"locks\":[...],\"next\"}, got " + r.describe());
    const auto& locks = r.json.at("locks").as_array();
    expect(locks.size() <= 2, "a page of limit 2 held " + std::to_string(locks.size()) + " locks");
    for (const auto& l : locks) {
      expect(l.is_object() && l.as_object().if_contains("key") && l.at("key").is_string() &&
                 l.as_object().if_contains("token") && l.as_object().if_contains("ttl_remaining_ms"),
             "a listed lock lacks key, token or ttl_remaining_ms: " + r.describe());
      keys.emplace_back(l.at("key").as_string());
    }
    const auto& next = r.json.at("next");
    if (next.is_null()) break;
    expect(next.is_string() && !locks.empty() && next.as_string() == locks.back().at("key").as_string(),
           "\"next\" should be the last key of the page, or null after the last: " + r.describe());
    after = std::string(next.as_string());
  }
  const std::vector<std::string> want{prefix + "a", prefix + "b", prefix + "c"};
  expect(keys == want, "the pages listed " + std::to_string(keys.size()) +
                           " keys, not the three held ones in key order (a released key must not show)");
  auto none =
      c.request(http::verb::get, "/v1/locks?prefix=" + encode_segment(prefix + "nothing/"), {}, s.timeout());
  expect(none.status == 200 && none.json.at("locks").as_array().empty() && none.json.at("next").is_null(),
         "a prefix with no held lock should list nothing: " + none.describe());
  suite::expect_error(list("&limit=0"), 400, "bad_request", "a listing with limit=0");
  for (std::size_t i = 0; i < 3; ++i)
    s.release(c, want[i], "lister", tokens[i == 0 ? 1 : i == 1 ? 2 : 0]);
}

// Feature break_lease (docs/protocol.md, "break"): a stale token and a free key change nothing; a break
// frees the key, the holder's renew is lost, the next grant is larger. Needs a token with admin access when
// the server requires tokens; a 403 skips the check.
void break_ends_the_lease(const suite& s) {
  s.require_feature("break_lease");
  auto c = s.open();
  const auto key = s.key("break");
  auto brk = [&](const std::string& body) {
    return c.request(http::verb::post, suite::path(key, "/break"), body, s.timeout());
  };
  auto a = s.must_acquire(c, key, "stuck", 30'000);
  auto stale = brk(R"({"token":)" + std::to_string(a.token() + 1000) + "}");
  if (stale.status == 403) {
    s.release(c, key, "stuck", a.token());
    throw check_skipped("no admin access", "the run's token may not break leases (" + stale.describe() + ")");
  }
  suite::expect_error(stale, 409, "token_mismatch", "a break naming another token");
  expect(stale.num("token") == a.token(),
         "the 409 token_mismatch should name the holder's token: " + stale.describe());
  auto broke = brk(R"({"token":)" + std::to_string(a.token()) + "}");
  expect(broke.status == 200 && broke.num("token") == a.token() && broke.str("owner") == "stuck",
         "a break of the holder's token: expected 200 naming owner stuck and token " +
             std::to_string(a.token()) + ", got " + broke.describe());
  auto g = s.get(c, key);
  expect(g.status == 404, "GET after a break should be 404 not_held: " + g.describe());
  auto lost = s.renew(c, key, "stuck", a.token(), 30'000);
  suite::expect_error(lost, 409, "lost", "the broken holder's renew");
  suite::expect_error(brk("{}"), 404, "not_held", "a break of a free key");
  auto next = s.must_acquire(c, key, "next", 30'000);
  expect(next.token() > a.token(), "the grant after a break has token " + std::to_string(next.token()) +
                                       ", not larger than the broken " + std::to_string(a.token()));
  s.release(c, key, "next", next.token());
}

// Feature lock_delay (docs/protocol.md, "Lock-delay"): a released lease frees its key at once; an expired
// one keeps it from everyone, its owner too, with 409 held naming the delay, until the delay has passed;
// the next token is larger. Times: a 200 ms lease with a 1500 ms delay. A grant whose answer came before
// send(acquire) + ttl + delay is a grant inside the delay, whatever the machine's speed; a refusal that
// came too late to tell is inconclusive, not a failure.
void lock_delay_after_expiry(const suite& s) {
  s.require_feature("lock_delay");
  auto c = s.open();
  auto delayed_acquire = [&](const std::string& key, const std::string& owner, std::int64_t ttl_ms,
                             std::int64_t delay_ms) {
    json::object body{{"owner", owner}, {"ttl_ms", ttl_ms}, {"lock_delay_ms", delay_ms}};
    return c.request(http::verb::post, suite::path(key, "/acquire"), json::serialize(body), s.timeout());
  };
  const auto released = s.key("lock-delay-release");
  auto r = delayed_acquire(released, "a", 30'000, 60'000);
  expect(r.status == 200, "an acquire with lock_delay_ms 60000: expected 200, got " + r.describe());
  expect(s.release(c, released, "a", r.token()).status == 200, "the release of a lease with a lock-delay");
  auto next = s.must_acquire(c, released, "b", 30'000);
  s.release(c, released, "b", next.token());

  constexpr std::int64_t ttl_ms = 200, delay_ms = 1500;
  const auto key = s.key("lock-delay-expiry");
  const auto sent = steady::now();
  auto a = delayed_acquire(key, "a", ttl_ms, delay_ms);
  expect(a.status == 200, "an acquire with lock_delay_ms: expected 200, got " + a.describe());
  const auto answered = steady::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * ttl_ms));  // the lease has expired by now
  const auto earliest_end = sent + std::chrono::milliseconds(ttl_ms + delay_ms);
  for (const char* owner : {"b", "a"}) {
    auto refused = s.acquire(c, key, owner, 30'000);
    if (refused.status == 200) {
      expect(steady::now() >= earliest_end,
             "acquire by " + std::string(owner) + " " + ms(steady::now() - sent) +
                 " after the acquire of a 200 ms lease with a 1500 ms lock-delay was granted: " +
                 refused.describe());
      s.release(c, key, owner, refused.token());
      throw check_failed("inconclusive: the machine was too slow to ask within the delay");
    }
    suite::expect_error(refused, 409, "held", "acquire by " + std::string(owner) + " during the lock-delay");
    const auto left = refused.num("lock_delay_remaining_ms");
    expect(left && *left >= 1 && *left <= delay_ms,
           "the refusal should carry lock_delay_remaining_ms from 1 to 1500: " + refused.describe());
    expect(refused.num("ttl_remaining_ms") == left && refused.str("owner").empty(),
           "the refusal should carry no owner and ttl_remaining_ms equal to lock_delay_remaining_ms: " +
               refused.describe());
  }
  // Granted once the delay is over, by a bound of the expiry, the delay and 5 s for a slow machine.
  const auto bound = answered + std::chrono::milliseconds(ttl_ms + delay_ms) + 5s;
  for (;;) {
    auto b = s.acquire(c, key, "b", 30'000);
    if (b.status == 200) {
      expect(b.token() > a.token(), "the grant after a lock-delay has token " + std::to_string(b.token()) +
                                        ", not larger than " + std::to_string(a.token()));
      s.release(c, key, "b", b.token());
      break;
    }
    expect(steady::now() < bound, "the key is still refused " + ms(steady::now() - answered) +
                                      " after a 200 ms lease with a 1500 ms lock-delay: " + b.describe());
    std::this_thread::sleep_for(50ms);
  }
}

// Feature lock_delay: a delay over the advertised lock_delay_max_ms is 400 naming the bound, nothing granted.
void lock_delay_over_bound(const suite& s) {
  s.require_feature("lock_delay");
  auto c = s.open();
  auto caps = c.request(http::verb::get, "/v1/capabilities", {}, s.timeout());
  const auto max = caps.num("lock_delay_max_ms");
  expect(max && *max >= 0,
         "GET /v1/capabilities advertises lock_delay without lock_delay_max_ms: " + caps.describe());
  const auto key = s.key("lock-delay-bound");
  json::object body{{"owner", "a"}, {"ttl_ms", 30'000}, {"lock_delay_ms", *max + 1}};
  auto r = c.request(http::verb::post, suite::path(key, "/acquire"), json::serialize(body), s.timeout());
  suite::expect_error(r, 400, "bad_request", "an acquire with lock_delay_ms one over lock_delay_max_ms");
  expect(r.str("message").find(std::to_string(*max)) != std::string::npos,
         "the 400 should name the bound " + std::to_string(*max) + ": " + r.describe());
  expect(s.get(c, key).status == 404, "the refused acquire took the key");
}

constexpr const char* no_operators =
    "the listing and the break are batond's routes; the etcd backend's are checked by its own tests";

// Each check; its counterpart through baton::backend, where the backend's interface can express it, has the
// same name in backend_conformance.cpp's tables (on_backend::find). What only the wire shows has none and is
// skipped in that mode.

constexpr const char* no_queue =
    "these checks read the HTTP queued acquire's requests; on etcd the SDK waits in etcd's own Mutex line";

constexpr check lease_and_wire_checks[] = {
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
    {"capabilities", capabilities},
    {check_name::renew_batch_mixed, renew_batch_mixed},
    {check_name::renew_batch_superseded, renew_batch_superseded},
    {"renew batch: a malformed batch is 400 and renews nothing", renew_batch_malformed},
    {check_name::proclaim_replaces_value, proclaim_replaces_value},
    {check_name::proclaim_refused, proclaim_refused},
    {"proclaim with a bad value is 400 bad_request", proclaim_bad_value},
    {check_name::proclaim_wakes_value_poll, proclaim_wakes_value_poll},
    {check_name::record_written, record_written},
    {check_name::record_refused, record_refused},
    {check_name::record_outlives_lease, record_outlives_lease},
    {check_name::record_missing, record_missing},
    {"queued acquire: waiters are granted the lock in arrival order", queue_order, no_queue},
    {"queued acquire: one waiter is answered per hand-off", queue_one_answer_per_hand_off, no_queue},
    {"queued acquire: a plain acquire does not jump the queue", queue_plain_acquire_waits_its_turn, no_queue},
    {"queued acquire: a waiter whose connection closes is skipped", queue_closed_waiter_skipped, no_queue},
    {"queued acquire: the wait passing is answered 409 held", queue_wait_passes, no_queue},
    {"list: held locks under a prefix, in key order, page by page", list_pages_in_key_order, no_operators},
    {"break: the lease ends, its holder is lost, the next token is larger", break_ends_the_lease,
     no_operators},
    {check_name::lock_delay_after_expiry, lock_delay_after_expiry},
    {"lock-delay: a delay over the server's bound is 400 naming it", lock_delay_over_bound, no_operators},
    {"malformed JSON is 400 bad_request", malformed_json},
    {"missing field is 400 bad_request", missing_field},
    {"ttl out of range is 400 bad_request", ttl_out_of_range},
    {"unknown route is 404 not_found", unknown_route},
    {"wrong method is 405 method_not_allowed", wrong_method},
    {"body over 64 KiB is 413 body_too_large", body_too_large},
    {"server still serves after bad inputs", still_serves},
};

// Run after every other check, so that "every token before" covers the whole run.
constexpr check after_restart[] = {
    {check_name::restart_keeps_held_lease, restart_keeps_held_lease},
    {check_name::restart_keeps_release, restart_keeps_release},
    {"restart: a TTL raised by a batch renewal is kept", restart_keeps_batch_raise},
    {check_name::restart_keeps_proclaim, restart_keeps_proclaim},
    {check_name::restart_keeps_record, restart_keeps_record},
    {check_name::restart_tokens_increase, restart_tokens_increase},
};

}  // namespace

std::span<const check> checks() {
  return lease_and_wire_checks;
}
std::span<const check> restart_checks() {
  return after_restart;
}

}  // namespace baton::cli::http_conformance
