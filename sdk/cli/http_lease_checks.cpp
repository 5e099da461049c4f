// SPDX-License-Identifier: Apache-2.0
// `baton conformance` over HTTP: a lease's life through the core routes (acquire, renew, release, GET,
// long-poll, the lease's value), each check on keys of its own (conformance/<random>/<check>), throwing
// check_failed with the reason.
//
// Timing is judged the way the protocol's Time section allows: a lease acquired with a request *sent* at
// client time a is held at least until a + ttl, so a read whose reply *arrived* before a + ttl must see it
// held; and it ends at most ttl after the acquire reply arrived, so the checks wait for it with generous
// bounds (5x the TTL) rather than tight ones.

#include "http_checks.hpp"

#include <algorithm>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace baton::cli::http_conformance {
namespace {

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

constexpr check group[] = {
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
};

}  // namespace

std::span<const check> lease_checks() {
  return group;
}

}  // namespace baton::cli::http_conformance
