// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE listen_address
#include <boost/test/unit_test.hpp>

// batond's --listen and the agent's listen and metrics_listen: one rule (baton/common/listen_address.hpp).

#include "baton/common/listen_address.hpp"

#include <stdexcept>
#include <string>

using baton::parse_listen;
using baton::to_listen_string;
using boost::asio::ip::make_address;

namespace {

std::string error_of(std::string_view text) {
  try {
    const auto endpoint = parse_listen(text);
    return "accepted as " + to_listen_string(endpoint);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_address_bind_accepts_and_its_port) {
  const auto v4 = parse_listen("0.0.0.0:7071");
  BOOST_TEST(v4.address() == make_address("0.0.0.0"));
  BOOST_TEST(v4.port() == 7071);
  BOOST_TEST(parse_listen("127.0.0.1:0").port() == 0);  // any free port
  BOOST_TEST(parse_listen("localhost:0").address() == make_address("127.0.0.1"));
  const auto v6 = parse_listen("[::1]:65535");
  BOOST_TEST(v6.address() == make_address("::1"));
  BOOST_TEST(v6.port() == 65535);
  BOOST_TEST(parse_listen("[::]:1").address().is_v6());
  BOOST_TEST(parse_listen("[fe80::1:2]:80").address() == make_address("fe80::1:2"));
}

BOOST_AUTO_TEST_CASE(written_back_the_way_it_is_read_brackets_included) {
  BOOST_TEST(to_listen_string(parse_listen("[::1]:7071")) == "[::1]:7071");
  BOOST_TEST(to_listen_string(parse_listen("localhost:80")) == "127.0.0.1:80");
  BOOST_TEST(to_listen_string(parse_listen("10.1.2.3:7070")) == "10.1.2.3:7070");
}

// In ::1:7070 the last colon may be the port's or the address's: refused, naming what to write instead.
BOOST_AUTO_TEST_CASE(an_ipv6_address_without_brackets_is_refused_with_the_bracketed_form) {
  BOOST_TEST(error_of("::1:7070") == "an IPv6 address needs brackets: [::1]:7070");
  BOOST_TEST(error_of("fe80::1:80") == "an IPv6 address needs brackets: [fe80::1]:80");
  BOOST_TEST(error_of("::") == "an IPv6 address needs brackets: [address]:port, e.g. [::1]:7071");
  BOOST_TEST(error_of("::1") == "an IPv6 address needs brackets: [address]:port, e.g. [::1]:7071");
}

BOOST_AUTO_TEST_CASE(every_other_bad_address_is_refused_with_its_reason) {
  BOOST_TEST(error_of("7071") == "expected host:port, got \"7071\"");
  BOOST_TEST(error_of("") == "expected host:port, got \"\"");
  BOOST_TEST(error_of(":7071") == "no host in \":7071\" (0.0.0.0 listens on every IPv4 address)");
  BOOST_TEST(error_of("[::1]") == "expected [address]:port for IPv6, e.g. [::1]:7071");
  BOOST_TEST(error_of("[]:7071") == "expected [address]:port for IPv6, e.g. [::1]:7071");
  for (std::string_view port :
       {"127.0.0.1:70000", "127.0.0.1:", "127.0.0.1:-1", "127.0.0.1:80x", "[::1]:000080"})
    BOOST_TEST(error_of(port) == "the port in \"" + std::string(port) + "\" must be a number from 0 to 65535",
               port);
  // bind() takes an address: a host name would pass a configuration check and then fail at start.
  BOOST_TEST(error_of("myhost:7071") ==
             "\"myhost\" is not an IP address; listen takes an address (127.0.0.1, "
             "0.0.0.0, [::1]) or localhost, not a host name");
  BOOST_TEST(error_of("10.0.0:7071").starts_with("\"10.0.0\" is not an IP address"));
  BOOST_TEST(error_of("[127.0.0.1]:7071") == "\"127.0.0.1\" is not an IPv6 address");
  BOOST_TEST(error_of("[localhost]:7071") == "\"localhost\" is not an IPv6 address");
}
