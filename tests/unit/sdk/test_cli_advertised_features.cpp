// SPDX-License-Identifier: Apache-2.0
// Compiled into test_memory_backend_conformance (tests/CMakeLists.txt): one program fewer to link.
#include <boost/test/unit_test.hpp>

// `baton conformance` checks an optional feature only on a server that advertises it (docs/protocol.md,
// "Versions and features"): what each answer to GET /v1/capabilities means for a feature's check.

#include "advertised_features.hpp"
#include "conformance_check.hpp"

#include <boost/json/parse.hpp>

#include <string>

using baton::cli::advertised_features;
using baton::cli::check_failed;
using baton::cli::check_skipped;
namespace json = boost::json;

namespace {

advertised_features answered(int status, const char* body = "") {
  json::error_code ec;
  auto v = json::parse(body, ec);
  return advertised_features::read(status, ec ? json::value() : v, std::to_string(status) + " " + body);
}

// What require() did: "run", "SKIP why: detail (about)" or "FAIL reason".
std::string outcome(const advertised_features& a, const char* feature) {
  try {
    a.require(feature);
    return "run";
  } catch (const check_skipped& e) {
    return "SKIP " + std::string(e.what()) + " (" + e.about + ")";
  } catch (const check_failed& e) {
    return "FAIL " + std::string(e.what());
  }
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_advertised_features)

BOOST_AUTO_TEST_CASE(a_server_without_capabilities_is_version_1_with_no_optional_feature) {
  const auto a = answered(404, R"({"error":"not_found","message":"unknown route"})");
  BOOST_TEST(a.known());
  for (const char* feature : {"lease_values", "renew_batch", "proclaim", "lock_record"}) {
    BOOST_TEST(!a.has(feature));
    const auto o = outcome(a, feature);
    BOOST_TEST(o.rfind(std::string("SKIP not advertised: ") + feature, 0) == 0, o);
    BOOST_TEST(contains(o, "404: protocol version 1, no optional features"), o);
    BOOST_TEST(contains(o, std::string("(") + feature + ")"), o);
  }
  // Any 404, not only the protocol's JSON one.
  BOOST_TEST(answered(404, "<html>Not Found</html>").known());
}

BOOST_AUTO_TEST_CASE(an_advertised_feature_is_checked_and_one_not_named_is_skipped) {
  const auto a = answered(
      200, R"({"protocol_version":1,"features":["lease_values","proclaim",7,"some_future_feature"]})");
  BOOST_TEST(a.known());
  BOOST_TEST(outcome(a, "lease_values") == "run");
  BOOST_TEST(outcome(a, "proclaim") == "run");
  const auto o = outcome(a, "renew_batch");
  BOOST_TEST(o == "SKIP not advertised: renew_batch is not among the features of GET /v1/capabilities "
                  "(renew_batch)",
             o);
}

BOOST_AUTO_TEST_CASE(a_200_of_another_shape_advertises_nothing) {
  // The capabilities check fails such an answer; the features' checks are skipped, not failed again.
  for (const char* body : {R"({"protocol_version":1})", R"({"features":"lease_values"})", "[]", "not json"}) {
    const auto a = answered(200, body);
    BOOST_TEST(a.known(), body);
    BOOST_TEST(outcome(a, "lease_values").rfind("SKIP not advertised: ", 0) == 0, body);
  }
}

BOOST_AUTO_TEST_CASE(any_other_failure_says_nothing_and_fails_the_check_instead_of_skipping_it) {
  // A server that errs on GET /v1/capabilities must not have its features' checks skipped as absent.
  for (int status : {0, 401, 500, 503}) {
    const auto a = answered(status, R"({"error":"storage_unavailable","message":"disk"})");
    BOOST_TEST(!a.known(), status);
    BOOST_TEST(!a.has("proclaim"), status);
    const auto o = outcome(a, "proclaim");
    BOOST_TEST(o.rfind("FAIL whether the server has proclaim is unknown: GET /v1/capabilities answered " +
                           std::to_string(status),
                       0) == 0,
               o);
  }
  BOOST_TEST(!advertised_features().known());
}

BOOST_AUTO_TEST_SUITE_END()
