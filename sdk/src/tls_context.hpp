// SPDX-License-Identifier: Apache-2.0
#pragma once
// The client side of TLS for the SDK's transports: the OpenSSL context built from client_config::tls, and
// what a failed connection is told. Private to the SDK; the Asio SSL headers stay in the .cpp files.

#include "baton/config.hpp"

#include <boost/system/error_code.hpp>

#include <memory>
#include <string>

namespace boost::asio::ssl {
class context;
}

namespace baton::detail {

/// Peer verification on (ca_file or the system store), TLS 1.2+, the client certificate when given.
/// Throws baton::exception(error::invalid_config) naming the setting, the file and the reason.
std::shared_ptr<boost::asio::ssl::context> make_client_tls_context(const tls_config& tls);

/// Prepares the OpenSSL connection `ssl` (an `SSL*`) for `host`: SNI (names only) and verification that the
/// certificate's subjectAltName names `host`, a DNS name or an IP address (the common name is not consulted).
/// An IPv6 address may carry a zone (`fe80::1%eth0`): it picks the interface to connect through and is left
/// out of the check, since a certificate names addresses, not interfaces. Returns why the check could not be
/// set up, empty when it was; the caller must then not go on with the handshake (a connection without a host
/// check would accept any certificate the trusted CAs ever issued).
std::string set_expected_host(void* ssl, const std::string& host);

/// A readable account of a TLS failure on the connection `ssl` to `server` (host:port): an untrusted
/// certificate, a host name mismatch, an alert from the server (a refused client certificate) or a
/// handshake with something that does not speak TLS.
std::string describe_tls_failure(void* ssl, const boost::system::error_code& ec, const std::string& server,
                                 bool during_handshake);

/// True for errors of the TLS layer (OpenSSL), as opposed to the socket's.
bool is_tls_error(const boost::system::error_code& ec);

}  // namespace baton::detail
