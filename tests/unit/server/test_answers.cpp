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
