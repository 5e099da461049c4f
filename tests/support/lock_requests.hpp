// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: the JSON bodies of batond's lock requests (docs/protocol.md) and the token of an answer, for
// tests that speak the protocol directly through http_client.

#include "http_client.hpp"

#include <boost/json/serialize.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace baton::test {

inline std::string acquire_body(std::string_view owner, std::int64_t ttl_ms) {
  return boost::json::serialize(boost::json::object{{"owner", owner}, {"ttl_ms", ttl_ms}});
}
inline std::string renew_body(std::string_view owner, std::uint64_t token, int ttl_ms) {
  return boost::json::serialize(boost::json::object{{"owner", owner}, {"token", token}, {"ttl_ms", ttl_ms}});
}
inline std::string release_body(std::string_view owner, std::uint64_t token) {
  return boost::json::serialize(boost::json::object{{"owner", owner}, {"token", token}});
}
inline std::string proclaim_body(std::string_view owner, std::uint64_t token, std::string_view value) {
  return boost::json::serialize(boost::json::object{{"owner", owner}, {"token", token}, {"value", value}});
}
inline std::string record_body(std::string_view owner, std::uint64_t token, std::string_view value) {
  return proclaim_body(owner, token, value);  // the same members (docs/protocol.md, "record")
}
/// The "token" field of an acquire or renew answer, or of a `held` refusal.
inline std::uint64_t token_of(const http_reply& r) {
  return r.json.at("token").to_number<std::uint64_t>();
}

}  // namespace baton::test
