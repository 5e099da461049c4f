// SPDX-License-Identifier: Apache-2.0
#pragma once
// The request-smuggling check: which message framings batond reads (docs/protocol.md, "Encoding").

#include "http_message.hpp"
#include "protocol.hpp"

#include <optional>

namespace baton::server {

// Only a lone `chunked` transfer coding, and no Content-Length beside it. Anything else is where a front
// proxy and batond could disagree on where a request ends (request smuggling): Beast takes `chunked,
// identity` for a request without a body, so its body would be read as a second request. Such a request is
// refused and its connection closed, since what follows it on the connection cannot be trusted.
std::optional<api_error> check_framing(const request& req);

}  // namespace baton::server
