#define BOOST_TEST_MODULE sd_notify
#include <boost/test/unit_test.hpp>

#include "baton/common/log.hpp"
#include "baton/common/sd_notify.hpp"
#include "batond_fixture.hpp"
#include "notify_listener.hpp"

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

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p);
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
  temp_dir dir;
  const auto log_path = dir.path() / "log";
  int fd = ::open(log_path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  BOOST_REQUIRE(fd >= 0);
  baton::log::set_output(fd);
  ::unsetenv("NOTIFY_SOCKET");
  sd::notify("READY=1");
  ::setenv("NOTIFY_SOCKET", "", 1);
  sd::notify("READY=1");
  ::unsetenv("NOTIFY_SOCKET");
  baton::log::set_output(STDERR_FILENO);
  ::close(fd);
  BOOST_TEST(read_all(log_path).empty());
}

// Runs last in this file: the warning is logged once per process.
BOOST_AUTO_TEST_CASE(a_socket_nobody_listens_on_is_one_warning_and_no_exception) {
  temp_dir dir;
  const auto log_path = dir.path() / "log";
  int fd = ::open(log_path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  BOOST_REQUIRE(fd >= 0);
  baton::log::set_output(fd);
  const auto missing = (dir.path() / "no-such-socket").string();
  ::setenv("NOTIFY_SOCKET", missing.c_str(), 1);
  BOOST_CHECK_NO_THROW(sd::notify("READY=1"));
  BOOST_CHECK_NO_THROW(sd::notify("WATCHDOG=1"));
  ::setenv("NOTIFY_SOCKET", "relative/path", 1);
  BOOST_CHECK_NO_THROW(sd::notify("WATCHDOG=1"));
  ::unsetenv("NOTIFY_SOCKET");
  baton::log::set_output(STDERR_FILENO);
  ::close(fd);
  const auto text = read_all(log_path);
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
