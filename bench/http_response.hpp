// SPDX-License-Identifier: Apache-2.0
#pragma once
// The smallest HTTP/1.1 response reader the load generator can get away with.
//
// A full parser (Beast) would cost the load generator CPU that, on a two-core machine, the server under
// test needs. Both servers answer with either Content-Length (batond; etcd's unary calls) or chunked
// encoding (etcd's streaming /v3/lease/keepalive), so this reads the status line, those two headers and
// Connection, and nothing else. Pure: bytes in, a parsed response or "need more bytes" out.

#include <cstddef>
#include <string>
#include <string_view>

namespace baton::bench {

struct http_response {
  int status = 0;
  /// Points into the input for Content-Length bodies and into `chunked_body` for chunked ones.
  std::string_view body;
  /// The server asked to close the connection after this response.
  bool close = false;
  /// Total bytes of the input this response used.
  std::size_t consumed = 0;
};

enum class parse_status { complete, need_more, malformed };

/// Parses one response from the start of `in`. `chunked_body` is scratch space for a chunked body (kept by
/// the caller so its capacity is reused). Headers larger than `max_header_bytes` are malformed.
parse_status parse_http_response(std::string_view in, std::string& chunked_body, http_response& out,
                                 std::size_t max_header_bytes = 16 * 1024);

}  // namespace baton::bench
