// SPDX-License-Identifier: Apache-2.0
#include "baton/common/tls_context.hpp"

#include "baton/common/tls_files.hpp"
#include "baton/error.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <ctime>
#include <stdexcept>

namespace baton::detail {
namespace ssl = boost::asio::ssl;

namespace {

// A complete client context from `tls`. Throws baton::exception(error::invalid_config) naming the setting,
// the file and the reason.
std::shared_ptr<ssl::context> build_context(const tls_config& tls) {
  if (tls.cert_file.empty() != tls.key_file.empty())
    throw exception(error::invalid_config, "tls.cert_file and tls.key_file go together");
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  try {
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_compression);
    baton::tls::set_modern_protocols(*ctx);
    if (tls.ca_file.empty()) {
      boost::system::error_code ec;
      ctx->set_default_verify_paths(ec);
      if (ec) throw std::invalid_argument("cannot load the system CA store: " + ec.message());
    } else {
      baton::tls::load_trusted_cas(*ctx, tls.ca_file, "tls.ca_file");
    }
    if (!tls.cert_file.empty())
      baton::tls::load_identity(*ctx, tls.cert_file, "tls.cert_file", tls.key_file, "tls.key_file");
  } catch (const std::invalid_argument& e) {
    throw exception(error::invalid_config, e.what());
  }
  ctx->set_verify_mode(ssl::verify_peer);
  return ctx;
}

// The client certificate `ctx` presents, for the caller's log line; left empty without one.
void describe_certificate(ssl::context& ctx, tls_reload_result& out) {
  auto c = baton::tls::describe_certificate(ctx.native_handle());
  out.subject = std::move(c.subject);
  out.not_after = std::move(c.not_after);
  out.sha256 = std::move(c.sha256);
}

}  // namespace

client_tls::client_tls(tls_config files) : files_(std::move(files)), current_(build_context(files_)) {}

tls_reload_result client_tls::reload(std::optional<tls_config> files) {
  std::lock_guard lock(reload_mu_);
  tls_reload_result out;
  const tls_config& next = files ? *files : files_;
  try {
    auto ctx = build_context(next);
    describe_certificate(*ctx, out);
    current_.store(std::move(ctx));
    if (files) files_ = std::move(*files);
  } catch (const exception& e) {
    out = {};
    out.ec = e.code();
    out.diagnostic = e.diagnostic();
  } catch (const std::exception& e) {
    // OpenSSL refusing to make a context at all (out of memory): reported like a bad file, nothing changed.
    out = {};
    out.ec = error::invalid_config;
    out.diagnostic = std::string("cannot build a TLS context: ") + e.what();
  }
  if (out.ec)
    if (auto still = current_.load()) describe_certificate(*still, out);
  return out;
}

std::shared_ptr<ssl::context> make_client_tls_context(const tls_config& tls) {
  return build_context(tls);
}

std::shared_ptr<client_tls> make_client_tls(const tls_config& tls) {
  return std::make_shared<client_tls>(tls);
}

tls_reload_result reload_client_tls(const std::shared_ptr<client_tls>& tls, std::optional<tls_config> files) {
  if (tls) return tls->reload(std::move(files));
  tls_reload_result out;
  out.ec = error::invalid_config;
  out.diagnostic = "this client does not use TLS (its server_url is neither https:// nor etcds://)";
  return out;
}

std::string set_expected_host(void* handle, const std::string& host) {
  auto* s = static_cast<SSL*>(handle);
  if (host.empty()) return "the URL names no host to check the certificate against";
  // OpenSSL's own checks (rather than a verify callback) leave the reason in the verify result, so a
  // mismatch is reported as a mismatch and not as a generic "certificate verify failed". Every call below
  // can fail; going on after a failure would mean a handshake with no host check at all.
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);  // the same test the connect makes: an address, zone and all
  if (!ec) {
    const std::string address = host.substr(0, host.find('%'));
    if (::X509_VERIFY_PARAM_set1_ip_asc(::SSL_get0_param(s), address.c_str()) != 1)
      return "\"" + address + "\" is not an IP address the certificate check understands";
  } else {
    if (::SSL_set_tlsext_host_name(s, host.c_str()) != 1 || ::SSL_set1_host(s, host.c_str()) != 1)
      return "\"" + host + "\" is not a host name the certificate check understands";
  }
  // A certificate names its hosts in subjectAltName; without this, OpenSSL falls back to the subject's
  // common name when the certificate has no DNS entry (one made for IP addresses only, say).
  ::SSL_set_hostflags(s, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT | X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return {};
}

bool is_tls_error(const boost::system::error_code& ec) {
  return ec.category() == boost::asio::error::get_ssl_category() ||
         ec.category() == ssl::error::get_stream_category();
}

std::string describe_tls_failure(void* ssl, const boost::system::error_code& ec, const std::string& server,
                                 bool during_handshake) {
  if (const std::string why = baton::tls::verify_failure(ssl); !why.empty()) {
    if (baton::tls::verify_failed_on_name(ssl))
      return "the TLS certificate of " + server + " is not valid for this host name (" + why + ")";
    return "the TLS certificate of " + server + " is not trusted: " + why +
           " (trusted CAs: tls.ca_file, or the system store when it is not set)";
  }
  std::string reason = ec.message();
  if (reason.find("alert") != std::string::npos)
    return "the server " + server + " refused the TLS connection: " + reason +
           " (a server that requires a client certificate refuses a missing or unknown one)";
  if (during_handshake)
    return "TLS handshake with " + server + " failed: " + reason +
           " (does the server speak TLS on this port?)";
  return "TLS error with " + server + ": " + reason;
}

}  // namespace baton::detail
