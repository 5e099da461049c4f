// SPDX-License-Identifier: Apache-2.0
// `baton conformance` over HTTP: the operators' routes, the listing of held locks and the break of a
// lease, run when the server advertises them.

#include "http_checks.hpp"

#include <vector>

namespace baton::cli::http_conformance {
namespace {

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

constexpr check group[] = {
    {"list: held locks under a prefix, in key order, page by page", list_pages_in_key_order, no_operators},
    {"break: the lease ends, its holder is lost, the next token is larger", break_ends_the_lease,
     no_operators},
};

}  // namespace

std::span<const check> operator_checks() {
  return group;
}

}  // namespace baton::cli::http_conformance
