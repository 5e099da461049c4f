// SPDX-License-Identifier: Apache-2.0
#include "baton/common/tls_files.hpp"

#include <boost/asio/ssl/context.hpp>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>

namespace baton::tls {
namespace {

[[noreturn]] void fail(std::string_view what, const std::string& file, const std::string& reason) {
  throw std::invalid_argument(std::string(what) + " \"" + file + "\": " + reason);
}

// OpenSSL's own messages for a missing file are "system library" noise: check readability first.
void require_readable(std::string_view what, const std::string& file) {
  if (file.empty()) throw std::invalid_argument(std::string(what) + " must not be empty");
  std::ifstream in(file);
  if (!in) fail(what, file, std::string("cannot read: ") + std::strerror(errno));
}

// The most specific reason OpenSSL queued for the failed call, then an empty queue for the next one.
std::string openssl_reason(const boost::system::error_code& ec) {
  unsigned long last = 0;
  while (unsigned long e = ::ERR_get_error())
    last = e;
  if (last != 0) {
    if (const char* r = ::ERR_reason_error_string(last)) return r;
  }
  return ec.message();
}

}  // namespace

void load_trusted_cas(boost::asio::ssl::context& ctx, const std::string& file, std::string_view what) {
  require_readable(what, file);
  ::ERR_clear_error();
  boost::system::error_code ec;
  ctx.load_verify_file(file, ec);
  if (ec) fail(what, file, "not a PEM CA certificate bundle: " + openssl_reason(ec));
}

void load_identity(boost::asio::ssl::context& ctx, const std::string& cert_file, std::string_view cert_what,
                   const std::string& key_file, std::string_view key_what) {
  require_readable(cert_what, cert_file);
  require_readable(key_what, key_file);
  ::ERR_clear_error();
  boost::system::error_code ec;
  ctx.use_certificate_chain_file(cert_file, ec);
  if (ec) fail(cert_what, cert_file, "not a PEM certificate chain: " + openssl_reason(ec));
  ctx.use_private_key_file(key_file, boost::asio::ssl::context::pem, ec);
  if (ec) fail(key_what, key_file, "not a PEM private key matching the certificate: " + openssl_reason(ec));
  if (::SSL_CTX_check_private_key(ctx.native_handle()) != 1)
    fail(key_what, key_file, "does not belong to the certificate in \"" + cert_file + "\"");
}

void set_modern_protocols(boost::asio::ssl::context& ctx) {
  ::SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
}

std::string verify_failure(void* ssl) {
  if (!ssl) return {};
  long result = ::SSL_get_verify_result(static_cast<SSL*>(ssl));
  if (result == X509_V_OK) return {};
  return ::X509_verify_cert_error_string(result);
}

bool verify_failed_on_name(void* ssl) {
  if (!ssl) return false;
  long result = ::SSL_get_verify_result(static_cast<SSL*>(ssl));
  return result == X509_V_ERR_HOSTNAME_MISMATCH || result == X509_V_ERR_IP_ADDRESS_MISMATCH;
}

certificate_summary describe_certificate(void* ssl_ctx) {
  certificate_summary out;
  X509* cert = ssl_ctx ? ::SSL_CTX_get0_certificate(static_cast<SSL_CTX*>(ssl_ctx)) : nullptr;
  if (!cert) return out;
  out.present = true;
  if (BIO* bio = ::BIO_new(::BIO_s_mem())) {
    if (::X509_NAME_print_ex(bio, ::X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) >= 0) {
      char* data = nullptr;
      const long n = BIO_get_mem_data(bio, &data);
      if (n > 0) out.subject.assign(data, static_cast<std::size_t>(n));
    }
    ::BIO_free(bio);
  }
  std::tm tm{};
  if (::ASN1_TIME_to_tm(::X509_get0_notAfter(cert), &tm) == 1) {
    out.not_after_seconds = static_cast<std::int64_t>(::timegm(&tm));
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    out.not_after = text;
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (::X509_digest(cert, ::EVP_sha256(), digest, &length) == 1) {
    static constexpr char hex[] = "0123456789ABCDEF";
    for (unsigned int i = 0; i < length; ++i) {
      if (i != 0) out.sha256 += ':';
      out.sha256 += hex[digest[i] >> 4];
      out.sha256 += hex[digest[i] & 0xF];
    }
  }
  return out;
}

}  // namespace baton::tls
