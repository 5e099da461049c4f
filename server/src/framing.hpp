// SPDX-License-Identifier: Apache-2.0
#pragma once
// The request-smuggling check: which message framings batond reads (docs/protocol.md, "Encoding").

#include "http_message.hpp"
#include "protocol.hpp"

#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include <optional>

namespace baton::server {

// Only a lone `chunked` transfer coding, and no Content-Length beside it. Anything else is where a front
// proxy and batond could disagree on where a request ends (request smuggling): Beast takes `chunked,
// identity` for a request without a body, so its body would be read as a second request. Such a request is
// refused and its connection closed, since what follows it on the connection cannot be trusted.
std::optional<api_error> check_framing(const request& req);

// Feeds what `buffer` holds to `parser`, as http::async_read does before it reads from the stream, and stops
// where the buffer runs out (the caller reads the rest from the stream) or at an error, left in `ec`. The
// same parser sees the same bytes in the same order, so limits and malformed requests are judged as before.
// A body that came in the same read as its header (the common case) then needs no second composed read,
// whose completion without I/O Beast posts: a scheduler round trip per request.
void parse_buffered(request_parser& parser, boost::beast::flat_buffer& buffer, boost::beast::error_code& ec);

}  // namespace baton::server
