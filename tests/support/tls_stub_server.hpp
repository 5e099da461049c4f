// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: a TLS server that presents the certificate it is given, on 127.0.0.1 and ::1 with one port,
// and records what clients send once a handshake completes. It answers `GET /version` as etcd does (so an
// etcd client goes on to authenticate) and every other request with a 500. It stands in for an impostor:
// a test checks what a client refuses to tell it.

#include "test_pki.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace baton::test {

class tls_stub_server {
 public:
  /// Serves `cert_file` (PEM chain) with `key_file` at once, on its own thread.
  tls_stub_server(const std::string& cert_file, const std::string& key_file);
  ~tls_stub_server();
  tls_stub_server(const tls_stub_server&) = delete;
  tls_stub_server& operator=(const tls_stub_server&) = delete;

  unsigned short port() const { return port_; }
  /// The requests received after completed handshakes (request line, headers and body), in order.
  std::string received() const;
  /// Handshakes that completed.
  int handshakes() const;

 private:
  void accept(boost::asio::ip::tcp::acceptor& acceptor);
  boost::asio::io_context ioc_;
  boost::asio::ssl::context tls_;
  boost::asio::ip::tcp::acceptor v4_, v6_;
  unsigned short port_ = 0;
  mutable std::mutex mutex_;
  std::string received_;
  int handshakes_ = 0;
  std::thread thread_;
};

/// Every way a URL can name a loopback server. The zone of a scoped IPv6 address picks an interface and is
/// not part of the address a certificate names.
inline const std::vector<std::string> loopback_hosts{"127.0.0.1", "[::1]", "[::1%lo]", "localhost"};

/// Certificates from `pki`'s CA (file names, without .pem/.key) for the host check: one naming every loopback
/// form, and two naming other hosts only: one by DNS name, one by IP address whose common name is "localhost"
/// (a client must not fall back to it).
struct host_check_certs {
  std::string right = "loopback", wrong_name = "wrong-host", wrong_address = "elsewhere";
  explicit host_check_certs(const test_pki& pki) {
    pki.make_leaf(right, "ca", "baton-loopback", "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost");
    pki.make_leaf(wrong_address, "ca", "localhost", "subjectAltName=IP:192.0.2.1,IP:2001:db8::1");
  }
};

}  // namespace baton::test
