// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reads one Redis (RESP2) reply: the few reply shapes the lock commands of the Redis comparison get back.
//
// SET ... NX PX answers +OK or a nil bulk string; the compare-and-delete and compare-and-expire scripts
// answer an integer; errors are -ERR lines. Arrays never come back to these commands and are malformed
// here. Pure: bytes in, a reply or "need more bytes" out, like parse_http_response.

#include "http_response.hpp"

#include <cstddef>
#include <string_view>

namespace baton::bench {

struct resp_reply {
  /// '+' simple string, '-' error, ':' integer, '$' bulk string, '_' nil (RESP2's "$-1").
  char type = 0;
  /// The line of '+', '-', ':' without its CRLF, or the bulk string's bytes. Points into the input.
  std::string_view payload;
  /// Total bytes of the input this reply used.
  std::size_t consumed = 0;
};

/// Parses one reply from the start of `in`. A line or bulk string longer than `max_bytes` is malformed.
parse_status parse_resp_reply(std::string_view in, resp_reply& out, std::size_t max_bytes = 16 * 1024);

}  // namespace baton::bench
