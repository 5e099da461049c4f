// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE key_spelling
#include <boost/test/unit_test.hpp>

// How a lock key reaches the server, byte for byte: the etcd backend's prefix rule (one spelling per prefix,
// whether the URL ends with '/' or not) and the HTTP backend's path encoding of the keys `.` and `..`, which
// proxies and HTTP libraries would otherwise take for dot segments (docs/protocol.md). test_etcd_cluster
// checks the prefix rule against etcd: two clients spelling the prefix both ways exclude each other.

#include "etcd_prefix.hpp"
#include "recording_server.hpp"

#include "baton/backend.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

using namespace std::chrono_literals;
namespace asio = boost::asio;

BOOST_AUTO_TEST_CASE(etcd_prefix_with_or_without_its_trailing_slash_names_the_same_keys) {
  using baton::detail::etcd_key_prefix;
  // Before: `baton/locks` gave `baton/locksK`, next to the default's `baton/locks/K`.
  BOOST_TEST(etcd_key_prefix("baton/locks") == "baton/locks/");
  BOOST_TEST(etcd_key_prefix("baton/locks/") == "baton/locks/");
  BOOST_TEST(etcd_key_prefix("") == "baton/locks/");  // etcd://h and etcd://h/: the default
  BOOST_TEST(etcd_key_prefix("team-a") == "team-a/");
  // A prefix that already ends with '/' is kept as written: keys stored under it stay where they are.
  BOOST_TEST(etcd_key_prefix("a//") == "a//");
  BOOST_TEST(etcd_key_prefix("/registry/locks/") == "/registry/locks/");
}

namespace {

// The requests one call of each kind on `key` puts on the wire, through the HTTP backend.
std::vector<std::string> targets_for(const std::string& key) {
  // One body that every operation reads as success (acquire's token, get's token and remaining TTL).
  baton::test::recording_server server(200, R"({"key":"k","owner":"o","token":7,"ttl_ms":1000,)"
                                            R"("ttl_remaining_ms":1000,"released":true})");
  asio::io_context ioc;
  baton::client_config config;
  config.server_url = server.url();
  auto b = baton::make_backend(ioc.get_executor(), config);
  auto done = asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        BOOST_TEST(!(co_await b->acquire(key, "o", 1000ms, {}, 2000ms)).ec);
        BOOST_TEST(!(co_await b->renew(key, "o", 7, 1000ms, 2000ms)).ec);
        BOOST_TEST(!(co_await b->get(key, std::nullopt, 2000ms)).ec);
        BOOST_TEST(!(co_await b->release(key, "o", 7, 2000ms)).ec);
        b->close();
      },
      asio::use_future);
  ioc.run();
  done.get();
  return server.requests();
}

}  // namespace

BOOST_AUTO_TEST_CASE(keys_that_are_dot_segments_travel_percent_encoded) {
  // Before: `/v1/locks/../acquire`, which a normalising proxy turns into `/v1/acquire`.
  const std::vector<std::string> dotdot{"POST /v1/locks/%2E%2E/acquire", "POST /v1/locks/%2E%2E/renew",
                                        "GET /v1/locks/%2E%2E", "POST /v1/locks/%2E%2E/release"};
  BOOST_TEST(targets_for("..") == dotdot, boost::test_tools::per_element());
  const std::vector<std::string> dot{"POST /v1/locks/%2E/acquire", "POST /v1/locks/%2E/renew",
                                     "GET /v1/locks/%2E", "POST /v1/locks/%2E/release"};
  BOOST_TEST(targets_for(".") == dot, boost::test_tools::per_element());
  // Dots inside a longer key are no dot segment and stay as they are; '/' and '%' are always encoded.
  BOOST_TEST(targets_for("...").front() == "POST /v1/locks/.../acquire");
  BOOST_TEST(targets_for("a/../b").front() == "POST /v1/locks/a%2F..%2Fb/acquire");
  BOOST_TEST(targets_for("50%").front() == "POST /v1/locks/50%25/acquire");
}
