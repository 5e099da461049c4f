#include "tls.hpp"

#include "baton/common/tls_files.hpp"

#include <boost/asio/ssl/context.hpp>

#include <openssl/ssl.h>

#include <stdexcept>

namespace baton::server {
namespace ssl = boost::asio::ssl;

std::shared_ptr<ssl::context> make_server_tls_context(const tls_files& files) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_compression |
                   ssl::context::single_dh_use);
  tls::set_modern_protocols(*ctx);
  tls::load_identity(*ctx, files.cert_file, "--tls-cert", files.key_file, "--tls-key");
  if (!files.client_ca_file.empty()) {
    tls::load_trusted_cas(*ctx, files.client_ca_file, "--tls-client-ca");
    // Tell clients which CAs are accepted, so one holding several certificates picks the right one.
    if (STACK_OF(X509_NAME)* names = ::SSL_load_client_CA_file(files.client_ca_file.c_str()))
      ::SSL_CTX_set_client_CA_list(ctx->native_handle(), names);
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  } else {
    ctx->set_verify_mode(ssl::verify_none);
  }
  return ctx;
}

}  // namespace baton::server
