// SPDX-License-Identifier: Apache-2.0
// `baton conformance` over HTTP: renew batch (docs/protocol.md, "renew batch"), run when the server
// advertises renew_batch.

#include "http_checks.hpp"

#include <thread>

namespace baton::cli::http_conformance {
namespace {

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

constexpr check group[] = {
    {check_name::renew_batch_mixed, renew_batch_mixed},
    {check_name::renew_batch_superseded, renew_batch_superseded},
    {"renew batch: a malformed batch is 400 and renews nothing", renew_batch_malformed},
};

}  // namespace

const json::array& batch_results(const reply& r, std::size_t entries, const std::string& what) {
  expect(r.status == 200, what + ": expected 200, got " + r.describe());
  const json::value* v = r.json.is_object() ? r.json.as_object().if_contains("results") : nullptr;
  expect(v && v->is_array() && v->as_array().size() == entries,
         what + ": expected \"results\" with " + std::to_string(entries) + " entries, got " + r.describe());
  return v->as_array();
}

reply result_reply(const json::value& v) {
  reply r;
  r.json = v;
  r.body = json::serialize(v);
  r.status = r.str("error").empty() ? 200 : 409;
  return r;
}

std::span<const check> renew_batch_checks() {
  return group;
}

}  // namespace baton::cli::http_conformance
