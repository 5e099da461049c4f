// SPDX-License-Identifier: Apache-2.0
// The planted defects (server/src/planted_defects.hpp) in the simulation's build of batond's code: a switch
// turned on changes what the code does, and with the switches off the same code does what batond does. Each
// pair of cases differs in the switch alone, so a switch that no longer reached the code would fail here
// and not only as a defect baton-sim stopped finding. (The journal's two switches need a damaged log; the
// sim_finds_* tests show them.)
#define BOOST_TEST_MODULE planted_defects
#include <boost/test/unit_test.hpp>

#include "planted_defects.hpp"
#include "sim_batond.hpp"

#include <vector>

using namespace baton;
using namespace std::chrono_literals;
using sim::batond;
using sim::fixed_now;

namespace {

// A batond over a fresh simulated disk, with the switches as a case sets them and all off again after it.
struct fixture {
  sim::rng r{1};
  sim::sim_storage fs{r, "data"};
  batond b{fs};
  ~fixture() { server::planted = {}; }
};

// A batch that raises a lease's TTL: answered before its extend record is durable or only after.
bool batch_raise_answered_before_flush(batond& b) {
  const auto token = b.acquired("k", "a");
  const std::vector<server::renew_batch_entry> entries{{"k", "a", token, 120'000ms}};
  auto batch = b.start(b.service.renew_batch(entries));
  const bool early = batch->has_value();
  b.flush();
  BOOST_REQUIRE(batch->has_value());
  BOOST_TEST(std::holds_alternative<server::renew_ok>((**batch)[0]));
  return early;
}

// A release naming another owner and a made-up token: does the key come free?
bool foreign_release_frees_the_key(batond& b) {
  const auto token = b.acquired("k", "a");
  auto rel = b.start(b.service.release("k", "b", token + 7));
  b.flush();
  BOOST_REQUIRE(rel->has_value());
  return !b.service.table().get("k", fixed_now()).has_value();
}

// A renew with a shorter TTL after one with a longer TTL: the lease's remaining time after both.
server::milliseconds remaining_after_a_shorter_renew() {
  server::lock_table t;
  const auto granted = std::get<server::acquire_granted>(t.acquire("k", "a", 2'000ms, fixed_now()));
  BOOST_REQUIRE(
      std::holds_alternative<server::renew_ok>(t.renew("k", "a", granted.token, 4'000ms, fixed_now())));
  BOOST_REQUIRE(
      std::holds_alternative<server::renew_ok>(t.renew("k", "a", granted.token, 2'000ms, fixed_now())));
  return t.get("k", fixed_now())->remaining;
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(a_batch_raise_waits_for_its_extend_with_the_switches_off, fixture) {
  BOOST_TEST(!batch_raise_answered_before_flush(b));
}

BOOST_FIXTURE_TEST_CASE(renew_before_durable_answers_a_batch_raise_before_its_extend_is_durable, fixture) {
  server::planted.renew_before_durable = true;
  BOOST_TEST(batch_raise_answered_before_flush(b));
}

BOOST_FIXTURE_TEST_CASE(a_release_by_another_owner_frees_nothing_with_the_switches_off, fixture) {
  BOOST_TEST(!foreign_release_frees_the_key(b));
}

BOOST_FIXTURE_TEST_CASE(release_by_key_frees_the_key_whoever_asks, fixture) {
  server::planted.release_by_key = true;
  BOOST_TEST(foreign_release_frees_the_key(b));
}

BOOST_FIXTURE_TEST_CASE(a_shorter_renew_keeps_the_expiry_with_the_switches_off, fixture) {
  BOOST_TEST(remaining_after_a_shorter_renew() == 4'000ms);
}

BOOST_FIXTURE_TEST_CASE(shorten_lease_lets_a_shorter_renew_move_the_expiry_earlier, fixture) {
  server::planted.shorten_lease = true;
  BOOST_TEST(remaining_after_a_shorter_renew() == 2'000ms);
}
