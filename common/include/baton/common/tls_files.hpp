// SPDX-License-Identifier: Apache-2.0
#pragma once
// Loading PEM certificates and keys into an OpenSSL context, with errors a person can act on ("tls.ca_file
// \"/etc/baton/ca.pem\": cannot read: No such file or directory"). Shared by batond and the SDK. The Asio SSL
// headers stay out of this header: callers that only pass a context along do not pay for them.

#include <cstdint>
#include <string>
#include <string_view>

namespace boost::asio::ssl {
class context;
}

namespace baton::tls {

/// Trusts the CA certificates of the PEM bundle `file` (instead of nothing; the caller decides whether the
/// system store is used as well). `what` names the setting in messages (`--tls-client-ca`, `tls.ca_file`).
/// Throws std::invalid_argument: `<what> "<file>": <reason>`.
void load_trusted_cas(boost::asio::ssl::context& ctx, const std::string& file, std::string_view what);

/// Loads the certificate chain `cert_file` and its private key `key_file` (both PEM) and checks that they
/// belong together. Throws std::invalid_argument naming the setting and the file.
void load_identity(boost::asio::ssl::context& ctx, const std::string& cert_file, std::string_view cert_what,
                   const std::string& key_file, std::string_view key_what);

/// Accepts TLS 1.2 and 1.3 only.
void set_modern_protocols(boost::asio::ssl::context& ctx);

/// Why the peer's certificate was refused during the last handshake of the OpenSSL connection `ssl` (an
/// `SSL*`), or empty when it was not (the handshake failed for another reason).
std::string verify_failure(void* ssl);

/// True when verify_failure() was a host name or IP address mismatch.
bool verify_failed_on_name(void* ssl);

/// What a certificate says, for log lines and metrics.
struct certificate_summary {
  bool present = false;  // false: the context has no certificate; the rest is empty
  /// RFC 2253 form, e.g. "CN=localhost".
  std::string subject;
  /// End of validity (notAfter), in seconds since the Unix epoch, and as "2026-12-03T20:30:00Z".
  std::int64_t not_after_seconds = 0;
  std::string not_after;
  /// SHA-256 of the DER certificate, as `openssl x509 -noout -fingerprint -sha256` prints it ("AB:01:...").
  std::string sha256;
};

/// The certificate the OpenSSL context `ssl_ctx` (an `SSL_CTX*`) presents.
certificate_summary describe_certificate(void* ssl_ctx);

}  // namespace baton::tls
