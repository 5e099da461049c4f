// SPDX-License-Identifier: Apache-2.0
// `baton conformance` over HTTP: counting semaphores (docs/protocol.md, "semaphores"), run when the server
// advertises semaphores.

#include "http_checks.hpp"

#include <vector>

namespace baton::cli::http_conformance {
namespace {

reply acquire_permit(const suite& s, connection& c, const std::string& key, const std::string& owner,
                     std::int64_t permits) {
  json::object body{{"owner", owner}, {"ttl_ms", 30'000}, {"permits", permits}};
  return c.request(http::verb::post, suite::path(key, "/acquire"), json::serialize(body), s.timeout());
}

// A grant of a permit: 200 with permits and the expected slot, or why not.
reply granted(const suite& s, connection& c, const std::string& key, const std::string& owner,
              std::int64_t permits, std::int64_t slot) {
  auto r = acquire_permit(s, c, key, owner, permits);
  expect(r.status == 200, "acquire by " + owner + " of one of " + std::to_string(permits) +
                              " permits: expected 200, got " + r.describe());
  expect(r.num("permits") == permits && r.num("slot") == slot,
         "the grant to " + owner + " should name permits " + std::to_string(permits) + " and slot " +
             std::to_string(slot) + " (the lowest free): " + r.describe());
  r.token();
  return r;
}

// The slots of a held answer's (or a GET's) `holders`, in the order given.
std::vector<std::int64_t> holder_slots(const reply& r) {
  std::vector<std::int64_t> out;
  if (auto* o = r.json.if_object())
    if (auto* h = o->if_contains("holders"); h && h->is_array())
      for (const auto& one : h->as_array())
        if (auto* e = one.if_object())
          if (auto* slot = e->if_contains("slot"); slot && slot->is_int64()) out.push_back(slot->get_int64());
  return out;
}

void release_all(const suite& s, connection& c, const std::string& key,
                 const std::vector<std::pair<std::string, std::int64_t>>& held) {
  for (const auto& [owner, token] : held)
    s.release(c, key, owner, token);
}

// At most N: three permits go to three owners in slots 0, 1, 2 with growing tokens; a fourth is 409 held
// naming the count and every holder in slot order; a released slot is the next grant's.
void at_most_n_lowest_slot(const suite& s) {
  s.require_feature("semaphores");
  auto c = s.open();
  const auto key = s.key("semaphore-at-most-n");
  std::vector<std::pair<std::string, std::int64_t>> held;
  std::int64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    const std::string owner = "p" + std::to_string(i);
    auto g = granted(s, c, key, owner, 3, i);
    expect(g.token() > last, "the permit tokens should grow: " + g.describe());
    last = g.token();
    held.emplace_back(owner, g.token());
  }
  auto full = acquire_permit(s, c, key, "p3", 3);
  suite::expect_error(full, 409, "held", "a fourth owner's acquire of one of 3 held permits");
  expect(full.num("permits") == 3, "the held answer should name permits 3: " + full.describe());
  expect(holder_slots(full) == std::vector<std::int64_t>{0, 1, 2},
         "the held answer should list the holders of slots 0, 1, 2 in order: " + full.describe());
  expect(s.release(c, key, "p1", held[1].second).status == 200, "the release of slot 1's permit");
  auto next = granted(s, c, key, "p3", 3, 1);
  expect(next.token() > last, "the grant after a release should have a larger token: " + next.describe());
  held[1] = {"p3", next.token()};
  release_all(s, c, key, held);
}

// The same holder again gets its slot with a larger token; the old token no longer renews.
void same_holder_keeps_slot(const suite& s) {
  s.require_feature("semaphores");
  auto c = s.open();
  const auto key = s.key("semaphore-same-holder");
  auto a = granted(s, c, key, "a", 2, 0);
  auto b = granted(s, c, key, "b", 2, 1);
  auto again = granted(s, c, key, "b", 2, 1);
  expect(again.token() > b.token(), "the same holder's new token should be larger: " + again.describe());
  expect_lost(s.renew(c, key, "b", b.token(), 30'000), {"token_mismatch"}, "renew with the superseded token");
  release_all(s, c, key, {{"a", a.token()}, {"b", again.token()}});
}

// While permits are held, another count (a lock's 1 included) is 409 permits_mismatch naming the count in
// use, and nothing changes.
void another_count_is_a_mismatch(const suite& s) {
  s.require_feature("semaphores");
  auto c = s.open();
  const auto key = s.key("semaphore-mismatch");
  auto a = granted(s, c, key, "a", 3, 0);
  auto two = acquire_permit(s, c, key, "b", 2);
  suite::expect_error(two, 409, "permits_mismatch", "an acquire of 2 permits of a key held with 3");
  expect(two.num("permits") == 3, "the mismatch should name the count in use, 3: " + two.describe());
  suite::expect_error(s.acquire(c, key, "b", 30'000), 409, "permits_mismatch",
                      "a plain acquire (1 permit) of a key held with 3");
  auto now = s.get(c, key);
  expect(
      now.status == 200 && now.num("token") == a.token() && holder_slots(now) == std::vector<std::int64_t>{0},
      "after the refusals the key should still be held by the one permit: " + now.describe());
  s.release(c, key, "a", a.token());
  // Free again: the next grant sets the count.
  auto b = granted(s, c, key, "b", 2, 0);
  s.release(c, key, "b", b.token());
}

// A release names its permit by token: that one is released, the others stay; a token no live permit has
// is already_free; a live permit's token with another owner is not_owner.
void release_by_token(const suite& s) {
  s.require_feature("semaphores");
  auto c = s.open();
  const auto key = s.key("semaphore-release");
  auto a = granted(s, c, key, "a", 2, 0);
  auto b = granted(s, c, key, "b", 2, 1);
  auto wrong = s.release(c, key, "a", b.token());
  suite::expect_error(wrong, 409, "not_owner", "a release of b's permit in a's name");
  auto r = s.release(c, key, "a", a.token());
  expect(r.status == 200 && r.str("outcome") != "already_free", "the release of a's permit: " + r.describe());
  auto now = s.get(c, key);
  expect(now.status == 200 && now.num("token") == b.token(),
         "after a's release, b's permit should still hold the key: " + now.describe());
  auto again = s.release(c, key, "a", a.token());
  expect(again.status == 200 && again.str("outcome") == "already_free",
         "a second release of a's permit should be already_free: " + again.describe());
  s.release(c, key, "b", b.token());
}

// Feature list_locks too: each live permit is an entry of kind permit with its slot and the count, a key's
// entries in slot order.
void listing_shows_permits(const suite& s) {
  s.require_feature("semaphores");
  s.require_feature("list_locks");
  auto c = s.open();
  const auto key = s.key("semaphore-list");
  auto a = granted(s, c, key, "a", 3, 0);
  auto b = granted(s, c, key, "b", 3, 1);
  auto l = c.request(http::verb::get, "/v1/locks?prefix=" + encode_segment(key), {}, s.timeout());
  expect(l.status == 200, "GET /v1/locks?prefix=: " + l.describe());
  std::vector<std::int64_t> slots;
  if (auto* o = l.json.if_object())
    if (auto* locks = o->if_contains("locks"); locks && locks->is_array())
      for (const auto& one : locks->as_array()) {
        const auto* e = one.if_object();
        if (!e) continue;
        auto* k = e->if_contains("key");
        if (!k || !k->is_string() || k->get_string() != key) continue;
        auto* kind = e->if_contains("kind");
        expect(kind && kind->is_string() && kind->get_string() == "permit",
               "a permit's entry should be of kind permit: " + l.describe());
        auto* permits = e->if_contains("permits");
        expect(permits && permits->is_int64() && permits->get_int64() == 3,
               "a permit's entry should name permits 3: " + l.describe());
        if (auto* slot = e->if_contains("slot"); slot && slot->is_int64()) slots.push_back(slot->get_int64());
      }
  expect(slots == std::vector<std::int64_t>{0, 1},
         "the listing should show the key's two permits, slots 0 and 1 in order: " + l.describe());
  release_all(s, c, key, {{"a", a.token()}, {"b", b.token()}});
}

constexpr check group[] = {
    {check_name::semaphore_at_most_n, at_most_n_lowest_slot},
    {check_name::semaphore_same_holder, same_holder_keeps_slot},
    {check_name::semaphore_mismatch, another_count_is_a_mismatch},
    {check_name::semaphore_release, release_by_token},
    {"semaphores: the listing shows each permit with its slot", listing_shows_permits, no_operators},
};

}  // namespace

std::span<const check> semaphore_checks() {
  return group;
}

}  // namespace baton::cli::http_conformance
