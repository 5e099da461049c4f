// SPDX-License-Identifier: Apache-2.0
#pragma once
// batond's TLS settings (--tls-cert, --tls-key, --tls-client-ca), the OpenSSL context built from them, and
// their reload on SIGHUP. Only the server's connection code includes the Asio SSL headers; this header
// forward-declares the context.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

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

/// The leaf certificate a server context presents, for the log and the metrics.
struct tls_certificate_info {
  /// The certificate chain file it was read from.
  std::string file;
  /// RFC 2253 form, e.g. "CN=localhost".
  std::string subject;
  /// End of validity (notAfter), in seconds since the Unix epoch, and as "2026-12-03T20:30:00Z".
  std::int64_t not_after_seconds = 0;
  std::string not_after;
  /// SHA-256 of the DER certificate, as `openssl x509 -noout -fingerprint -sha256` prints it ("AB:01:...").
  std::string sha256;
  /// notAfter is before the `now` it was described at: clients that check validity will refuse it.
  bool expired = false;
};

/// Loads the files (TLS 1.2 and 1.3 only). Throws std::invalid_argument naming the flag, the file and the
/// reason. The context returned is the one every connection is created with for the life of the process;
/// at the start of each handshake it hands the connection the certificate, key and client CAs loaded last
/// (see reload_server_tls()), so a connection keeps what it began its handshake with.
std::shared_ptr<boost::asio::ssl::context> make_server_tls_context(const tls_files& files);

/// What reload_server_tls() did.
struct tls_reload_result {
  /// Empty on success; otherwise `<flag> "<file>": <reason>`, and nothing changed.
  std::string error;
  /// The certificate new connections get from now on (on failure: the one they still get).
  tls_certificate_info certificate;
  bool ok() const { return error.empty(); }
};

/// Reads the files of `served` (a context made by make_server_tls_context()) again into a new context and,
/// once everything loaded and the key belongs to the certificate, makes it the one new handshakes use.
/// Connections whose handshake already read the client's hello keep the old one. On any failure (a missing
/// or unreadable file, a file that is not PEM, a key of another certificate) `served` goes on with what it
/// had. An expired certificate is loaded: `certificate.expired` says so. `now` decides expiry. A context
/// made otherwise is a std::logic_error. Thread-safe, also against handshakes on other threads; reloads are
/// serialized.
tls_reload_result reload_server_tls(boost::asio::ssl::context& served,
                                    std::chrono::system_clock::time_point now);

/// The certificate new connections to `served` get now.
tls_certificate_info served_certificate(boost::asio::ssl::context& served,
                                        std::chrono::system_clock::time_point now);

/// One info line `event` with the certificate's file, subject, notAfter and fingerprint; when it has
/// expired, a warn line `tls_certificate_expired` as well (it is served all the same: replacing it is the
/// operator's decision, and refusing every connection would not make it valid).
void log_certificate(std::string_view event, const tls_certificate_info& certificate);

}  // namespace baton::server
