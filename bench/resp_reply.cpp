// SPDX-License-Identifier: Apache-2.0
#include "resp_reply.hpp"

#include <charconv>

namespace baton::bench {

parse_status parse_resp_reply(std::string_view in, resp_reply& out, std::size_t max_bytes) {
  if (in.empty()) return parse_status::need_more;
  const auto eol = in.find("\r\n");
  if (eol == std::string_view::npos)
    return in.size() > max_bytes ? parse_status::malformed : parse_status::need_more;
  const std::string_view line = in.substr(1, eol - 1);
  out = {};
  out.type = in[0];
  switch (in[0]) {
    case '+':
    case '-':
      out.payload = line;
      out.consumed = eol + 2;
      return parse_status::complete;
    case ':': {
      long long v = 0;
      auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
      if (ec != std::errc{} || end != line.data() + line.size()) return parse_status::malformed;
      out.payload = line;
      out.consumed = eol + 2;
      return parse_status::complete;
    }
    case '$': {
      long long n = 0;
      auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), n);
      if (ec != std::errc{} || end != line.data() + line.size() || n < -1) return parse_status::malformed;
      if (n == -1) {
        out.type = '_';
        out.consumed = eol + 2;
        return parse_status::complete;
      }
      const auto size = static_cast<std::size_t>(n);
      if (size > max_bytes) return parse_status::malformed;
      const std::size_t body_at = eol + 2;
      if (in.size() < body_at + size + 2) return parse_status::need_more;
      if (in.substr(body_at + size, 2) != "\r\n") return parse_status::malformed;
      out.payload = in.substr(body_at, size);
      out.consumed = body_at + size + 2;
      return parse_status::complete;
    }
    default:
      return parse_status::malformed;
  }
}

}  // namespace baton::bench
