// SPDX-License-Identifier: Apache-2.0
#pragma once
// The JSON text of a `POST /v1/renew` body's entries (docs/protocol.md), written straight into the body:
// a batch of a thousand entries would otherwise build a json::object and a string per entry. Private to the
// SDK. The text is the very one Boost.JSON's serializer writes for the same object (checked byte for byte by
// test_renew_batch_body, its strings by test_json_string), so servers read it as they read any other
// request.

#include "baton/backend.hpp"
#include "baton/common/json_string.hpp"

#include <charconv>
#include <string>
#include <string_view>

namespace baton::detail {

/// Appends one entry of a batch renew body: {"key":…,"owner":…,"token":…,"ttl_ms":…}.
inline void append_renew_entry(std::string& out, const renew_entry& e) {
  char digits[24];
  out += R"({"key":)";
  append_json_string(out, e.key);
  out += R"(,"owner":)";
  append_json_string(out, e.owner);
  out += R"(,"token":)";
  out.append(digits, std::to_chars(digits, digits + sizeof digits, e.token).ptr);
  out += R"(,"ttl_ms":)";
  out.append(digits, std::to_chars(digits, digits + sizeof digits, e.ttl.count()).ptr);
  out += '}';
}

}  // namespace baton::detail
