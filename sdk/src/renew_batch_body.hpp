// SPDX-License-Identifier: Apache-2.0
#pragma once
// The JSON text of a `POST /v1/renew` body's entries (docs/protocol.md), written straight into the body:
// a batch of a thousand entries would otherwise build a json::object and a string per entry. Private to the
// SDK. The text is the very one Boost.JSON's serializer writes for the same object (checked byte for byte by
// test_renew_batch_body), so servers read it as they read any other request.

#include "baton/backend.hpp"

#include <charconv>
#include <string>
#include <string_view>

namespace baton::detail {

/// Appends `s` as a JSON string, quotes included, escaped as Boost.JSON's serializer escapes it: `"` and `\`,
/// the short forms of \b \t \n \f \r, `\u00xx` (lower-case hex) for the other bytes below 0x20, and every
/// other byte as it is (a key or owner that is not UTF-8 reaches the server as it would through Boost.JSON).
inline void append_json_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  std::size_t plain = 0;  // the start of the run of bytes copied as they are
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + plain, i - plain);
    plain = i + 1;
    out += '\\';
    switch (c) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '\b':
        out += 'b';
        break;
      case '\t':
        out += 't';
        break;
      case '\n':
        out += 'n';
        break;
      case '\f':
        out += 'f';
        break;
      case '\r':
        out += 'r';
        break;
      default:
        out += "u00";
        out += hex[c >> 4];
        out += hex[c & 0xf];
    }
  }
  out.append(s.data() + plain, s.size() - plain);
  out += '"';
}

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
