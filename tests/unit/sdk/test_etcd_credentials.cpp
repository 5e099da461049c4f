// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE etcd_credentials
#include <boost/test/unit_test.hpp>

// How the etcd backend takes its user's password: percent-decoded from the URL, or read from
// etcd_password_file; every mistake is error::invalid_config when the client is made, before any request,
// and no message shows the password. test_etcd_backend checks the decoded password against a real etcd.

#include "baton/client.hpp"
#include "baton/config.hpp"
#include "baton/error.hpp"

#include <boost/asio/io_context.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

struct scratch_file {
  std::filesystem::path path;
  explicit scratch_file(const std::string& content) {
    path = std::filesystem::temp_directory_path() /
           ("baton-etcd-password-" + std::to_string(::getpid()) + "-" + std::to_string(++made));
    std::ofstream(path, std::ios::binary) << content;
  }
  ~scratch_file() { std::filesystem::remove(path); }
  static inline int made = 0;
};

// The message making a client with `url` (and `password_file`) is refused with; empty when it is made.
std::string refusal(const std::string& url, const std::string& password_file = {}) {
  baton::client_config c;
  c.server_url = url;
  c.etcd_password_file = password_file;
  boost::asio::io_context ioc;
  try {
    baton::client made(ioc.get_executor(), c);
  } catch (const baton::exception& e) {
    BOOST_TEST((e.code() == baton::error::invalid_config), e.code().message());
    return e.diagnostic();
  }
  return {};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_percent_encoded_url_password_is_accepted_and_a_broken_escape_is_refused_unquoted) {
  BOOST_TEST(refusal("etcd://root:p%40ss%2Fw%3Ard@127.0.0.1:2379") == "");
  BOOST_TEST(refusal("etcd://ro%6Ft:plain@127.0.0.1:2379") == "");
  for (const std::string bad : {"etcd://root:pw%4@127.0.0.1:2379", "etcd://root:pw%zz1@127.0.0.1:2379",
                                "etcd://root:pw%@127.0.0.1:2379"}) {
    BOOST_TEST_CONTEXT(bad) {
      const auto why = refusal(bad);
      BOOST_TEST(contains(why, "the password has a '%' that is not followed by two hex digits"), why);
      BOOST_TEST(!contains(why, "pw%"), why);
    }
  }
  BOOST_TEST(contains(refusal("etcd://r%g0:pw@127.0.0.1:2379"), "the user has a '%'"));
}

BOOST_AUTO_TEST_CASE(a_password_file_goes_with_a_user_and_no_url_password) {
  scratch_file good("s3cret\n");
  BOOST_TEST(refusal("etcd://root@127.0.0.1:2379", good.path.string()) == "");
  BOOST_TEST(refusal("etcds://root@127.0.0.1:2379/my/prefix/", good.path.string()) == "");
  BOOST_TEST(contains(refusal("etcd://root:other@127.0.0.1:2379", good.path.string()),
                      "server_url holds a password and etcd_password_file is set"));
  BOOST_TEST(contains(refusal("etcd://127.0.0.1:2379", good.path.string()),
                      "etcd_password_file needs a user in server_url"));
  BOOST_TEST(contains(refusal("http://127.0.0.1:7070", good.path.string()),
                      "etcd_password_file needs an etcd:// or etcds:// server_url"));
  // Without the file a user alone is not enough.
  BOOST_TEST(
      contains(refusal("etcd://root@127.0.0.1:2379"), "user:password@ (or user@ with etcd_password_file)"));
}

BOOST_AUTO_TEST_CASE(an_unreadable_or_empty_password_file_is_named_and_its_content_never_shown) {
  const std::string missing = "/nonexistent/etcd-password";
  BOOST_TEST(refusal("etcd://root@127.0.0.1:2379", missing) ==
             "etcd_password_file \"" + missing + "\": cannot read: No such file or directory");
  for (const std::string text : {"", "\n", "\r\n"}) {
    scratch_file empty(text);
    BOOST_TEST(refusal("etcd://root@127.0.0.1:2379", empty.path.string()) ==
               "etcd_password_file \"" + empty.path.string() + "\": the file is empty");
  }
  // A directory opens but cannot be read.
  const auto dir = std::filesystem::temp_directory_path().string();
  BOOST_TEST(contains(refusal("etcd://root@127.0.0.1:2379", dir), "cannot read"));
}
