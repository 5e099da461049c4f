// SPDX-License-Identifier: Apache-2.0
#pragma once
// The address a daemon listens on, as batond's --listen and the agent's listen and metrics_listen take it:
// one rule for both, so an address that works for one works for the other.

#include <boost/asio/ip/tcp.hpp>

#include <string>
#include <string_view>

namespace baton {

/// The endpoint `text` names: an IPv4 address (`127.0.0.1:7070`, `0.0.0.0:7070`), an IPv6 address in
/// brackets (`[::1]:7070`, `[::]:7070`) or `localhost` (127.0.0.1), then a port from 0 (any free port) to
/// 65535. An IPv6 address without brackets is refused, naming the bracketed form: in `::1:7070` the last
/// colon could be the port's or the address's, and a guess binds the wrong one. Host names are refused:
/// bind() takes one address, and a name can resolve to several, or to another one tomorrow. Throws
/// std::invalid_argument with the reason, which the caller prefixes with the setting's name. Pure;
/// thread-safe.
boost::asio::ip::tcp::endpoint parse_listen(std::string_view text);

/// An endpoint written as parse_listen() takes it: `127.0.0.1:7071`, `[::1]:7071`.
std::string to_listen_string(const boost::asio::ip::tcp::endpoint& endpoint);

}  // namespace baton
