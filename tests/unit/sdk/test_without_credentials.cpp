// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE without_credentials
#include <boost/test/unit_test.hpp>

// The SDK never shows a URL's password: without_credentials() on its own, and the configuration errors that
// quote the server URL.

#include "baton/config.hpp"
#include "baton/error.hpp"

#include <string>

using baton::without_credentials;

namespace {

const std::string password = "s3cret-pw";

// The message validate() refuses `cfg` with (empty if it does not).
std::string refusal(const baton::client_config& cfg) {
  try {
    cfg.validate();
  } catch (const baton::exception& e) {
    return e.diagnostic();
  }
  return {};
}

}  // namespace

BOOST_AUTO_TEST_CASE(credentials_of_a_url_are_replaced_and_everything_else_kept) {
  BOOST_TEST(without_credentials("etcd://user:" + password + "@10.0.0.1:2379,10.0.0.2:2379/prefix/") ==
             "etcd://***@10.0.0.1:2379,10.0.0.2:2379/prefix/");
  BOOST_TEST(without_credentials("etcds://user:" + password + "@[::1%lo]:2379") ==
             "etcds://***@[::1%lo]:2379");
  BOOST_TEST(without_credentials("https://user:" + password + "@batond:7443") == "https://***@batond:7443");
  BOOST_TEST(without_credentials("http://127.0.0.1:7070") == "http://127.0.0.1:7070");
  // An '@' in the path is not a credential.
  BOOST_TEST(without_credentials("http://127.0.0.1:7070/a@b") == "http://127.0.0.1:7070/a@b");
  BOOST_TEST(without_credentials("") == "");
  BOOST_TEST(without_credentials("no URL here, user@host") == "no URL here, user@host");
}

BOOST_AUTO_TEST_CASE(credentials_of_every_url_quoted_in_a_message_are_replaced) {
  BOOST_TEST(without_credentials("server_url \"etcd://u:" + password + "@h:2379\" names no etcd endpoint") ==
             "server_url \"etcd://***@h:2379\" names no etcd endpoint");
  BOOST_TEST(
      without_credentials("unknown option --server=etcd://u:" + password + "@h:1 (see baton --help)") ==
      "unknown option --server=etcd://***@h:1 (see baton --help)");
  BOOST_TEST(without_credentials("from etcd://a:" + password + "@h:1/p/ to https://b:" + password +
                                 "@g:2/") == "from etcd://***@h:1/p/ to https://***@g:2/");
}

BOOST_AUTO_TEST_CASE(configuration_errors_quote_the_server_url_without_its_password) {
  const std::vector<std::string> refused_urls{
      "etcd://user:" + password + "@h:2379",         // with tls settings below: needs etcds://
      "ftp://user:" + password + "@h:2379",          // not a scheme the SDK speaks
      "http://user:" + password + "@[::1%lo]:7070",  // a zone in an http:// URL
      "http://user:" + password + "@h:7070 x",       // not a URL
  };
  for (const auto& url : refused_urls) {
    BOOST_TEST_CONTEXT(url) {
      baton::client_config cfg;
      cfg.server_url = url;
      cfg.tls.ca_file = url.rfind("etcd://", 0) == 0 ? "/etc/ssl/ca.pem" : "";
      const std::string message = refusal(cfg);
      BOOST_TEST(!message.empty());
      BOOST_TEST(message.find(password) == std::string::npos, message);
      BOOST_TEST(message.find("***@") != std::string::npos, message);
    }
  }
}

BOOST_AUTO_TEST_CASE(an_etcd_url_with_credentials_but_no_member_is_refused) {
  for (const std::string& url : {"etcd://user:" + password + "@", "etcds://user:" + password + "@/prefix/"}) {
    baton::client_config cfg;
    cfg.server_url = url;
    const std::string message = refusal(cfg);
    BOOST_TEST(message.find("names no etcd endpoint") != std::string::npos, url << ": " << message);
    BOOST_TEST(message.find(password) == std::string::npos, message);
  }
}
