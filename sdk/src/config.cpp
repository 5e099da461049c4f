// SPDX-License-Identifier: Apache-2.0
#include "baton/config.hpp"

#include "baton/error.hpp"

#include <boost/url/parse.hpp>

#include <unistd.h>

namespace baton {
namespace {
[[noreturn]] void invalid(const std::string& what) {
  throw exception(error::invalid_config, what);
}
}  // namespace

std::string default_identity() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
    std::snprintf(host, sizeof host, "unknown");
  return std::string(host) + ":" + std::to_string(::getpid());
}

bool uses_tls(std::string_view server_url) {
  return server_url.rfind("https://", 0) == 0 || server_url.rfind("etcds://", 0) == 0;
}

std::string without_credentials(std::string_view text) {
  std::string out;
  std::size_t done = 0;
  for (auto scheme = text.find("://"); scheme != std::string_view::npos; scheme = text.find("://", done)) {
    const auto start = scheme + 3;
    const auto at = text.substr(start, text.find('/', start) - start).rfind('@');
    out.append(text.substr(done, start - done));
    done = start;
    if (at == std::string_view::npos) continue;
    out += "***";
    done = start + at;
  }
  out.append(text.substr(done));
  return out;
}

void client_config::validate() const {
  // Every message quotes the URL without its credentials: an etcd URL may hold a password.
  const std::string shown = without_credentials(server_url);
  if (server_url.rfind("etcd://", 0) == 0 || server_url.rfind("etcds://", 0) == 0) {
    // etcd://host:port[,host:port...][/key/prefix/]: several members do not fit a URL authority, so the
    // backend parses it; here only that it names something.
    auto start = server_url.find("://") + 3;
    // Credentials (user:password@) come before the first member, as the backend reads them.
    if (auto at = server_url.substr(start, server_url.find('/', start) - start).rfind('@');
        at != std::string::npos)
      start += at + 1;
    if (server_url.size() == start || server_url[start] == '/')
      invalid("server_url \"" + shown + "\" names no etcd endpoint");
  } else {
    // "127.0.0.1:7070" and "localhost:7070": a host and port without a scheme (Boost.URL would say
    // "mismatch", or read "localhost" as the scheme).
    if (server_url.find("://") == std::string::npos)
      invalid("server_url \"" + shown + "\" has no scheme: write http://" + shown +
              " (or https://, etcd://, etcds://)");
    auto u = boost::urls::parse_absolute_uri(server_url);
    if (!u) {
      // RFC 3986 has no zone in an IPv6 literal and Boost.URL follows it; say so rather than "mismatch".
      const auto bracket = server_url.find('[');
      if (bracket != std::string::npos && server_url.find('%', bracket) < server_url.find(']', bracket))
        invalid(
            "server_url \"" + shown +
            "\": a scoped IPv6 address ([address%zone]) is not supported by http:// and https:// (etcd:// "
            "and etcds:// take one)");
      invalid("server_url \"" + shown + "\" is not a URL: " + u.error().message());
    }
    if (u->scheme() != "http" && u->scheme() != "https")
      invalid("server_url \"" + shown + "\" must start with http://, https://, etcd:// or etcds://");
    if (!u->has_authority() || u->host().empty()) invalid("server_url \"" + shown + "\" has no host");
  }
  if (!etcd_password_file.empty()) {
    if (server_url.rfind("etcd://", 0) != 0 && server_url.rfind("etcds://", 0) != 0)
      invalid("etcd_password_file needs an etcd:// or etcds:// server_url, got \"" + shown + "\"");
    const auto start = server_url.find("://") + 3;
    const auto authority = server_url.substr(start, server_url.find('/', start) - start);
    const auto at = authority.rfind('@');
    if (at == std::string::npos || at == 0)
      invalid("etcd_password_file needs a user in server_url (etcd://user@host:port), got \"" + shown + "\"");
    if (authority.substr(0, at).find(':') != std::string::npos)
      invalid("server_url holds a password and etcd_password_file is set: give the password once");
  }
  // Certificates with a plain URL would look like protection that is not there.
  if (!tls.empty() && !uses_tls(server_url))
    invalid("tls settings need an https:// or etcds:// server_url, got \"" + shown + "\"");
  if (tls.cert_file.empty() != tls.key_file.empty()) invalid("tls.cert_file and tls.key_file go together");
  if (request_timeout.count() <= 0) invalid("request_timeout must be positive");
  if (renew_batch_window && (renew_batch_window->count() < 0 || *renew_batch_window > request_timeout / 4))
    invalid("renew_batch_window must be between 0 and request_timeout / 4");
  if (retry.initial_backoff.count() <= 0 || retry.max_backoff < retry.initial_backoff)
    invalid("retry backoff must be positive and max_backoff >= initial_backoff");
  if (retry.jitter < 0 || retry.jitter > 1) invalid("retry jitter must be within [0, 1]");
  if (retry.max_attempts < 1) invalid("retry max_attempts must be at least 1");
  if (max_connections < 1) invalid("max_connections must be at least 1");
  // Checked without echoing the value: a token never appears in an error message.
  for (unsigned char c : bearer_token)
    if (c <= 0x20 || c == 0x7f) invalid("bearer_token must not contain spaces or control characters");
  if (has_control_characters(identity) || identity.size() > 200)
    invalid("identity must be at most 200 bytes without control characters");
}

bool has_control_characters(std::string_view text) noexcept {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x20 || b == 0x7f) return true;
    if (b == 0xc2 && i + 1 < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9f) return true;
    }
  }
  return false;
}

void lease_options::validate() const {
  if (ttl.count() <= 0) invalid("ttl must be positive");
  if (jitter < 0 || jitter >= 1) invalid("jitter must be within [0, 1)");
  if (safety_margin.count() < 0 || effective_safety_margin() >= ttl)
    invalid("safety_margin must be below ttl");
  auto longest_period = std::chrono::duration<double, std::milli>(effective_renew_every()) * (1 + jitter);
  if (renew_every.count() < 0 || longest_period >= ttl - effective_safety_margin())
    invalid(
        "renew_every (with jitter) must leave time to renew before the local deadline (ttl - safety_margin)");
  if (owner.too_long()) invalid("owner must be at most 256 bytes (got " + std::to_string(owner.size()) + ")");
  if (has_control_characters(owner)) invalid("owner must not contain control characters (C0, DEL or C1)");
  if (value.too_long())
    invalid("value must be at most 1024 bytes (got " + std::to_string(value.size()) + ")");
  if (has_control_characters(value)) invalid("value must not contain control characters (C0, DEL or C1)");
  if (lock_delay.count() < 0) invalid("lock_delay must not be negative");
}

}  // namespace baton
