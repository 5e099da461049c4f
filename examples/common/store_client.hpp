// SPDX-License-Identifier: Apache-2.0
#pragma once
// A minimal blocking HTTP client for the examples: writes an item to fenced-store with a fencing token.
// Examples block freely; a service would use an async client.

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/url/parse.hpp>

#include <cstdint>
#include <string>

namespace baton::examples {

struct store_reply {
  int status = 0;
  std::string body;
};

/// PUT /items/{key} with `Fencing-Token: token`; returns the store's status and body.
inline store_reply put_item(const std::string& store_url, const std::string& key, const std::string& value,
                            std::uint64_t token) {
  namespace http = boost::beast::http;
  auto u = boost::urls::parse_absolute_uri(store_url).value();
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::resolver resolver(ioc);
  boost::asio::ip::tcp::socket socket(ioc);
  boost::asio::connect(socket, resolver.resolve(std::string(u.host()), std::string(u.port())));
  http::request<http::string_body> req{http::verb::put, "/items/" + key, 11};
  req.set(http::field::host, u.encoded_host_and_port());
  req.set("Fencing-Token", std::to_string(token));
  req.body() = value;
  req.prepare_payload();
  http::write(socket, req);
  boost::beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(socket, buf, res);
  return {static_cast<int>(res.result_int()), res.body()};
}

}  // namespace baton::examples
