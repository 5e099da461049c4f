// SPDX-License-Identifier: Apache-2.0
// `baton conformance` over HTTP: proclaim (docs/protocol.md, "proclaim"), run when the server advertises
// proclaim. A value they compare against is set by a proclaim, not by the acquire: an acquire's value is
// feature lease_values, which a server may advertise or not.

#include "http_checks.hpp"

#include <future>
#include <thread>

namespace baton::cli::http_conformance {
namespace {

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

constexpr check group[] = {
    {check_name::proclaim_replaces_value, proclaim_replaces_value},
    {check_name::proclaim_refused, proclaim_refused},
    {"proclaim with a bad value is 400 bad_request", proclaim_bad_value},
    {check_name::proclaim_wakes_value_poll, proclaim_wakes_value_poll},
};

}  // namespace

std::span<const check> proclaim_checks() {
  return group;
}

}  // namespace baton::cli::http_conformance
