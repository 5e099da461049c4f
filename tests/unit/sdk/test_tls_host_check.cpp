// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE tls_host_check
#include <boost/test/unit_test.hpp>

// set_expected_host: what a TLS connection is told to check the server's certificate against, for every form
// of host, and that it says so when the check cannot be set up (the caller then refuses the connection).

#include "baton/common/tls_context.hpp"

#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>

using baton::detail::set_expected_host;

namespace {

struct connection {
  std::unique_ptr<SSL_CTX, decltype(&::SSL_CTX_free)> ctx{::SSL_CTX_new(::TLS_client_method()),
                                                          &::SSL_CTX_free};
  std::unique_ptr<SSL, decltype(&::SSL_free)> ssl{::SSL_new(ctx.get()), &::SSL_free};
  X509_VERIFY_PARAM* param() { return ::SSL_get0_param(ssl.get()); }
  std::string ip() {
    char* text = ::X509_VERIFY_PARAM_get1_ip_asc(param());
    std::string out = text ? text : "";
    ::OPENSSL_free(text);
    return out;
  }
  std::string dns_name() {
    const char* name = ::X509_VERIFY_PARAM_get0_host(param(), 0);
    return name ? name : "";
  }
  std::string sni() {
    const char* name = ::SSL_get_servername(ssl.get(), TLSEXT_NAMETYPE_host_name);
    return name ? name : "";
  }
  unsigned int flags() { return ::X509_VERIFY_PARAM_get_hostflags(param()); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(ip_addresses_are_checked_as_addresses_without_sni) {
  for (const std::string host : {"127.0.0.1", "::1"}) {
    connection c;
    BOOST_TEST(set_expected_host(c.ssl.get(), host) == "");
    BOOST_TEST(c.ip() == (host == "::1" ? "0:0:0:0:0:0:0:1" : host));
    BOOST_TEST(c.dns_name() == "");
    BOOST_TEST(c.sni() == "");
  }
}

BOOST_AUTO_TEST_CASE(a_scoped_ipv6_address_is_checked_without_its_zone) {
  for (const std::string host : {"::1%lo", "fe80::1%1"}) {
    connection c;
    BOOST_TEST(set_expected_host(c.ssl.get(), host) == "");
    BOOST_TEST(c.ip() == (host == "::1%lo" ? "0:0:0:0:0:0:0:1" : "FE80:0:0:0:0:0:0:1"), host);
  }
}

BOOST_AUTO_TEST_CASE(names_are_checked_as_dns_names_and_sent_as_sni) {
  for (const std::string host : {"localhost", "etcd-0.etcd.svc"}) {
    connection c;
    BOOST_TEST(set_expected_host(c.ssl.get(), host) == "");
    BOOST_TEST(c.dns_name() == host);
    BOOST_TEST(c.sni() == host);
    BOOST_TEST(c.ip() == "");
  }
}

BOOST_AUTO_TEST_CASE(the_common_name_is_never_consulted) {
  connection c;
  BOOST_TEST(set_expected_host(c.ssl.get(), "localhost") == "");
  BOOST_TEST((c.flags() & X509_CHECK_FLAG_NEVER_CHECK_SUBJECT) != 0u);
}

BOOST_AUTO_TEST_CASE(a_host_the_check_cannot_take_is_refused_rather_than_left_unchecked) {
  connection empty;
  BOOST_TEST(set_expected_host(empty.ssl.get(), "") != "");
  // Longer than a server name may be (255 bytes): OpenSSL refuses it as SNI.
  connection too_long;
  const std::string name(300, 'a');
  BOOST_TEST(set_expected_host(too_long.ssl.get(), name).find("not a host name") != std::string::npos);
}
