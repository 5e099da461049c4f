// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE answers
#include <boost/test/unit_test.hpp>

#include "answers.hpp"

#include <boost/beast/http/write.hpp>

#include <memory_resource>
#include <sstream>
#include <string>

using namespace baton::server;

namespace {

std::pmr::memory_resource* const mem = std::pmr::new_delete_resource();

// What Beast's serializer writes for the whole answer, or for its header alone.
std::string beast_bytes(const response& res, bool header_only) {
  std::ostringstream os;
  if (header_only)
    os << res.base();
  else
    os << res;
  return os.str();
}

std::string wire_bytes(const response& res, bool header_only) {
  text out(mem);
  append_wire_bytes(res, header_only, out);
  return std::string(out);
}

void check_same_as_beast(const response& res) {
  BOOST_TEST(wire_bytes(res, false) == beast_bytes(res, false));
  BOOST_TEST(wire_bytes(res, true) == beast_bytes(res, true));
}

}  // namespace

BOOST_AUTO_TEST_CASE(answers_are_written_byte_for_byte_as_beast_writes_them) {
  const acquire_request r{"w1", milliseconds(10000)};
  for (unsigned version : {10u, 11u}) {
    for (bool keep_alive : {true, false}) {
      const answer_context c{version, keep_alive, mem};
      check_same_as_beast(make_response(mem, http::status::ok, version, keep_alive, R"({"status":"ok"})"));
      check_same_as_beast(acquire_answer(c, "jobs/nightly", r, acquire_granted{42, 0, milliseconds(10000)}));
      check_same_as_beast(acquire_answer(c, "jobs/nightly", r, acquire_refused{lease_view{"w2", "", 41}}));
      check_same_as_beast(error_answer(c, {400, "bad_request", "malformed \"quoted\" \u00e9"}));
      check_same_as_beast(error_answer(c, {404, "not_found", "no route"}));
    }
  }
}

BOOST_AUTO_TEST_CASE(extra_fields_a_set_reason_and_an_empty_body_are_written_as_beast_writes_them) {
  auto res = make_response(mem, http::status::service_unavailable, 11, false,
                           error_text(mem, "too_many_waiters", "retry later"));
  res.set(http::field::retry_after, "1");
  check_same_as_beast(res);
  auto allowed = make_response(mem, http::status::method_not_allowed, 11, true, "");
  allowed.set(http::field::allow, "POST");
  check_same_as_beast(allowed);
  auto custom = make_response(mem, http::status::ok, 11, true, "x", "text/plain; version=0.0.4");
  custom.reason("Fine");
  check_same_as_beast(custom);
  // A status Beast knows no reason for.
  auto odd = make_response(mem, static_cast<http::status>(599), 11, true, "{}");
  check_same_as_beast(odd);
}

BOOST_AUTO_TEST_CASE(the_answer_is_appended_after_what_the_buffer_holds) {
  auto res = make_response(mem, http::status::ok, 11, true, "{}");
  text out("prefix", mem);
  append_wire_bytes(res, false, out);
  BOOST_TEST(std::string(out) == "prefix" + beast_bytes(res, false));
}

// docs/protocol.md, "list" and "break": the bodies, member by member, escaped as any other answer's.
BOOST_AUTO_TEST_CASE(list_and_break_answers_have_the_documented_bodies) {
  const answer_context c{11, true, mem};
  list_page page;
  page.leases.push_back({"jobs/a", lease_view{"w1", "ci", 41, {}, milliseconds(812), "10.0.0.7"}, 2});
  page.leases.push_back({"jobs/\"b\"", lease_view{"w2", "", 44, {}, milliseconds(5), ""}, 0});
  page.more = true;
  auto listed = list_answer(c, page);
  check_same_as_beast(listed);
  BOOST_TEST(listed.body() ==
             R"({"locks":[{"key":"jobs/a","kind":"lock","owner":"w1","client":"ci","token":41,)"
             R"("ttl_remaining_ms":812,"value":"10.0.0.7","waiters":2},)"
             R"({"key":"jobs/\"b\"","kind":"lock","owner":"w2","token":44,"ttl_remaining_ms":5,"value":"",)"
             R"("waiters":0}],"next":"jobs/\"b\""})");
  BOOST_TEST(list_answer(c, list_page{}).body() == R"({"locks":[],"next":null})");

  const lease_view held{"w1", "ci", 41, {}, milliseconds(7710), "v"};
  auto broke = break_answer(c, "jobs/a", lease_broken{held});
  BOOST_TEST(broke.result_int() == 200u);
  BOOST_TEST(
      broke.body() ==
      R"({"key":"jobs/a","broken":true,"owner":"w1","client":"ci","token":41,"ttl_remaining_ms":7710})");
  auto other = break_answer(c, "jobs/a", break_token_mismatch{held});
  BOOST_TEST(other.result_int() == 409u);
  BOOST_TEST(
      other.body() ==
      R"({"error":"token_mismatch","message":"the lock is held with another token than the one named; )"
      R"(nothing changed","owner":"w1","client":"ci","token":41,"ttl_remaining_ms":7710,"value":"v"})");
  auto free = break_answer(c, "jobs/a", break_not_held{});
  BOOST_TEST(free.result_int() == 404u);
  BOOST_TEST(free.body() ==
             R"x({"error":"not_held","message":"the lock is not held (it is free, or its lease expired)"})x");
}

// A refusal for a lock-delay is `held` with no owner, ttl_remaining_ms the delay's remaining time (what an
// older client waits for) and lock_delay_remaining_ms; the listing shows such a key as kind lock_delay.
BOOST_AUTO_TEST_CASE(a_lock_delay_refusal_and_listing_entry_carry_the_remaining_delay) {
  const answer_context c{11, true, mem};
  const acquire_request r{"w1", milliseconds(10000)};
  lease_view ended{"", "", 41, {}, milliseconds(1500)};
  auto refused = acquire_answer(c, "jobs/a", r, acquire_refused{ended, milliseconds(1500)});
  BOOST_TEST(refused.result_int() == 409);
  BOOST_TEST(
      std::string(refused.body()) ==
      R"({"error":"held","message":"the lock is in lock-delay: its last lease ended by expiry or a break",)"
      R"("owner":"","token":41,"ttl_remaining_ms":1500,"value":"","lock_delay_remaining_ms":1500})");
  const acquire_request delayed{"w1", milliseconds(10000), "", milliseconds(5000)};
  auto granted = acquire_answer(c, "jobs/a", delayed, acquire_granted{42, 0, milliseconds(10000)});
  BOOST_TEST(std::string(granted.body()).find(R"("lock_delay_ms":5000})") != std::string::npos);
  list_page page;
  page.leases.push_back({"jobs/a", ended, 2, milliseconds(1500)});
  BOOST_TEST(std::string(list_answer(c, page).body()) ==
             R"({"locks":[{"key":"jobs/a","kind":"lock_delay","owner":"","token":41,"ttl_remaining_ms":1500,)"
             R"("value":"","lock_delay_remaining_ms":1500,"waiters":2}],"next":null})");
}

// A key of permits (docs/protocol.md, "semaphores"): the grant names permits and slot; `held` lists every
// holder after the top-level one; permits_mismatch names the count; GET, list and break carry the slot.
BOOST_AUTO_TEST_CASE(permit_answers_have_the_documented_bodies) {
  const answer_context c{11, true, mem};
  acquire_request r{"w4", milliseconds(10000)};
  r.permits = 3;
  acquire_granted g{45, 0, milliseconds(10000)};
  g.permits = 3;
  g.slot = 2;
  auto granted = acquire_answer(c, "pool", r, g, milliseconds(250));
  check_same_as_beast(granted);
  BOOST_TEST(std::string(granted.body()) ==
             R"({"key":"pool","owner":"w4","token":45,"ttl_ms":10000,"permits":3,"slot":2,"queued_ms":250})");

  lease_view full{"w1", "", 41, {}, milliseconds(900), ""};
  full.permits = 2;
  full.holders = {{0, "w1", "", 41, {}, milliseconds(900), ""},
                  {1, "w2", "ci", 42, {}, milliseconds(5), "v"}};
  auto held = acquire_answer(c, "pool", r, acquire_refused{full});
  BOOST_TEST(held.result_int() == 409u);
  BOOST_TEST(std::string(held.body()) ==
             R"x({"error":"held","message":"every permit of the key is held (or its slot in lock-delay)",)x"
             R"("owner":"w1","token":41,"ttl_remaining_ms":900,"value":"","permits":2,"holders":[)"
             R"({"slot":0,"owner":"w1","token":41,"ttl_remaining_ms":900,"value":""},)"
             R"({"slot":1,"owner":"w2","client":"ci","token":42,"ttl_remaining_ms":5,"value":"v"}],)"
             R"("holders_total":2})");
  // A key of more holders than a view shows: the holders shown, and how many there are.
  full.holders_total = 150;
  BOOST_TEST(std::string(acquire_answer(c, "pool", r, acquire_refused{full}).body())
                 .ends_with(R"("value":"v"}],"holders_total":150})"));
  full.holders_total = 2;
  // A plain lock refused to a request that named permits: a key of 1 permit, its holder in slot 0.
  auto plain = acquire_answer(c, "pool", r, acquire_refused{lease_view{"w1", "", 41, {}, milliseconds(9)}});
  BOOST_TEST(
      std::string(plain.body())
          .find(
              R"("permits":1,"holders":[{"slot":0,"owner":"w1","token":41,"ttl_remaining_ms":9,"value":""}],)"
              R"("holders_total":1})") != std::string::npos);

  // Every slot of the key (here: of its former count) in lock-delay: no holder, the delay's message.
  lease_view ended{"", "", 40, {}, milliseconds(700)};
  ended.permits = 2;
  auto delayed = acquire_answer(c, "pool", r, acquire_refused{ended, milliseconds(700)});
  BOOST_TEST(
      std::string(delayed.body()) ==
      R"({"error":"held","message":"the lock is in lock-delay: its last lease ended by expiry or a break",)"
      R"("owner":"","token":40,"ttl_remaining_ms":700,"value":"","permits":2,"holders":[],"holders_total":0,)"
      R"("lock_delay_remaining_ms":700})");

  auto mismatch = acquire_answer(c, "pool", r, acquire_mismatch{2});
  BOOST_TEST(mismatch.result_int() == 409u);
  BOOST_TEST(std::string(mismatch.body()).starts_with(R"({"error":"permits_mismatch","message":")"));
  BOOST_TEST(std::string(mismatch.body()).ends_with(R"(","permits":2})"));

  full.slot = 0;
  BOOST_TEST(
      std::string(get_answer(c, "pool", full).body()) ==
      R"({"key":"pool","owner":"w1","token":41,"ttl_remaining_ms":900,"value":"","permits":2,"holders":[)"
      R"({"slot":0,"owner":"w1","token":41,"ttl_remaining_ms":900,"value":""},)"
      R"({"slot":1,"owner":"w2","client":"ci","token":42,"ttl_remaining_ms":5,"value":"v"}],"holders_total":2})");
  list_page page;
  lease_view permit{"w2", "", 42, {}, milliseconds(5), ""};
  permit.permits = 2;
  permit.slot = 1;
  page.leases.push_back({"pool", permit, 1});
  BOOST_TEST(std::string(list_answer(c, page).body()) ==
             R"({"locks":[{"key":"pool","kind":"permit","slot":1,"permits":2,"owner":"w2","token":42,)"
             R"("ttl_remaining_ms":5,"value":"","waiters":1}],"next":null})");
  auto unnamed = break_answer(c, "pool", break_needs_token{2});
  BOOST_TEST(unnamed.result_int() == 400u);
  BOOST_TEST(std::string(unnamed.body()).find("name the permit's token") != std::string::npos);
  BOOST_TEST(
      std::string(break_answer(c, "pool", lease_broken{permit}).body()) ==
      R"({"key":"pool","broken":true,"owner":"w2","token":42,"ttl_remaining_ms":5,"permits":2,"slot":1})");
}
