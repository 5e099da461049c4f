// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE renew_batch_answer
#include <boost/test/unit_test.hpp>

// The batch renew answer is read with Boost.JSON's push parser, straight into the replies. It must read every
// body exactly as parsing it into a json::value and reading that field by field does (the reference below is
// that reading): the same replies for every answer the protocol allows, and the same refusal, never a
// success, for everything else.

#include "http_transport.hpp"
#include "renew_batch_answer.hpp"

#include "baton/error.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <random>
#include <string>
#include <vector>

using baton::renew_reply;
using baton::detail::batch_answer_status;
using baton::detail::read_renew_batch_answer;
namespace json = boost::json;

namespace {

struct reading {
  batch_answer_status status = batch_answer_status::ok;
  std::vector<renew_reply> replies;
};

// The tree reading: json::parse, then the answer's fields read one by one.
reading reference(std::string_view body, std::size_t n) {
  using baton::detail::string_field;
  using baton::detail::uint_field;
  reading out;
  out.replies.resize(n);
  boost::system::error_code ec;
  const json::value v = json::parse(body, ec);
  if (ec) {
    out.status = batch_answer_status::not_json;
    return out;
  }
  const json::array* results = nullptr;
  if (v.is_object())
    if (const auto* r = v.as_object().if_contains("results"); r && r->is_array() && r->as_array().size() == n)
      results = &r->as_array();
  if (!results) {
    out.status = batch_answer_status::wrong_shape;
    return out;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const json::value& e = (*results)[i];
    renew_reply& one = out.replies[i];
    if (string_field(e, "error") == "lost") {
      one.ec = baton::error::lease_lost;
      one.lost_reason = string_field(e, "reason");
      one.diagnostic = string_field(e, "message");
    } else if (std::uint64_t token = 0; !uint_field(e, "token", token)) {
      one.ec = baton::error::protocol_error;
      one.diagnostic = "batch renew result " + std::to_string(i) + " is neither a lease nor lost";
    }
  }
  return out;
}

reading pushed(std::string_view body, std::size_t n) {
  reading out;
  // Replies hold leftovers of an earlier answer: the reader must overwrite every field.
  out.replies.assign(n, renew_reply{baton::error::server_error, "stale", "stale"});
  out.status = read_renew_batch_answer(body, out.replies);
  return out;
}

// Both readings agree: the same status, and for a readable answer the same reply per entry.
void same(std::string_view body, std::size_t n) {
  BOOST_TEST_CONTEXT("body: " << body << " entries: " << n) {
    const auto want = reference(body, n);
    const auto got = pushed(body, n);
    BOOST_TEST_REQUIRE(static_cast<int>(got.status) == static_cast<int>(want.status));
    if (want.status != batch_answer_status::ok) return;
    for (std::size_t i = 0; i < n; ++i) {
      BOOST_TEST((got.replies[i].ec == want.replies[i].ec));
      BOOST_TEST(got.replies[i].lost_reason == want.replies[i].lost_reason);
      BOOST_TEST(got.replies[i].diagnostic == want.replies[i].diagnostic);
    }
  }
}

// What batond answers (server/src/http_server.cpp): a renewed lease, and each lost reason.
const std::string renewed = R"({"key":"jobs/a","owner":"w1","token":41,"ttl_ms":10000})";
std::string lost(std::string_view reason) {
  return R"({"key":"jobs/b","error":"lost","reason":")" + std::string(reason) +
         R"(","message":"the lease is lost: )" + std::string(reason) + R"("})";
}

std::string answer(const std::vector<std::string>& results) {
  std::string s = R"({"results":[)";
  for (std::size_t i = 0; i < results.size(); ++i)
    s += (i ? "," : "") + results[i];
  return s + "]}";
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_real_answer_gives_each_entry_its_outcome) {
  const auto body = answer(
      {renewed, lost("token_mismatch"), renewed, lost("owner_mismatch"), lost("not_held"), lost("expired")});
  const auto got = pushed(body, 6);
  BOOST_TEST_REQUIRE((got.status == batch_answer_status::ok));
  BOOST_TEST(!got.replies[0].ec);
  BOOST_TEST(got.replies[0].lost_reason.empty());
  BOOST_TEST(got.replies[0].diagnostic.empty());
  BOOST_TEST((got.replies[1].ec == baton::error::lease_lost));
  BOOST_TEST(got.replies[1].lost_reason == "token_mismatch");
  BOOST_TEST(got.replies[1].diagnostic == "the lease is lost: token_mismatch");
  BOOST_TEST(!got.replies[2].ec);
  BOOST_TEST(got.replies[3].lost_reason == "owner_mismatch");
  BOOST_TEST(got.replies[4].lost_reason == "not_held");
  BOOST_TEST(got.replies[5].lost_reason == "expired");
  same(body, 6);
}

BOOST_AUTO_TEST_CASE(members_in_any_order_unknown_members_whitespace_and_escapes_are_read) {
  for (
      const char* body : {
          R"({"results":[{"token":41}]})",
          R"({"other":{"results":[1,2]},"results":[{"ttl_ms":1,"token":41,"key":"k"}],"more":[[[]]]})",
          " \n\t{ \"results\" : [ { \"token\" : 41 } , {\"error\" :\"lost\"} ] } \r\n",
          R"({"re\u0073ults":[{"t\u006fken":41},{"error":"l\u006fst","reason":"a\"b\\c\n\u00e9\ud83d\ude00"}]})",
          R"({"results":[{"key":"\u0000\/x","reason":"ignored on success","message":"and this","token":7}]})",
          R"({"results":[{"error":"lost","token":"junk"},{"message":"m","error":"lost","reason":"r"}]})",
          R"({"results":[{"token":"0000000000000000000000000000041"},{"token":5.0},{"token":18446744073709551615}]})",
      }) {
    const auto want = reference(body, 1);
    const auto n = want.status == batch_answer_status::ok                 ? 1
                   : reference(body, 2).status == batch_answer_status::ok ? 2
                                                                          : 3;
    BOOST_TEST_REQUIRE((reference(body, n).status == batch_answer_status::ok), body);
    same(body, n);
    for (const auto& r : pushed(body, n).replies)
      BOOST_TEST((!r.ec || r.ec == baton::error::lease_lost), body);
  }
}

BOOST_AUTO_TEST_CASE(a_result_neither_renewed_nor_lost_is_a_protocol_error_of_its_own) {
  for (const char* result : {R"({})",
                             R"({"token":-1})",
                             R"({"token":5.5})",
                             R"({"token":1e30})",
                             R"({"token":""})",
                             R"({"token":"12a"})",
                             R"({"token":"99999999999999999999"})",
                             R"({"token":null})",
                             R"({"token":true})",
                             R"({"token":[1]})",
                             R"({"token":{"n":1}})",
                             R"({"error":"held"})",
                             R"({"error":"lostt","token":"x"})",
                             R"({"error":["lost"]})",
                             R"({"error":"LOST"})",
                             R"({"token":1,"token":"x"})",
                             R"({"error":"lost","error":"held"})",
                             R"(41)",
                             R"("lost")",
                             R"(null)",
                             R"([{"token":1}])"}) {
    const auto body = answer({renewed, result});
    const auto got = pushed(body, 2);
    BOOST_TEST_REQUIRE((got.status == batch_answer_status::ok), body);
    BOOST_TEST(!got.replies[0].ec);
    BOOST_TEST((got.replies[1].ec == baton::error::protocol_error), body);
    BOOST_TEST(got.replies[1].diagnostic == "batch renew result 1 is neither a lease nor lost");
    same(body, 2);
  }
}

BOOST_AUTO_TEST_CASE(an_answer_of_the_wrong_shape_is_refused_whole) {
  for (const char* body :
       {R"([])", R"("results")", R"(null)", R"({})", R"({"results":{}})", R"({"results":null})",
        R"({"result":[{"token":1}]})", R"({"results":[]})", R"({"results":[{"token":1},{"token":2}]})",
        R"({"results":[{"token":1}],"results":7})", R"([{"results":[{"token":1}]}])",
        R"({"x":{"results":[{"token":1}]}})"}) {
    BOOST_TEST((pushed(body, 1).status == batch_answer_status::wrong_shape), body);
    same(body, 1);
  }
  // The last of two "results" counts, as in a json::object.
  same(R"({"results":7,"results":[{"token":1}]})", 1);
  same(R"({"results":[{"error":"lost","reason":"x","message":"y"}],"results":[{"error":"lost"}]})", 1);
  BOOST_TEST(pushed(R"({"results":[{"error":"lost","reason":"x"}],"results":[{"error":"lost"}]})", 1)
                 .replies[0]
                 .lost_reason.empty());
}

BOOST_AUTO_TEST_CASE(a_body_that_is_not_json_is_never_an_answer) {
  for (const char* body :
       {"", " ", "{", R"({"results":[{"token":1}]} x)", R"({"results":[{"token":1}]}{})",
        R"({"results":[{"token":1},]})", R"({"results":[{"token":1}]/*c*/})", R"({'results':[]})",
        "{\"results\":[{\"token\":1,\"x\":\"\xff\"}]}", R"({"results":[{"token":01}]})",
        R"({"results":[{"error":"lost\x"}]})", "{\"results\":[{\"error\":\"lo\nst\"}]}"}) {
    BOOST_TEST((pushed(body, 1).status == batch_answer_status::not_json), body);
    same(body, 1);
  }
  // Deeper than 32 levels: refused by both.
  std::string deep = R"({"results":[{"token":1}],"x":)";
  for (int i = 0; i < 40; ++i)
    deep += '[';
  for (int i = 0; i < 40; ++i)
    deep += ']';
  deep += '}';
  BOOST_TEST((pushed(deep, 1).status == batch_answer_status::not_json));
  same(deep, 1);
}

BOOST_AUTO_TEST_CASE(every_truncation_of_an_answer_is_refused) {
  const auto body = answer({renewed, lost("token_mismatch"), renewed});
  for (std::size_t n = 0; n < body.size(); ++n) {
    BOOST_TEST((pushed(body.substr(0, n), 3).status == batch_answer_status::not_json), n);
    same(body.substr(0, n), 3);
  }
}

// Answers built from random pieces (valid ones and near misses), then damaged at random: whatever they are,
// both readings agree.
BOOST_AUTO_TEST_CASE(generated_answers_read_as_the_tree_reads_them) {
  std::mt19937 rng(20261201);
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
  const std::vector<std::string> strings = {
      R"("lost")",      R"("l\u006fst")",    R"("held")", R"("")",     R"("token_mismatch")",
      R"("x\"y\\z\n")", R"("\ud83d\ude00")", R"("41")",   R"("0041")", R"("4x")"};
  const std::vector<std::string> numbers = {
      "0",  "41", "-1", "5.0", "5.5", "1e3", "1e30", "18446744073709551615", "18446744073709551616",
      "-0", "0.0"};
  const std::vector<std::string> names = {"token",  "error",   "reason",      "message", "key",      "owner",
                                          "ttl_ms", "results", "t\\u006fken", "err",     "messages", ""};
  std::function<std::string(int)> value = [&](int depth) -> std::string {
    switch (pick(depth > 3 ? 4 : 7)) {
      case 0:
        return strings[pick(strings.size())];
      case 1:
        return numbers[pick(numbers.size())];
      case 2:
        return std::vector<std::string>{"true", "false", "null"}[pick(3)];
      case 3:
        return strings[pick(strings.size())];
      case 4:
      case 5: {
        std::string s = "{";
        for (std::size_t i = 0, n = pick(5); i < n; ++i)
          s += (i ? "," : "") + ("\"" + names[pick(names.size())] + "\":") + value(depth + 1);
        return s + "}";
      }
      default: {
        std::string s = "[";
        for (std::size_t i = 0, n = pick(4); i < n; ++i)
          s += (i ? "," : "") + value(depth + 1);
        return s + "]";
      }
    }
  };
  auto result = [&]() -> std::string {
    switch (pick(6)) {
      case 0:
        return renewed;
      case 1:
        return lost(
            std::vector<std::string>{"token_mismatch", "owner_mismatch", "not_held", "expired"}[pick(4)]);
      case 2: {
        // A result object whose members are the protocol's, with random values, in random order.
        std::string s = "{";
        for (std::size_t i = 0, n = 1 + pick(5); i < n; ++i)
          s += (i ? "," : "") + ("\"" + names[pick(4)] + "\":") +
               (pick(2) ? strings[pick(strings.size())] : numbers[pick(numbers.size())]);
        return s + "}";
      }
      default:
        return value(2);
    }
  };
  std::size_t answers = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<std::string> results(pick(6));
    for (auto& r : results)
      r = result();
    std::string body = pick(8) ? answer(results) : "{" + value(1).substr(1);
    if (pick(4) == 0) body = R"({"x":)" + value(1) + ",\"results\":" + answer(results).substr(11);
    if (pick(5) == 0 && !body.empty()) {
      // Damage: drop, repeat or change one byte.
      const auto at = pick(body.size());
      switch (pick(3)) {
        case 0:
          body.erase(at, 1);
          break;
        case 1:
          body.insert(at, 1, body[at]);
          break;
        default:
          body[at] = "{}[]\":,x1 \\"[pick(12)];
      }
    }
    for (std::size_t n : {results.size(), results.size() + 1}) {
      same(body, n);
      if (reference(body, n).status == batch_answer_status::ok) ++answers;
    }
  }
  // Most generated bodies are answers, so the comparison covers the replies, not only the refusals.
  BOOST_TEST(answers > 5000u);
}
