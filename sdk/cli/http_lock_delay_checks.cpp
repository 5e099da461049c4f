// SPDX-License-Identifier: Apache-2.0
// `baton conformance` over HTTP: lock-delay (docs/protocol.md, "Lock-delay"), run when the server
// advertises lock_delay.

#include "http_checks.hpp"

#include <thread>

namespace baton::cli::http_conformance {
namespace {

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

constexpr check group[] = {
    {check_name::lock_delay_after_expiry, lock_delay_after_expiry},
    {"lock-delay: a delay over the server's bound is 400 naming it", lock_delay_over_bound, no_operators},
};

}  // namespace

std::span<const check> lock_delay_checks() {
  return group;
}

}  // namespace baton::cli::http_conformance
