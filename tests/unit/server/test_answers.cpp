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
