#pragma once
// Test helper: the JSON request bodies of docs/protocol.md.

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace baton::test {

inline std::string acquire_body(std::string_view owner, int ttl_ms) {
  return boost::json::serialize(boost::json::object{{"owner", owner}, {"ttl_ms", ttl_ms}});
}
inline std::string renew_body(std::string_view owner, std::uint64_t token, int ttl_ms) {
  return boost::json::serialize(boost::json::object{{"owner", owner}, {"token", token}, {"ttl_ms", ttl_ms}});
}
inline std::string release_body(std::string_view owner, std::uint64_t token) {
  return boost::json::serialize(boost::json::object{{"owner", owner}, {"token", token}});
}

}  // namespace baton::test
