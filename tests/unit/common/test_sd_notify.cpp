// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE sd_notify
#include <boost/test/unit_test.hpp>

#include "baton/common/log.hpp"
#include "baton/common/sd_notify.hpp"
#include "notify_listener.hpp"
#include "temp_dir.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

using namespace std::chrono_literals;
using baton::test::notify_listener;
using baton::test::temp_dir;
namespace sd = baton::sd_notify;

namespace {

// What the log facility wrote while `run` ran.
template <class F>
std::string logged_while(F run) {
  temp_dir dir;
  const auto path = dir.path() / "log";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot open " + path.string());
  baton::log::set_output(fd);
  run();
  baton::log::set_output(STDERR_FILENO);
  ::close(fd);
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_message_reaches_a_socket_named_by_path) {
  temp_dir dir;
  const auto path = (dir.path() / "notify").string();
  notify_listener listener(path);
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  sd::notify("READY=1\nSTATUS=serving");
  ::unsetenv("NOTIFY_SOCKET");
  BOOST_TEST(listener.receive(5s) == "READY=1\nSTATUS=serving");
}

BOOST_AUTO_TEST_CASE(a_message_reaches_an_abstract_socket_named_with_at) {
  const std::string name = "@baton-test-notify-" + std::to_string(::getpid());
  notify_listener listener(name);
  ::setenv("NOTIFY_SOCKET", name.c_str(), 1);
  sd::notify("WATCHDOG=1");
  ::unsetenv("NOTIFY_SOCKET");
  BOOST_TEST(listener.receive(5s) == "WATCHDOG=1");
}

BOOST_AUTO_TEST_CASE(without_notify_socket_nothing_is_sent_or_logged) {
  const auto text = logged_while([] {
    ::unsetenv("NOTIFY_SOCKET");
    sd::notify("READY=1");
    ::setenv("NOTIFY_SOCKET", "", 1);
    sd::notify("READY=1");
    ::unsetenv("NOTIFY_SOCKET");
  });
  BOOST_TEST(text.empty(), text);
}

// Runs last in this file: the warning is logged once per process.
BOOST_AUTO_TEST_CASE(failures_neither_throw_nor_block_and_are_logged_once) {
  temp_dir dir;
  const auto missing = (dir.path() / "no-such-socket").string();
  // A service manager that does not read: its queue fills (a few datagrams), and a blocking send would wait
  // for ever.
  const auto deaf_path = (dir.path() / "deaf").string();
  notify_listener deaf(deaf_path);
  std::chrono::steady_clock::duration full_queue_took{};
  const auto text = logged_while([&] {
    ::setenv("NOTIFY_SOCKET", missing.c_str(), 1);
    BOOST_CHECK_NO_THROW(sd::notify("READY=1"));
    BOOST_CHECK_NO_THROW(sd::notify("WATCHDOG=1"));
    ::setenv("NOTIFY_SOCKET", "relative/path", 1);
    BOOST_CHECK_NO_THROW(sd::notify("WATCHDOG=1"));
    ::setenv("NOTIFY_SOCKET", ("/" + std::string(200, 'x')).c_str(), 1);
    BOOST_CHECK_NO_THROW(sd::notify("WATCHDOG=1"));
    ::setenv("NOTIFY_SOCKET", deaf_path.c_str(), 1);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 2000; ++i)
      sd::notify("WATCHDOG=1");
    full_queue_took = std::chrono::steady_clock::now() - start;
    ::unsetenv("NOTIFY_SOCKET");
  });
  BOOST_TEST(full_queue_took < 5s);
  BOOST_TEST(deaf.receive(5s) == "WATCHDOG=1");
  BOOST_TEST(count(text, "event=sd_notify_failed") == 1u, text);
  BOOST_TEST(text.find("level=warn") != std::string::npos, text);
  BOOST_TEST(text.find(missing) != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(the_watchdog_needs_a_positive_usec_and_our_pid_or_none) {
  const pid_t self = 4242;
  BOOST_TEST(sd::parse_watchdog("200000", nullptr, self).value() == 200ms);
  BOOST_TEST(sd::parse_watchdog("30000000", "4242", self).value() == 30s);
  BOOST_TEST(!sd::parse_watchdog(nullptr, nullptr, self).has_value());
  BOOST_TEST(!sd::parse_watchdog("", nullptr, self).has_value());
  BOOST_TEST(!sd::parse_watchdog("0", nullptr, self).has_value());
  BOOST_TEST(!sd::parse_watchdog("-5", nullptr, self).has_value());
  BOOST_TEST(!sd::parse_watchdog("30s", nullptr, self).has_value());
  BOOST_TEST(!sd::parse_watchdog("99999999999999999999999", nullptr, self).has_value());
  // Inherited from a parent that systemd watches: not ours to ping.
  BOOST_TEST(!sd::parse_watchdog("200000", "4241", self).has_value());
  BOOST_TEST(!sd::parse_watchdog("200000", "", self).has_value());
  BOOST_TEST(!sd::parse_watchdog("200000", "x", self).has_value());
}
