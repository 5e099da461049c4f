// SPDX-License-Identifier: Apache-2.0
#include "baton/common/listen_address.hpp"

#include <boost/asio/ip/address.hpp>

#include <charconv>
#include <stdexcept>

namespace baton {
namespace {

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

}  // namespace

boost::asio::ip::tcp::endpoint parse_listen(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) throw std::invalid_argument("expected host:port, got " + quoted(text));
  auto host = text.substr(0, colon);
  const auto port = text.substr(colon + 1);
  if (host.empty())
    throw std::invalid_argument("no host in " + quoted(text) + " (0.0.0.0 listens on every IPv4 address)");
  const bool bracketed = host.front() == '[';
  if (bracketed && (host.size() < 3 || host.back() != ']'))
    throw std::invalid_argument("expected [address]:port for IPv6, e.g. [::1]:7071");
  if (!bracketed && host.find(':') != std::string_view::npos) {
    // The form it should take, when the text before the last colon is an address and the text after it can be
    // a port.
    boost::system::error_code not_v6;
    boost::asio::ip::make_address_v6(host, not_v6);
    if (!not_v6 && !port.empty() && port.find_first_not_of("0123456789") == std::string_view::npos)
      throw std::invalid_argument("an IPv6 address needs brackets: [" + std::string(host) +
                                  "]:" + std::string(port));
    throw std::invalid_argument("an IPv6 address needs brackets: [address]:port, e.g. [::1]:7071");
  }
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || port.size() > 5 || ec != std::errc{} || end != port.data() + port.size() ||
      value > 65535)
    throw std::invalid_argument("the port in " + quoted(text) + " must be a number from 0 to 65535");
  boost::system::error_code bad;
  boost::asio::ip::address address;
  if (bracketed) {
    host = host.substr(1, host.size() - 2);
    address = boost::asio::ip::make_address_v6(host, bad);
    if (bad) throw std::invalid_argument(quoted(host) + " is not an IPv6 address");
  } else if (host == "localhost") {
    // Other names are not resolved: the daemon binds one address, and a name that resolves to several (or to
    // another one tomorrow) would make that choice silently.
    address = boost::asio::ip::address_v4::loopback();
  } else {
    address = boost::asio::ip::make_address_v4(host, bad);
    if (bad)
      throw std::invalid_argument(
          quoted(host) +
          " is not an IP address; listen takes an address (127.0.0.1, 0.0.0.0, [::1]) "
          "or localhost, not a host name");
  }
  return {address, static_cast<unsigned short>(value)};
}

std::string to_listen_string(const boost::asio::ip::tcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  const auto host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return host + ":" + std::to_string(endpoint.port());
}

}  // namespace baton
