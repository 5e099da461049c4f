// SPDX-License-Identifier: Apache-2.0
#include "framing.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>

#include <string>
#include <string_view>

namespace baton::server {
namespace beast = boost::beast;

std::optional<api_error> check_framing(const request& req) {
  auto codings = req.equal_range(http::field::transfer_encoding);
  if (codings.first == codings.second) return std::nullopt;
  if (std::next(codings.first) != codings.second)
    return api_error{400, "bad_request", "more than one Transfer-Encoding header"};
  std::string_view te = codings.first->value();
  while (!te.empty() && (te.front() == ' ' || te.front() == '\t'))
    te.remove_prefix(1);
  while (!te.empty() && (te.back() == ' ' || te.back() == '\t'))
    te.remove_suffix(1);
  if (!beast::iequals(te, "chunked"))
    return api_error{
        400, "bad_request",
        "Transfer-Encoding must be \"chunked\" alone, got \"" + std::string(codings.first->value()) + "\""};
  if (req.count(http::field::content_length) != 0)
    return api_error{400, "bad_request", "Content-Length together with Transfer-Encoding"};
  return std::nullopt;
}

void parse_buffered(request_parser& parser, beast::flat_buffer& buffer, beast::error_code& ec) {
  while (!parser.is_done() && buffer.size() != 0) {
    const std::size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == http::error::need_more) {
      ec = {};
      return;
    }
    if (ec || used == 0) return;
  }
}

}  // namespace baton::server
