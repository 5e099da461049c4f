// SPDX-License-Identifier: Apache-2.0
#include "tls.hpp"

#include "baton/common/log.hpp"
#include "baton/common/tls_files.hpp"

#include <boost/asio/ssl/context.hpp>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <atomic>
#include <ctime>
#include <mutex>
#include <stdexcept>

namespace baton::server {
namespace ssl = boost::asio::ssl;

namespace {

// What make_server_tls_context() hands out shares ownership of this. `front` is the context every
// connection is created with; it keeps its first identity for its whole life, and a reload never touches
// it. Each reload builds a complete new context instead, and the handshake callback below moves a new
// connection onto the newest one (SSL_set_SSL_CTX, the mechanism servers use to pick a certificate by SNI).
// The connection then holds a reference to that context, so it stays valid for as long as the connection
// lives, whatever reloads follow.
struct reloadable_tls {
  explicit reloadable_tls(tls_files f) : files(std::move(f)) {}
  const tls_files files;
  ssl::context front{ssl::context::tls_server};
  // Null until the first successful reload: until then `front`'s own identity is served. Taken by a copy in
  // every handshake, on whichever worker thread accepted the connection.
  std::atomic<std::shared_ptr<ssl::context>> loaded;
  std::mutex reload_mu;  // one reload at a time; handshakes never take it
};

int holder_index() {
  static const int index = ::SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

reloadable_tls& holder_of(ssl::context& served) {
  auto* self = static_cast<reloadable_tls*>(::SSL_CTX_get_ex_data(served.native_handle(), holder_index()));
  if (!self) throw std::logic_error("not a context made by make_server_tls_context()");
  return *self;
}

// Everything a server context needs from the files. Throws std::invalid_argument naming the flag and file.
void configure(ssl::context& ctx, const tls_files& files) {
  ctx.set_options(ssl::context::default_workarounds | ssl::context::no_compression |
                  ssl::context::single_dh_use);
  tls::set_modern_protocols(ctx);
  tls::load_identity(ctx, files.cert_file, "--tls-cert", files.key_file, "--tls-key");
  if (!files.client_ca_file.empty()) {
    tls::load_trusted_cas(ctx, files.client_ca_file, "--tls-client-ca");
    // Tell clients which CAs are accepted, so one holding several certificates picks the right one.
    if (STACK_OF(X509_NAME)* names = ::SSL_load_client_CA_file(files.client_ca_file.c_str()))
      ::SSL_CTX_set_client_CA_list(ctx.native_handle(), names);
    ctx.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  } else {
    ctx.set_verify_mode(ssl::verify_none);
  }
}

// Called first thing in a handshake, before the server picks its certificate or asks for the client's.
int on_client_hello(SSL* connection, int* alert, void* arg) {
  const auto next = static_cast<reloadable_tls*>(arg)->loaded.load();
  if (!next || ::SSL_get_SSL_CTX(connection) == next->native_handle()) return SSL_CLIENT_HELLO_SUCCESS;
  // Takes the certificate and key of `next` and a reference to it; the trusted client CAs and the CA names
  // of a certificate request are read from the connection's context when they are needed, so they are
  // `next`'s too (a connection has no list of its own unless one is set on it).
  if (::SSL_set_SSL_CTX(connection, next->native_handle()) != next->native_handle()) {
    *alert = SSL_AD_INTERNAL_ERROR;
    return SSL_CLIENT_HELLO_ERROR;
  }
  return SSL_CLIENT_HELLO_SUCCESS;
}

tls_certificate_info describe(SSL_CTX* ctx, const std::string& file,
                              std::chrono::system_clock::time_point now) {
  tls_certificate_info out;
  out.file = file;
  auto c = baton::tls::describe_certificate(ctx);
  if (!c.present) return out;
  out.subject = std::move(c.subject);
  out.not_after_seconds = c.not_after_seconds;
  out.not_after = std::move(c.not_after);
  out.sha256 = std::move(c.sha256);
  out.expired = !out.not_after.empty() &&
                std::chrono::system_clock::to_time_t(now) > static_cast<std::time_t>(out.not_after_seconds);
  return out;
}

}  // namespace

std::shared_ptr<ssl::context> make_server_tls_context(const tls_files& files) {
  auto self = std::make_shared<reloadable_tls>(files);
  configure(self->front, files);
  ::SSL_CTX_set_ex_data(self->front.native_handle(), holder_index(), self.get());
  ::SSL_CTX_set_client_hello_cb(self->front.native_handle(), on_client_hello, self.get());
  return std::shared_ptr<ssl::context>(self, &self->front);
}

tls_reload_result reload_server_tls(ssl::context& served, std::chrono::system_clock::time_point now) {
  auto& self = holder_of(served);
  std::lock_guard lock(self.reload_mu);
  tls_reload_result out;
  try {
    auto next = std::make_shared<ssl::context>(ssl::context::tls_server);
    configure(*next, self.files);
    out.certificate = describe(next->native_handle(), self.files.cert_file, now);
    self.loaded.store(std::move(next));
  } catch (const std::invalid_argument& e) {
    out.error = e.what();
    out.certificate = served_certificate(served, now);
  }
  return out;
}

tls_certificate_info served_certificate(ssl::context& served, std::chrono::system_clock::time_point now) {
  auto& self = holder_of(served);
  const auto loaded = self.loaded.load();
  return describe(loaded ? loaded->native_handle() : self.front.native_handle(), self.files.cert_file, now);
}

void log_certificate(std::string_view event, const tls_certificate_info& c) {
  log::info(event,
            {{"file", c.file}, {"subject", c.subject}, {"not_after", c.not_after}, {"sha256", c.sha256}});
  if (c.expired)
    log::warn("tls_certificate_expired",
              {{"file", c.file},
               {"not_after", c.not_after},
               {"effect", "served all the same; clients that check validity refuse the connection"}});
}

}  // namespace baton::server
