// SPDX-License-Identifier: Apache-2.0
#pragma once
// Noticing that a long-poll's client has gone while its request waits.

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <memory>

namespace baton::server {

// A long-poll's client may close while it waits; without noticing, its connection would stay open (in
// CLOSE-WAIT) until wait_ms. The socket is watched for readability without reading from it (which would
// take bytes from the HTTP or TLS stream): end of stream or an error cancels the wait. Pending bytes mean
// the client is still there (a pipelined request, a TLS record) and end the watch.
struct peer_watch {
  boost::asio::cancellation_signal signal;
  bool done = false;  // the request was answered; the watch's completion must touch nothing
  bool gone = false;
};
std::shared_ptr<peer_watch> watch_peer(boost::asio::ip::tcp::socket& socket);

}  // namespace baton::server
