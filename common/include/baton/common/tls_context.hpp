// SPDX-License-Identifier: Apache-2.0
#pragma once
// The client side of TLS: the OpenSSL context built from client_config::tls (and rebuilt by
// client::reload_tls()), and what a failed connection is told. Used by the SDK's transports, and by the
// agent's HTTP jobs and the CLI's conformance checks, which make HTTPS requests of their own. Not installed
// with the SDK; compiled into it (sdk/CMakeLists.txt), as it speaks in the SDK's types (tls_config,
// baton::exception). The Asio SSL headers stay in the .cpp file.

#include "baton/client.hpp"
#include "baton/config.hpp"

#include <boost/system/error_code.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace boost::asio::ssl {
class context;
}

namespace baton::detail {

/// The TLS settings a backend's connections are made with (make_client_tls_context()). Each connection takes
/// the context current when it connects and keeps it (a reference) for its whole life; reload() builds a
/// complete new context and swaps it in, so a connection never sees half of a rotation, and one already open
/// is not disturbed.
class client_tls {
 public:
  /// Reads the files. Throws baton::exception(error::invalid_config) naming the setting, the file and the
  /// reason.
  explicit client_tls(tls_config files);

  /// The context for a new connection. Thread-safe.
  std::shared_ptr<boost::asio::ssl::context> current() const { return current_.load(); }

  /// Reads `files` (nullopt: the files last loaded, again) into a new context; once everything loaded and
  /// the key belongs to the certificate, new connections use it. On failure nothing changes. Thread-safe;
  /// reloads are serialized.
  tls_reload_result reload(std::optional<tls_config> files);

 private:
  std::mutex reload_mu_;  // one reload at a time; connections never take it
  tls_config files_;      // guarded by reload_mu_
  std::atomic<std::shared_ptr<boost::asio::ssl::context>> current_;
};

/// Peer verification on (ca_file or the system store), TLS 1.2+, the client certificate when given.
/// Throws baton::exception(error::invalid_config) naming the setting, the file and the reason.
std::shared_ptr<boost::asio::ssl::context> make_client_tls_context(const tls_config& tls);

/// The same context, held for a backend's connections so that it can be read again (client_tls::reload()).
std::shared_ptr<client_tls> make_client_tls(const tls_config& tls);

/// backend::reload_tls() of a backend whose connections use `tls` (null: a backend without TLS, which
/// answers error::invalid_config).
tls_reload_result reload_client_tls(const std::shared_ptr<client_tls>& tls, std::optional<tls_config> files);

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
