#pragma once
// batond's TLS settings (--tls-cert, --tls-key, --tls-client-ca) and the OpenSSL context built from them.
// Only the server's connection code includes the Asio SSL headers; this header forward-declares the context.

#include <memory>
#include <string>

namespace boost::asio::ssl {
class context;
}

namespace baton::server {

struct tls_files {
  /// PEM certificate chain the server presents (leaf first).
  std::string cert_file;
  /// PEM private key of that certificate.
  std::string key_file;
  /// PEM CA bundle for mutual TLS: when set, every client must present a certificate issued by one of these
  /// CAs, or the handshake fails. Empty: no client certificate is asked for.
  std::string client_ca_file;
};

/// Loads the files once, at start (certificates are not reloaded: a new certificate needs a restart).
/// TLS 1.2 and 1.3 only. Throws std::invalid_argument naming the flag, the file and the reason.
std::shared_ptr<boost::asio::ssl::context> make_server_tls_context(const tls_files& files);

}  // namespace baton::server
