// SPDX-License-Identifier: Apache-2.0
#pragma once
// A string as JSON text, written straight into an answer or a request body: batond's answers and the SDK's
// batch renew bodies are written as text, not built as json::value (a thousand entries would otherwise be a
// thousand objects and strings). The text is byte for byte what Boost.JSON's serializer writes for the same
// string (test_json_string), so a peer reads it as it reads any other JSON.

#include <cstddef>
#include <string_view>

namespace baton {

/// Appends `s` to `out` (a std::basic_string of char, any allocator) as a JSON string: quoted, with `"`, `\`
/// and the bytes below 0x20 escaped exactly as Boost.JSON's serializer escapes them (`\b \f \n \r \t`, else
/// `\u00xx` in lower-case hex), every other byte as it is (a string that is not UTF-8 reaches the reader as
/// it would through Boost.JSON).
template <class String>
void append_json_string(String& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  std::size_t plain = 0;  // the first byte not yet appended; the bytes from it to i need no escape
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + plain, i - plain);
    plain = i + 1;
    const char* named = c == '"'    ? "\\\""
                        : c == '\\' ? "\\\\"
                        : c == '\b' ? "\\b"
                        : c == '\f' ? "\\f"
                        : c == '\n' ? "\\n"
                        : c == '\r' ? "\\r"
                        : c == '\t' ? "\\t"
                                    : nullptr;
    if (named) {
      out.append(named, 2);
    } else {
      const char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xf]};
      out.append(u, 6);
    }
  }
  out.append(s.data() + plain, s.size() - plain);
  out += '"';
}

}  // namespace baton
