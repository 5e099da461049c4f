// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE lock_table
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "lock_table.hpp"
#include "table_checks.hpp"

using namespace baton::server;
using namespace std::chrono_literals;

using baton::test::as;
using baton::test::t0;

BOOST_AUTO_TEST_CASE(acquire_of_a_free_key_grants_token_one_then_increasing) {
  lock_table t;
  auto a = as<acquire_granted>(t.acquire("k", "a", 1000ms, t0));
  BOOST_TEST(a.token == 1u);
  BOOST_TEST(a.replaced_token == 0u);
  auto b = as<acquire_granted>(t.acquire("other", "b", 1000ms, t0));
  BOOST_TEST(b.token == 2u);
  BOOST_TEST(t.last_token() == 2u);
}

BOOST_AUTO_TEST_CASE(acquire_held_by_another_owner_is_refused_with_the_holder) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  auto r = as<acquire_refused>(t.acquire("k", "b", 1000ms, t0 + 400ms));
  BOOST_TEST(r.holder.owner == "a");
  BOOST_TEST(r.holder.token == 1u);
  BOOST_TEST(r.holder.remaining.count() == 600);
  BOOST_TEST(t.last_token() == 1u);  // a refusal consumes no token
}

BOOST_AUTO_TEST_CASE(same_owner_reacquiring_gets_a_larger_token_and_supersedes_the_old_one) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  auto g = as<acquire_granted>(t.acquire("k", "a", 1000ms, t0 + 10ms));
  BOOST_TEST(g.token == 2u);
  BOOST_TEST(g.replaced_token == 1u);
  BOOST_TEST(as<renew_refused>(t.renew("k", "a", 1, 1000ms, t0 + 20ms)).reason ==
             lost_reason::token_mismatch);
  BOOST_TEST(std::holds_alternative<renew_ok>(t.renew("k", "a", 2, 1000ms, t0 + 20ms)));
}

BOOST_AUTO_TEST_CASE(expired_lease_is_taken_over_with_the_next_token) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  // Still held one tick before expiry, free at the expiry instant.
  BOOST_TEST(std::holds_alternative<acquire_refused>(t.acquire("k", "b", 1000ms, t0 + 999ms)));
  auto g = as<acquire_granted>(t.acquire("k", "b", 1000ms, t0 + 1000ms));
  BOOST_TEST(g.token == 2u);
  BOOST_TEST(g.replaced_token == 1u);
  BOOST_TEST(t.get("k", t0 + 1000ms)->owner == "b");
}

BOOST_AUTO_TEST_CASE(renew_extends_only_for_current_owner_and_token) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  BOOST_TEST(as<renew_refused>(t.renew("missing", "a", 1, 1000ms, t0)).reason == lost_reason::not_held);
  BOOST_TEST(as<renew_refused>(t.renew("k", "b", 1, 1000ms, t0)).reason == lost_reason::owner_mismatch);
  BOOST_TEST(as<renew_refused>(t.renew("k", "a", 7, 1000ms, t0)).reason == lost_reason::token_mismatch);
  BOOST_TEST(!as<renew_ok>(t.renew("k", "a", 1, 1000ms, t0 + 900ms)).restore_ttl_grew);
  // The renew at t0+900ms moved the expiry to t0+1900ms.
  BOOST_TEST(t.get("k", t0 + 1800ms).has_value());
  BOOST_TEST(!t.get("k", t0 + 1900ms).has_value());
}

BOOST_AUTO_TEST_CASE(renew_after_expiry_is_refused_as_not_held_and_does_not_revive) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  BOOST_TEST(as<renew_refused>(t.renew("k", "a", 1, 1000ms, t0 + 1000ms)).reason == lost_reason::not_held);
  BOOST_TEST(!t.get("k", t0 + 1000ms).has_value());
  BOOST_TEST(as<renew_refused>(t.renew("k", "b", 1, 1000ms, t0 + 1000ms)).reason == lost_reason::not_held);
}

// The answers about an expired lease depend only on its expiry time: the same before the sweep removed its
// record as after.
BOOST_AUTO_TEST_CASE(answers_about_an_expired_lease_are_the_same_before_and_after_the_sweep) {
  for (bool swept : {false, true}) {
    BOOST_TEST_CONTEXT("swept " << swept) {
      lock_table t;
      t.acquire("k", "a", 1000ms, t0);
      t.acquire("r", "a", 1000ms, t0);
      if (swept) BOOST_TEST(t.expire(t0 + 1000ms).size() == 2u);
      BOOST_TEST(as<renew_refused>(t.renew("k", "a", 1, 1000ms, t0 + 1000ms)).reason ==
                 lost_reason::not_held);
      BOOST_TEST((t.release("r", "a", 2, t0 + 1000ms).outcome == release_outcome::already_free));
      BOOST_TEST(!t.get("k", t0 + 1000ms).has_value());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_huge_ttl_saturates_the_deadline_instead_of_overflowing) {
  lock_table t;
  const milliseconds huge{std::numeric_limits<std::int64_t>::max() / 2};  // far past the clock's range
  t.acquire("k", "a", huge, t0);
  auto v = t.get("k", t0 + std::chrono::hours(24 * 365 * 100));
  BOOST_REQUIRE(v.has_value());
  BOOST_TEST((v->expires == time_point::max()));
  BOOST_TEST(std::holds_alternative<renew_ok>(t.renew("k", "a", 1, huge, t0 + 1s)));
  // A second owner never gets it: the saturated deadline does not wrap into the past.
  BOOST_TEST(std::holds_alternative<acquire_refused>(t.acquire("k", "b", 1000ms, t0 + 2s)));
  BOOST_TEST((deadline_after(time_point::max() - 1s, 2s) == time_point::max()));
  BOOST_TEST((deadline_after(t0, 5s) == t0 + 5s));
  t.restore("r", "a", 9, huge, t0);
  BOOST_TEST((t.get("r", t0)->expires == time_point::max()));
}

BOOST_AUTO_TEST_CASE(renew_reports_the_log_position_its_lease_rests_on) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  BOOST_TEST(as<renew_ok>(t.renew("k", "a", 1, 1000ms, t0)).log_seq == 0u);
  t.mark_logged("k", 1, 41);
  BOOST_TEST(as<renew_ok>(t.renew("k", "a", 1, 1000ms, t0)).log_seq == 41u);
  t.mark_logged("k", 7, 99);  // another token's record: not this lease's
  BOOST_TEST(as<renew_ok>(t.renew("k", "a", 1, 1000ms, t0)).log_seq == 41u);
  t.acquire("k", "a", 1000ms, t0);  // a same-owner re-acquire is a new lease with no record yet
  BOOST_TEST(as<renew_ok>(t.renew("k", "a", 2, 1000ms, t0)).log_seq == 0u);
}

BOOST_AUTO_TEST_CASE(renew_with_a_longer_ttl_reports_that_the_restore_ttl_grew) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  BOOST_TEST(as<renew_ok>(t.renew("k", "a", 1, 5000ms, t0)).restore_ttl_grew);
  BOOST_TEST(!as<renew_ok>(t.renew("k", "a", 1, 2000ms, t0)).restore_ttl_grew);
  BOOST_TEST(t.snapshot().at(0).restore_ttl.count() == 5000);
}

// A delayed copy of an earlier request (a proxy retrying, a packet held in a queue) can arrive after a
// renew that raised the TTL was answered: the holder counts on the raised TTL, so nothing shortens it.
BOOST_AUTO_TEST_CASE(a_renew_with_a_shorter_ttl_never_moves_the_expiry_earlier) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  as<renew_ok>(t.renew("k", "a", 1, 30'000ms, t0 + 300ms));  // held until t0+30.3s
  as<renew_ok>(t.renew("k", "a", 1, 1000ms, t0 + 500ms));    // the late copy of a 1 s renew
  BOOST_TEST(t.get("k", t0 + 30'299ms).has_value());
  BOOST_TEST(!t.get("k", t0 + 30'300ms).has_value());
  // A shorter renew still extends once the longer expiry is nearer than its TTL.
  as<renew_ok>(t.renew("k", "a", 1, 1000ms, t0 + 30'000ms));
  BOOST_TEST(t.get("k", t0 + 30'999ms).has_value());
  BOOST_TEST(!t.get("k", t0 + 31'000ms).has_value());
}

BOOST_AUTO_TEST_CASE(a_same_owner_reacquire_with_a_shorter_ttl_keeps_the_longer_expiry_and_restore_ttl) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  as<renew_ok>(t.renew("k", "a", 1, 30'000ms, t0 + 300ms));
  // The late copy of the first acquire supersedes token 1 (its holder learns it at its next renew), but
  // the key stays held, and a restart restores it, for as long as token 1's holder may still act.
  auto g = as<acquire_granted>(t.acquire("k", "a", 1000ms, t0 + 500ms));
  BOOST_TEST(g.token == 2u);
  BOOST_TEST(g.restore_ttl.count() == 30'000);
  BOOST_TEST(t.snapshot().at(0).restore_ttl.count() == 30'000);
  BOOST_TEST(std::holds_alternative<acquire_refused>(t.acquire("k", "b", 1000ms, t0 + 30'299ms)));
  BOOST_TEST(std::holds_alternative<acquire_granted>(t.acquire("k", "b", 1000ms, t0 + 30'300ms)));
  // Once expired, the next grant is a lease of its own with the TTL it asked for.
  auto fresh = as<acquire_granted>(t.acquire("k", "a", 2000ms, t0 + 40'000ms));
  BOOST_TEST(fresh.restore_ttl.count() == 2000);
  BOOST_TEST(!t.get("k", t0 + 42'000ms).has_value());
}

BOOST_AUTO_TEST_CASE(release_requires_exact_owner_and_token) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  auto wrong_owner = t.release("k", "b", 1, t0);
  BOOST_TEST((wrong_owner.outcome == release_outcome::not_owner));
  BOOST_TEST(wrong_owner.removed_token == 0u);
  BOOST_TEST((t.release("k", "a", 2, t0).outcome == release_outcome::not_owner));
  BOOST_TEST(t.get("k", t0).has_value());
  auto ok = t.release("k", "a", 1, t0);
  BOOST_TEST((ok.outcome == release_outcome::released));
  BOOST_TEST(ok.removed_token == 1u);
  BOOST_TEST(!t.get("k", t0).has_value());
}

BOOST_AUTO_TEST_CASE(release_is_idempotent_and_treats_expired_as_free) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  t.release("k", "a", 1, t0);
  auto again = t.release("k", "a", 1, t0);
  BOOST_TEST((again.outcome == release_outcome::already_free));
  BOOST_TEST(again.removed_token == 0u);

  t.acquire("e", "a", 1000ms, t0);  // token 2
  auto mine_expired = t.release("e", "a", 2, t0 + 2s);
  BOOST_TEST((mine_expired.outcome == release_outcome::already_free));
  BOOST_TEST(mine_expired.removed_token == 2u);

  t.acquire("f", "a", 1000ms, t0);  // token 3
  auto other_expired = t.release("f", "zz", 99, t0 + 2s);
  BOOST_TEST((other_expired.outcome == release_outcome::already_free));
  BOOST_TEST(other_expired.removed_token == 3u);
}

BOOST_AUTO_TEST_CASE(stale_owner_cannot_release_new_holders_lock) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  t.acquire("k", "b", 1000ms, t0 + 1500ms);  // a expired, b holds token 2
  BOOST_TEST((t.release("k", "a", 1, t0 + 1600ms).outcome == release_outcome::not_owner));
  BOOST_TEST(t.get("k", t0 + 1600ms)->token == 2u);
}

BOOST_AUTO_TEST_CASE(expire_removes_exactly_the_leases_past_their_expiry) {
  lock_table t;
  t.acquire("short", "a", 100ms, t0);
  t.acquire("long", "b", 10s, t0);
  BOOST_TEST(t.expire(t0 + 99ms).empty());
  auto gone = t.expire(t0 + 100ms);
  BOOST_REQUIRE(gone.size() == 1u);
  BOOST_TEST(gone[0].key == "short");
  BOOST_TEST(gone[0].token == 1u);
  BOOST_TEST(t.size() == 1u);
  // Tokens keep increasing after expiry.
  BOOST_TEST(as<acquire_granted>(t.acquire("short", "c", 100ms, t0 + 200ms)).token == 3u);
}

BOOST_AUTO_TEST_CASE(get_reports_remaining_time_rounded_up) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  auto v = t.get("k", t0 + 250ms + std::chrono::microseconds(1));
  BOOST_REQUIRE(v.has_value());
  BOOST_TEST(v->remaining.count() == 750);
  BOOST_TEST(!t.get("absent", t0).has_value());
}

BOOST_AUTO_TEST_CASE(restore_installs_leases_valid_from_now_and_raises_the_counter) {
  lock_table t;
  const time_point restart = t0 + 3600s;
  t.restore("k", "a", 41, 1000ms, restart);
  t.restore("k", "stale", 7, 1000ms, restart);  // an older record never overrides a newer one
  auto v = t.get("k", restart + 999ms);
  BOOST_REQUIRE(v.has_value());
  BOOST_TEST(v->owner == "a");
  BOOST_TEST(v->token == 41u);
  BOOST_TEST(as<acquire_granted>(t.acquire("other", "b", 1000ms, restart)).token == 42u);
}

BOOST_AUTO_TEST_CASE(forget_and_raise_restore_ttl_only_touch_the_matching_token) {
  lock_table t;
  t.restore("k", "a", 5, 1000ms, t0);
  t.forget("k", 4);
  BOOST_TEST(t.get("k", t0).has_value());
  t.raise_restore_ttl("k", 4, 9000ms, t0);
  BOOST_TEST(t.snapshot().at(0).restore_ttl.count() == 1000);
  t.raise_restore_ttl("k", 5, 9000ms, t0);
  BOOST_TEST(t.snapshot().at(0).restore_ttl.count() == 9000);
  BOOST_TEST(t.get("k", t0 + 8s).has_value());
  t.forget("k", 5);
  BOOST_TEST(t.size() == 0u);
  t.forget("absent", 100);  // forgetting raises the counter too: token 100 was issued once
  BOOST_TEST(t.last_token() == 100u);
}

BOOST_AUTO_TEST_CASE(observe_token_never_lowers_the_counter) {
  lock_table t;
  t.observe_token(10);
  t.observe_token(3);
  BOOST_TEST(t.last_token() == 10u);
  BOOST_TEST(as<acquire_granted>(t.acquire("k", "a", 1000ms, t0)).token == 11u);
}

BOOST_AUTO_TEST_CASE(expire_in_small_steps_removes_exactly_the_expired_leases_and_resumes) {
  lock_table t;
  for (int i = 0; i < 1000; ++i)
    t.acquire("k" + std::to_string(i), "o", i % 2 == 0 ? 100ms : 10s, t0);
  std::size_t removed = 0;
  int steps = 0;
  for (bool done = false; !done && steps < 100000; ++steps) {
    auto gone = t.expire_some(t0 + 1s, 7);
    BOOST_TEST(gone.size() <= 7u);
    for (const auto& g : gone)
      BOOST_TEST(std::stoi(g.key.substr(1)) % 2 == 0);
    removed += gone.size();
    done = gone.size() < 7;
  }
  BOOST_TEST(removed == 500u);
  BOOST_TEST(t.size() == 500u);
  BOOST_TEST(steps == 72);  // 500 in steps of 7: 71 full ones, then a short one ends the pass
  for (int i = 1; i < 1000; i += 2)
    BOOST_TEST(t.get("k" + std::to_string(i), t0 + 1s).has_value());
}

BOOST_AUTO_TEST_CASE(the_sweep_takes_a_lease_once_its_expiry_second_has_passed_never_before) {
  lock_table t;
  t.acquire("k", "o", 1500ms, t0);  // expires at t0 + 1.5 s
  BOOST_TEST(t.expire_some(t0 + 1499ms, 10).empty());
  // Expired from t0 + 1.5 s on (every access sees it as free), swept once its second has ended.
  BOOST_TEST(!t.get("k", t0 + 1500ms).has_value());
  BOOST_TEST(t.expire_some(t0 + 1999ms, 10).empty());
  BOOST_TEST(t.contains("k"));
  auto gone = t.expire_some(t0 + 2s, 10);
  BOOST_REQUIRE(gone.size() == 1u);
  BOOST_TEST(gone[0].key == "k");
  BOOST_TEST(!t.contains("k"));
  // expire() is exact to the instant, within the current second too.
  t.acquire("e", "o", 1500ms, t0);
  BOOST_TEST(t.expire(t0 + 1499ms).empty());
  BOOST_TEST(t.expire(t0 + 1500ms).size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_renewed_lease_is_swept_at_its_new_expiry) {
  lock_table t;
  auto a = as<acquire_granted>(t.acquire("k", "o", 1000ms, t0));
  t.acquire("other", "o", 1000ms, t0);
  as<renew_ok>(t.renew("k", "o", a.token, 5000ms, t0 + 500ms));  // now until t0 + 5.5 s
  auto gone = t.expire_some(t0 + 2s, 10);
  BOOST_REQUIRE(gone.size() == 1u);
  BOOST_TEST(gone[0].key == "other");
  BOOST_TEST(t.expire_some(t0 + 5s, 10).empty());
  BOOST_TEST(t.expire(t0 + 5499ms).empty());
  BOOST_TEST(t.expire_some(t0 + 6s, 10).size() == 1u);
  BOOST_TEST(t.size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_regrant_and_a_restore_refile_the_lease) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  // Expired, then granted to another owner for 10 s: not swept at its old second.
  as<acquire_granted>(t.acquire("k", "b", 10s, t0 + 2s));
  BOOST_TEST(t.expire_some(t0 + 3s, 10).empty());
  // A restore of a newer token replaces it, for its TTL from the restore.
  t.restore("k", "c", 100, 1000ms, t0 + 3s);
  BOOST_TEST(t.expire_some(t0 + 5s, 10).size() == 1u);
  // raise_restore_ttl extends a restored lease.
  t.restore("r", "c", 101, 1000ms, t0 + 10s);
  t.raise_restore_ttl("r", 101, 5000ms, t0 + 10s);
  BOOST_TEST(t.expire_some(t0 + 12s, 10).empty());
  BOOST_TEST(t.expire_some(t0 + 15s, 10).size() == 1u);
  BOOST_TEST(t.size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_released_or_forgotten_lease_leaves_the_sweep_nothing) {
  lock_table t;
  auto a = as<acquire_granted>(t.acquire("a", "o", 1000ms, t0));
  t.acquire("b", "o", 1000ms, t0);
  t.acquire("c", "o", 1000ms, t0);
  BOOST_TEST((t.release("a", "o", a.token, t0).outcome == release_outcome::released));
  t.forget("b", 2);
  BOOST_TEST(t.expire_key("c", t0 + 1000ms).has_value());
  BOOST_TEST(t.expire_some(t0 + 1h, 10).empty());
  BOOST_TEST(t.size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_hundred_thousand_leases_due_together_go_in_bounded_steps) {
  lock_table t;
  constexpr int n = 100'000;  // a tenth of the benchmark's million, same shape: one second for all
  for (int i = 0; i < n; ++i)
    t.restore("k" + std::to_string(i), "o", static_cast<std::uint64_t>(i + 1), 1000ms, t0);
  BOOST_TEST(t.expire_some(t0 + 999ms, 256).empty());
  std::size_t removed = 0, steps = 0;
  for (std::size_t got = 256; got == 256; ++steps) {
    got = t.expire_some(t0 + 1s, 256).size();
    removed += got;
  }
  BOOST_TEST(removed == std::size_t{n});
  BOOST_TEST(steps == std::size_t{n / 256 + 1});
  BOOST_TEST(t.size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_lease_record_keeps_its_client_and_value_apart_and_drops_them_when_empty) {
  lease_record r;
  BOOST_TEST(r.client().empty());
  BOOST_TEST(r.value().empty());
  r.set_value("v");
  r.set_client("alpha");
  BOOST_TEST(r.client() == "alpha");
  BOOST_TEST(r.value() == "v");
  r.set_value("");
  BOOST_TEST(r.client() == "alpha");
  BOOST_TEST(r.value().empty());
  r.set_client("");
  r.set_value("w");
  BOOST_TEST(r.client().empty());
  BOOST_TEST(r.value() == "w");
}

BOOST_AUTO_TEST_CASE(a_lease_is_bound_to_its_client_as_well_as_its_owner_string) {
  lock_table t;
  auto a = as<acquire_granted>(t.acquire("k", "host:1", 1000ms, t0, "alpha"));
  BOOST_TEST(t.get("k", t0)->client == "alpha");
  // Another client sending the same owner string is another holder: refused everywhere, nothing changes.
  auto held = as<acquire_refused>(t.acquire("k", "host:1", 1000ms, t0, "beta"));
  BOOST_TEST(held.holder.client == "alpha");
  BOOST_TEST(held.holder.token == a.token);
  BOOST_TEST(as<renew_refused>(t.renew("k", "host:1", a.token, 1000ms, t0, "beta")).reason ==
             lost_reason::owner_mismatch);
  BOOST_TEST((t.release("k", "host:1", a.token, t0, "beta").outcome == release_outcome::not_owner));
  // ... and so is a request without a client (a server that dropped authentication).
  BOOST_TEST(as<renew_refused>(t.renew("k", "host:1", a.token, 1000ms, t0)).reason ==
             lost_reason::owner_mismatch);
  BOOST_TEST(t.get("k", t0)->token == a.token);
  // The holder itself: a same-owner re-acquire supersedes, renew and release work.
  auto again = as<acquire_granted>(t.acquire("k", "host:1", 1000ms, t0, "alpha"));
  BOOST_TEST(again.replaced_token == a.token);
  BOOST_TEST(std::holds_alternative<renew_ok>(t.renew("k", "host:1", again.token, 1000ms, t0, "alpha")));
  BOOST_TEST((t.release("k", "host:1", again.token, t0, "alpha").outcome == release_outcome::released));
}

BOOST_AUTO_TEST_CASE(an_expired_lease_of_one_client_is_free_for_another) {
  lock_table t;
  auto a = as<acquire_granted>(t.acquire("k", "o", 1000ms, t0, "alpha"));
  const auto later = t0 + 1000ms;
  BOOST_TEST(as<renew_refused>(t.renew("k", "o", a.token, 1000ms, later, "beta")).reason ==
             lost_reason::not_held);
  BOOST_TEST(as<renew_refused>(t.renew("k", "o", a.token, 1000ms, later, "alpha")).reason ==
             lost_reason::not_held);
  auto b = as<acquire_granted>(t.acquire("k", "o", 1000ms, later, "beta"));
  BOOST_TEST(b.replaced_token == a.token);
  BOOST_TEST(t.get("k", later)->client == "beta");
  BOOST_TEST(t.snapshot().front().client == "beta");
}

BOOST_AUTO_TEST_CASE(the_value_is_shown_with_its_holder_replaced_by_a_reacquire_and_kept_by_renew) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0, {}, "10.0.0.1:80");
  BOOST_TEST(t.get("k", t0)->value == "10.0.0.1:80");
  BOOST_TEST(as<acquire_refused>(t.acquire("k", "b", 1000ms, t0, {}, "10.0.0.2:80")).holder.value ==
             "10.0.0.1:80");
  BOOST_TEST(std::holds_alternative<renew_ok>(t.renew("k", "a", 1, 5000ms, t0 + 10ms)));
  BOOST_TEST(t.get("k", t0 + 10ms)->value == "10.0.0.1:80");
  auto g = as<acquire_granted>(t.acquire("k", "a", 1000ms, t0 + 20ms, {}, "10.0.0.1:81"));
  BOOST_TEST(t.get("k", t0 + 20ms)->value == "10.0.0.1:81");
  as<acquire_granted>(t.acquire("k", "a", 1000ms, t0 + 30ms));  // a re-acquire without a value clears it
  BOOST_TEST(t.get("k", t0 + 30ms)->value.empty());
  // A new holder after expiry (of the 5 s the renew granted: re-acquires do not shorten it) starts with
  // its own value, not the old one's.
  BOOST_TEST(std::holds_alternative<acquire_refused>(t.acquire("k", "b", 1000ms, t0 + 5009ms, {}, "b's")));
  t.acquire("k", "b", 1000ms, t0 + 5010ms, {}, "b's");
  BOOST_TEST(t.get("k", t0 + 5010ms)->value == "b's");
  BOOST_TEST(g.replaced_token == 1u);
  auto snap = t.snapshot();
  BOOST_REQUIRE(snap.size() == 1u);
  BOOST_TEST(snap[0].value == "b's");
}

BOOST_AUTO_TEST_CASE(proclaim_replaces_the_value_and_keeps_token_expiry_and_restore_ttl) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0, {}, "10.0.0.1:80");
  BOOST_TEST(as<renew_ok>(t.renew("k", "a", 1, 5000ms, t0)).restore_ttl_grew);
  const auto before = t.get("k", t0 + 100ms);
  BOOST_TEST(as<proclaim_ok>(t.proclaim("k", "a", 1, "10.0.0.2:80", t0 + 100ms)).restore_ttl == 5000ms);
  const auto after = t.get("k", t0 + 100ms);
  BOOST_REQUIRE(after.has_value());
  BOOST_TEST(after->value == "10.0.0.2:80");
  BOOST_TEST(after->token == 1u);
  BOOST_TEST((after->expires == before->expires));  // not a renew: the lease ends when it did
  BOOST_TEST(as<proclaim_ok>(t.proclaim("k", "a", 1, "", t0 + 200ms)).restore_ttl == 5000ms);
  BOOST_TEST(t.get("k", t0 + 200ms)->value.empty());
  BOOST_TEST(!t.get("k", t0 + 5000ms).has_value());
  BOOST_TEST(t.last_token() == 1u);  // no token taken
  BOOST_TEST(t.snapshot().front().value.empty());
}

BOOST_AUTO_TEST_CASE(proclaim_is_refused_for_the_reasons_of_renew_in_its_order_and_changes_nothing) {
  lock_table t;
  BOOST_TEST(as<renew_refused>(t.proclaim("k", "a", 1, "v", t0)).reason == lost_reason::not_held);
  t.acquire("k", "a", 1000ms, t0, "client-1", "old");
  BOOST_TEST(as<renew_refused>(t.proclaim("k", "b", 1, "v", t0, "client-1")).reason ==
             lost_reason::owner_mismatch);
  // The same owner string sent by another client is another owner, whatever the token.
  BOOST_TEST(as<renew_refused>(t.proclaim("k", "a", 9, "v", t0, "client-2")).reason ==
             lost_reason::owner_mismatch);
  BOOST_TEST(as<renew_refused>(t.proclaim("k", "a", 9, "v", t0, "client-1")).reason ==
             lost_reason::token_mismatch);
  // A superseded token: the same owner acquired again (token 2), so token 1 may not speak for the lease.
  t.acquire("k", "a", 1000ms, t0, "client-1", "old");
  BOOST_TEST(as<renew_refused>(t.proclaim("k", "a", 1, "v", t0, "client-1")).reason ==
             lost_reason::token_mismatch);
  BOOST_TEST(t.get("k", t0)->value == "old");
  // Past its expiry the lease is like an absent one, the holder's own token included.
  BOOST_TEST(as<renew_refused>(t.proclaim("k", "a", 2, "v", t0 + 1000ms, "client-1")).reason ==
             lost_reason::not_held);
  BOOST_TEST(!t.get("k", t0 + 1000ms).has_value());
}

BOOST_AUTO_TEST_CASE(a_record_is_written_by_the_live_holder_and_outlives_its_lease) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0, "c", "addr");
  const auto before = t.get("k", t0 + 100ms);
  const auto w = as<record_written>(t.write_record("k", "a", 1, "{\"slot\":1}", t0 + 100ms, "c"));
  BOOST_TEST(w.token == 1u);
  BOOST_TEST(w.version == 1u);
  // Not a renew and not a proclaim: the lease is as it was.
  const auto after = t.get("k", t0 + 100ms);
  BOOST_TEST((after->expires == before->expires));
  BOOST_TEST(after->value == "addr");
  BOOST_TEST(t.last_token() == 1u);
  BOOST_TEST(as<record_written>(t.write_record("k", "a", 1, "{\"slot\":2}", t0 + 200ms, "c")).version == 2u);
  // The lease ends; the record stays, for any reader and the next holder.
  BOOST_TEST(!t.get("k", t0 + 1000ms).has_value());
  t.expire(t0 + 1000ms);
  const auto* r = t.find_record("k");
  BOOST_REQUIRE(r != nullptr);
  BOOST_TEST(r->value == "{\"slot\":2}");
  BOOST_TEST(r->owner == "a");
  BOOST_TEST(r->client == "c");
  BOOST_TEST(r->token == 1u);
  BOOST_TEST(r->version == 2u);
  t.acquire("k", "b", 1000ms, t0 + 2000ms);
  BOOST_TEST(as<record_written>(t.write_record("k", "b", 2, "", t0 + 2000ms)).version == 3u);
  BOOST_TEST(t.find_record("k")->value.empty());
  BOOST_TEST(t.record_count() == 1u);
  BOOST_TEST(t.find_record("other") == nullptr);
}

BOOST_AUTO_TEST_CASE(a_record_write_is_refused_as_a_renew_would_be_and_changes_nothing) {
  lock_table t;
  BOOST_TEST(as<renew_refused>(t.write_record("k", "a", 1, "v", t0)).reason == lost_reason::not_held);
  BOOST_TEST(t.record_count() == 0u);
  t.acquire("k", "a", 1000ms, t0, "client-1");
  BOOST_TEST(as<record_written>(t.write_record("k", "a", 1, "kept", t0, "client-1")).version == 1u);
  BOOST_TEST(as<renew_refused>(t.write_record("k", "b", 1, "v", t0, "client-1")).reason ==
             lost_reason::owner_mismatch);
  BOOST_TEST(as<renew_refused>(t.write_record("k", "a", 1, "v", t0, "client-2")).reason ==
             lost_reason::owner_mismatch);
  BOOST_TEST(as<renew_refused>(t.write_record("k", "a", 9, "v", t0, "client-1")).reason ==
             lost_reason::token_mismatch);
  // A deposed holder (its lease expired, nobody took the key yet) is refused before anyone else writes.
  BOOST_TEST(as<renew_refused>(t.write_record("k", "a", 1, "late", t0 + 1000ms, "client-1")).reason ==
             lost_reason::not_held);
  const auto* r = t.find_record("k");
  BOOST_TEST(r->value == "kept");
  BOOST_TEST(r->version == 1u);
}

BOOST_AUTO_TEST_CASE(a_record_never_goes_back_to_a_smaller_token) {
  lock_table t;
  // A record restored from the log with a token above any lease this table now has (the table's counter
  // is raised past it, so a live holder cannot normally meet this; the check holds anyway).
  t.restore_record("k", lock_record{"new", "b", "", 7, 4});
  t.restore("k", "a", 3, 1000ms, t0);  // a lease restored with a smaller token
  const auto s = as<record_stale>(t.write_record("k", "a", 3, "old", t0));
  BOOST_TEST(s.record_token == 7u);
  BOOST_TEST(t.find_record("k")->value == "new");
  BOOST_TEST(t.find_record("k")->version == 4u);
  // Replaying an older write over a newer one keeps the newer (snapshot, then the log after it).
  t.restore_record("k", lock_record{"older", "b", "", 7, 3});
  BOOST_TEST(t.find_record("k")->value == "new");
  BOOST_TEST(t.last_token() == 7u);
}

BOOST_AUTO_TEST_CASE(the_record_limit_refuses_new_keys_only) {
  lock_table t;
  t.set_record_limit(1);
  t.acquire("a", "o", 1000ms, t0);
  t.acquire("b", "o", 1000ms, t0);
  BOOST_TEST(as<record_written>(t.write_record("a", "o", 1, "1", t0)).version == 1u);
  BOOST_TEST(as<record_limit_reached>(t.write_record("b", "o", 2, "1", t0)).limit == 1u);
  BOOST_TEST(t.find_record("b") == nullptr);
  BOOST_TEST(as<record_written>(t.write_record("a", "o", 1, "2", t0)).version == 2u);  // a replacement
  BOOST_TEST(t.records_snapshot().size() == 1u);
}

// Listing and breaking (docs/protocol.md, "list" and "break").

BOOST_AUTO_TEST_CASE(list_shows_unexpired_leases_under_a_prefix_in_key_order) {
  lock_table t;
  t.acquire("jobs/c", "c", 1000ms, t0, "alice", "vc");
  t.acquire("jobs/a", "a", 1000ms, t0);
  t.acquire("other", "o", 1000ms, t0);
  t.acquire("jobs/b", "b", 100ms, t0);  // expired at the listing
  auto page = t.list("jobs/", "", 10, t0 + 500ms);
  BOOST_TEST(!page.more);
  BOOST_REQUIRE(page.leases.size() == 2u);
  BOOST_TEST(page.leases[0].key == "jobs/a");
  BOOST_TEST(page.leases[1].key == "jobs/c");
  BOOST_TEST(page.leases[1].lease.owner == "c");
  BOOST_TEST(page.leases[1].lease.client == "alice");
  BOOST_TEST(page.leases[1].lease.token == 1u);
  BOOST_TEST(page.leases[1].lease.value == "vc");
  BOOST_TEST(page.leases[1].lease.remaining.count() == 500);
  BOOST_TEST(t.list("", "", 10, t0).leases.size() == 4u);
  BOOST_TEST(t.list("nothing", "", 10, t0).leases.empty());
}

BOOST_AUTO_TEST_CASE(list_pages_follow_the_cursor_without_gaps_or_repeats) {
  lock_table t;
  for (int i = 0; i < 25; ++i) {
    char key[16];
    std::snprintf(key, sizeof key, "k/%02d", i);
    t.acquire(key, "o", 1000ms, t0);
  }
  std::vector<std::string> seen;
  std::string after;
  int pages = 0;
  for (;;) {
    auto page = t.list("k/", after, 10, t0);
    ++pages;
    for (auto& l : page.leases)
      seen.push_back(l.key);
    if (!page.more) break;
    BOOST_TEST(page.leases.size() == 10u);
    after = page.leases.back().key;
  }
  BOOST_TEST(pages == 3);
  BOOST_REQUIRE(seen.size() == 25u);
  BOOST_TEST(std::is_sorted(seen.begin(), seen.end()));
  BOOST_TEST((std::adjacent_find(seen.begin(), seen.end()) == seen.end()));
  // A full last page says nothing more follows; a zero limit is taken as one.
  BOOST_TEST(!t.list("k/", "k/14", 10, t0).more);
  BOOST_TEST(t.list("k/", "", 0, t0).leases.size() == 1u);
}

BOOST_AUTO_TEST_CASE(break_then_acquire_gets_a_larger_token) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0, "alice", "v");
  auto b = as<lease_broken>(t.break_lease("k", std::nullopt, t0 + 10ms));
  BOOST_TEST(b.lease.owner == "a");
  BOOST_TEST(b.lease.client == "alice");
  BOOST_TEST(b.lease.token == 1u);
  BOOST_TEST(!t.contains("k"));
  BOOST_TEST(t.size_of("alice") == 0u);
  auto g = as<acquire_granted>(t.acquire("k", "b", 1000ms, t0 + 20ms));
  BOOST_TEST(g.token > 1u);
}

// A broken lease leaves the expiry index with the table: the sweep later finds only the leases still held
// (a broken lease left in the index would be a dangling link, which the sanitizer build reports).
BOOST_AUTO_TEST_CASE(a_broken_lease_leaves_the_sweep_too) {
  lock_table t;
  t.acquire("a", "o", 1000ms, t0);
  t.acquire("b", "o", 1000ms, t0);
  t.acquire("c", "o", 1000ms, t0);
  as<lease_broken>(t.break_lease("b", std::nullopt, t0 + 10ms));
  t.acquire("b", "p", 5000ms, t0 + 20ms);  // the next holder, expiring later
  auto gone = t.expire_some(t0 + 3s, 100);
  std::vector<std::string> keys;
  for (const auto& e : gone)
    keys.push_back(e.key);
  std::sort(keys.begin(), keys.end());
  BOOST_TEST(keys == (std::vector<std::string>{"a", "c"}), boost::test_tools::per_element());
  BOOST_TEST(t.contains("b"));
  BOOST_TEST(t.expire_some(t0 + 7s, 100).size() == 1u);
  BOOST_TEST(!t.contains("b"));
}

BOOST_AUTO_TEST_CASE(break_of_a_free_or_expired_key_is_not_held) {
  lock_table t;
  BOOST_TEST(std::holds_alternative<break_not_held>(t.break_lease("k", std::nullopt, t0)));
  t.acquire("k", "a", 100ms, t0);
  BOOST_TEST(std::holds_alternative<break_not_held>(t.break_lease("k", 1u, t0 + 100ms)));
  // The expired lease is left for the sweep to remove and log.
  BOOST_TEST(t.contains("k"));
}

BOOST_AUTO_TEST_CASE(break_with_a_stale_token_is_refused_and_changes_nothing) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  t.acquire("k", "a", 1000ms, t0);  // token 2 supersedes 1
  auto m = as<break_token_mismatch>(t.break_lease("k", 1u, t0));
  BOOST_TEST(m.holder.token == 2u);
  BOOST_TEST(std::holds_alternative<renew_ok>(t.renew("k", "a", 2, 1000ms, t0)));
  BOOST_TEST(std::holds_alternative<lease_broken>(t.break_lease("k", 2u, t0)));
}

BOOST_AUTO_TEST_CASE(broken_holder_is_refused_with_reason_broken) {
  lock_table t;
  t.acquire("k", "a", 1000ms, t0);
  t.break_lease("k", std::nullopt, t0);
  BOOST_TEST(as<renew_refused>(t.renew("k", "a", 1, 1000ms, t0)).reason == lost_reason::broken);
  BOOST_TEST(as<renew_refused>(t.proclaim("k", "a", 1, "x", t0)).reason == lost_reason::broken);
  // Once another owner holds the key, the broken holder still hears why it lost it; others do not.
  t.acquire("k", "b", 1000ms, t0);
  BOOST_TEST(as<renew_refused>(t.renew("k", "a", 1, 1000ms, t0)).reason == lost_reason::broken);
  BOOST_TEST(as<renew_refused>(t.renew("k", "c", 7, 1000ms, t0)).reason == lost_reason::owner_mismatch);
  BOOST_TEST((t.release("k", "a", 1, t0).outcome == release_outcome::not_owner));
}

BOOST_AUTO_TEST_CASE(broken_tokens_are_remembered_within_a_bound) {
  lock_table t;
  const auto n = lock_table::broken_memory + 1;
  for (std::size_t i = 0; i < n; ++i) {
    const auto key = "k" + std::to_string(i);
    t.acquire(key, "a", 1000ms, t0);
    t.break_lease(key, std::nullopt, t0);
  }
  // The oldest broken token is forgotten: an absent lease again.
  BOOST_TEST(as<renew_refused>(t.renew("k0", "a", 1, 1000ms, t0)).reason == lost_reason::not_held);
  BOOST_TEST(as<renew_refused>(t.renew("k1", "a", 2, 1000ms, t0)).reason == lost_reason::broken);
}

// ---- lock-delay (docs/protocol.md, "Lock-delay") ----

namespace {
// By value: `r` is usually a temporary, gone at the end of the caller's statement.
acquire_refused refused_for_delay(const acquire_result& r) {
  auto refused = as<acquire_refused>(r);
  BOOST_TEST(refused.lock_delay_remaining.count() > 0);
  BOOST_TEST(refused.holder.owner.empty());
  return refused;
}
}  // namespace

BOOST_AUTO_TEST_CASE(an_expired_lease_keeps_its_key_unavailable_for_its_lock_delay_from_its_expiry) {
  lock_table t;
  BOOST_TEST(as<acquire_granted>(t.acquire("k", "a", 1000ms, t0, {}, {}, 500ms)).lock_delay.count() == 500);
  BOOST_TEST(t.get("k", t0)->lock_delay.count() == 500);
  // Not swept yet: refused from the expiry on, with the delay's remaining time where a holder's TTL goes.
  const auto early = refused_for_delay(t.acquire("k", "b", 1000ms, t0 + 1100ms));
  BOOST_TEST(early.lock_delay_remaining.count() == 400);
  BOOST_TEST(early.holder.remaining.count() == 400);
  BOOST_TEST(early.holder.token == 1u);
  BOOST_TEST(!t.get("k", t0 + 1100ms).has_value());  // not held: the delay is not a lease
  BOOST_TEST((t.delayed("k", t0 + 1100ms)->until == t0 + 1500ms));
  // Swept late: the delay still ends 500 ms after the expiry, not after the sweep.
  BOOST_TEST(t.expire(t0 + 1200ms).size() == 1u);
  BOOST_TEST(t.size() == 0u);
  BOOST_TEST(refused_for_delay(t.acquire("k", "b", 1000ms, t0 + 1499ms)).lock_delay_remaining.count() == 1);
  // The former holder's owner is refused too.
  refused_for_delay(t.acquire("k", "a", 1000ms, t0 + 1300ms));
  BOOST_TEST(t.last_token() == 1u);  // refusals take no token
  const auto g = as<acquire_granted>(t.acquire("k", "b", 1000ms, t0 + 1500ms));
  BOOST_TEST(g.token == 2u);
  BOOST_TEST(g.lock_delay.count() == 0);
  BOOST_TEST(t.delay_count() == 0u);
}

BOOST_AUTO_TEST_CASE(a_release_frees_the_key_at_once_whatever_its_lock_delay) {
  lock_table t;
  as<acquire_granted>(t.acquire("k", "a", 1000ms, t0, {}, {}, 60'000ms));
  BOOST_TEST((t.release("k", "a", 1, t0 + 10ms).outcome == release_outcome::released));
  BOOST_TEST(!t.delayed("k", t0 + 10ms).has_value());
  BOOST_TEST(as<acquire_granted>(t.acquire("k", "b", 1000ms, t0 + 10ms)).token == 2u);
  // A release that finds the lease expired does not end the delay its expiry began.
  as<acquire_granted>(t.acquire("e", "a", 1000ms, t0, {}, {}, 500ms));
  BOOST_TEST((t.release("e", "a", 3, t0 + 1100ms).outcome == release_outcome::already_free));
  BOOST_TEST(refused_for_delay(t.acquire("e", "b", 1000ms, t0 + 1100ms)).lock_delay_remaining.count() == 400);
}

BOOST_AUTO_TEST_CASE(a_break_starts_the_lock_delay_from_the_break_and_the_token_still_grows) {
  lock_table t;
  as<acquire_granted>(t.acquire("k", "a", 60'000ms, t0, {}, {}, 500ms));
  const auto broken = as<lease_broken>(t.break_lease("k", std::nullopt, t0 + 100ms));
  BOOST_TEST(broken.lease.lock_delay.count() == 500);
  BOOST_TEST(refused_for_delay(t.acquire("k", "b", 1000ms, t0 + 599ms)).lock_delay_remaining.count() == 1);
  BOOST_TEST(std::holds_alternative<break_not_held>(t.break_lease("k", std::nullopt, t0 + 200ms)));
  BOOST_TEST(as<acquire_granted>(t.acquire("k", "b", 1000ms, t0 + 600ms)).token == 2u);
  // A lease without the option leaves nothing behind.
  as<acquire_granted>(t.acquire("plain", "a", 60'000ms, t0));
  as<lease_broken>(t.break_lease("plain", std::nullopt, t0));
  BOOST_TEST(as<acquire_granted>(t.acquire("plain", "b", 1000ms, t0)).token == 4u);
  BOOST_TEST(t.delay_count() == 0u);
}

BOOST_AUTO_TEST_CASE(a_same_owner_reacquire_keeps_the_longer_lock_delay_of_its_live_lease) {
  lock_table t;
  as<acquire_granted>(t.acquire("k", "a", 1000ms, t0, {}, {}, 800ms));
  // A late copy of an earlier acquire without the option does not shorten the promise to the next holder.
  BOOST_TEST(as<acquire_granted>(t.acquire("k", "a", 1000ms, t0 + 10ms)).lock_delay.count() == 800);
  BOOST_TEST(as<acquire_granted>(t.acquire("k", "a", 1000ms, t0 + 20ms, {}, {}, 900ms)).lock_delay.count() ==
             900);
  // After a release the next grant has only what it asks for.
  BOOST_TEST((t.release("k", "a", 3, t0 + 30ms).outcome == release_outcome::released));
  BOOST_TEST(as<acquire_granted>(t.acquire("k", "a", 1000ms, t0 + 30ms)).lock_delay.count() == 0);
  BOOST_TEST(t.expire(t0 + 2000ms).size() == 1u);
  BOOST_TEST(as<acquire_granted>(t.acquire("k", "b", 1000ms, t0 + 2000ms)).token == 5u);
}

BOOST_AUTO_TEST_CASE(the_sweep_ends_lock_delays_once_they_are_over) {
  lock_table t;
  as<acquire_granted>(t.acquire("a", "o", 1000ms, t0, {}, {}, 500ms));
  as<acquire_granted>(t.acquire("b", "o", 1000ms, t0, {}, {}, 2000ms));
  BOOST_TEST(t.expire_key("a", t0 + 1000ms).has_value());
  BOOST_TEST(t.expire_some(t0 + 2000ms, 10).size() == 1u);  // b: expiry second over
  BOOST_TEST(t.delay_count() == 2u);
  BOOST_TEST(t.end_delays(t0 + 1499ms, 10).empty());
  const auto ended = t.end_delays(t0 + 1500ms, 10);
  BOOST_REQUIRE(ended.size() == 1u);
  BOOST_TEST(ended[0].key == "a");
  BOOST_TEST(ended[0].token == 1u);
  BOOST_TEST(t.delay_count() == 1u);
  // b's delay runs from its expiry (t0 + 1 s), not from the sweep.
  BOOST_TEST(t.end_delays(t0 + 3000ms, 10).size() == 1u);
  BOOST_TEST(t.delay_count() == 0u);
  // A key granted after its delay leaves a stale end behind, which ends nothing.
  as<acquire_granted>(t.acquire("c", "o", 1000ms, t0, {}, {}, 500ms));
  t.expire_key("c", t0 + 1000ms);
  as<acquire_granted>(t.acquire("c", "p", 60'000ms, t0 + 1500ms, {}, {}, 500ms));
  BOOST_TEST(t.end_delays(t0 + 1500ms, 10).empty());
  BOOST_TEST(t.get("c", t0 + 1500ms)->owner == "p");
}

BOOST_AUTO_TEST_CASE(the_listing_shows_keys_in_lock_delay_in_key_order) {
  lock_table t;
  as<acquire_granted>(t.acquire("a-held", "o", 60'000ms, t0));
  as<acquire_granted>(t.acquire("b-unswept", "o", 1000ms, t0, {}, {}, 5000ms));
  as<acquire_granted>(t.acquire("c-swept", "o", 1000ms, t0, {}, {}, 5000ms));
  as<acquire_granted>(t.acquire("d-free", "o", 1000ms, t0));
  t.expire_key("c-swept", t0 + 2000ms);
  const auto page = t.list("", "", 10, t0 + 2000ms);
  BOOST_REQUIRE(page.leases.size() == 3u);
  BOOST_TEST(page.leases[0].key == "a-held");
  BOOST_TEST(page.leases[0].lock_delay_remaining.count() == 0);
  BOOST_TEST(page.leases[1].key == "b-unswept");
  BOOST_TEST(page.leases[1].lock_delay_remaining.count() == 4000);
  BOOST_TEST(page.leases[1].lease.token == 2u);
  BOOST_TEST(page.leases[2].key == "c-swept");
  BOOST_TEST(page.leases[2].lock_delay_remaining.count() == 4000);
  BOOST_TEST(page.leases[2].lease.owner.empty());
  const auto after = t.list("", "b-unswept", 1, t0 + 2000ms);
  BOOST_REQUIRE(after.leases.size() == 1u);
  BOOST_TEST(after.leases[0].key == "c-swept");
  BOOST_TEST(!after.more);
  BOOST_TEST(t.list("", "", 10, t0 + 6000ms).leases.size() == 1u);  // the delays are over
}

// Recovery: what the log says about a lock-delay comes back, and never shorter than promised.
BOOST_AUTO_TEST_CASE(replay_begins_a_logged_lock_delay_again_in_full_from_recovery) {
  const time_point boot = t0 + 100s;
  lock_table t;
  // A lease and its lock_delay record, then its expiry: the delay runs in full from recovery.
  t.restore("k", "a", 5, 1000ms, boot);
  t.restore_lock_delay("k", 5, 500ms, boot);
  BOOST_TEST(t.get("k", boot)->lock_delay.count() == 500);
  t.forget("k", 5, /*expired=*/true, boot);
  BOOST_TEST((t.delayed("k", boot)->until == boot + 500ms));
  // A release frees at once.
  t.restore("r", "a", 6, 1000ms, boot);
  t.restore_lock_delay("r", 6, 500ms, boot);
  t.forget("r", 6, /*expired=*/false, boot);
  BOOST_TEST(!t.delayed("r", boot).has_value());
  // A break: released, then the delay record for a lease no longer held.
  t.restore("b", "a", 7, 1000ms, boot);
  t.restore_lock_delay("b", 7, 500ms, boot);
  t.forget("b", 7);
  t.restore_lock_delay("b", 7, 500ms, boot);
  BOOST_TEST(t.delayed("b", boot)->token == 7u);
  // The end of a delay, and a later grant, each clear it.
  t.restore_lock_delay("b", 7, 0ms, boot);
  BOOST_TEST(!t.delayed("b", boot).has_value());
  t.restore("k", "c", 8, 1000ms, boot);
  BOOST_TEST(!t.delayed("k", boot).has_value());
  BOOST_TEST(t.get("k", boot)->lock_delay.count() == 0);  // a new lease's delay comes in its own record
  // An older delay record never ends a later lease.
  t.restore_lock_delay("k", 5, 500ms, boot);
  BOOST_TEST(t.get("k", boot)->owner == "c");
  BOOST_TEST(t.last_token() == 8u);
  // A proclaim's record (same token) keeps the lease's delay.
  t.restore("p", "a", 9, 1000ms, boot);
  t.restore_lock_delay("p", 9, 700ms, boot);
  t.restore("p", "a", 9, 1000ms, boot, {}, "new value");
  BOOST_TEST(t.get("p", boot)->lock_delay.count() == 700);
}
