// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the server targets share: the abort that reports a broken invariant, and batond's HTTP request
// parsing (Beast's parser with batond's default limits) without a socket.

#include "limits.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace baton::fuzz {

/// Aborts, so that libFuzzer keeps the input, when `ok` is false.
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
  }
}

using http_request = boost::beast::http::request<boost::beast::http::string_body>;

/// The bytes as one HTTP request, parsed as batond's connection does; nullopt when Beast refuses them.
inline std::optional<http_request> parse_http_request(std::string_view bytes) {
  namespace http = boost::beast::http;
  const server::limits_options limits;
  http::request_parser<http::string_body> parser;
  parser.eager(true);
  parser.body_limit(limits.max_body_bytes);
  parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  boost::beast::error_code ec;
  boost::asio::const_buffer in(bytes.data(), bytes.size());
  while (!parser.is_done() && in.size() > 0) {
    std::size_t used = parser.put(in, ec);
    in += used;
    if (ec == http::error::need_more) {
      ec = {};
      if (used == 0) break;
      continue;
    }
    if (ec) return std::nullopt;
  }
  if (!parser.is_done()) {
    parser.put_eof(ec);
    if (ec || !parser.is_done()) return std::nullopt;
  }
  require(parser.get().body().size() <= limits.max_body_bytes, "the body limit holds");
  return parser.release();
}

}  // namespace baton::fuzz
