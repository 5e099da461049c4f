// SPDX-License-Identifier: Apache-2.0
#include "baton/common/sd_notify.hpp"

#include "baton/common/log.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace baton::sd_notify {
namespace {

// Once per process: the service manager that would act on the messages is the one that cannot hear them,
// and a watchdog ping every few seconds must not turn one problem into a stream of lines.
void report_failure(std::string_view socket, std::string_view state, const std::string& error) {
  static std::atomic<bool> reported{false};
  if (reported.exchange(true)) return;
  auto first_line = state.substr(0, state.find('\n'));
  log::warn("sd_notify_failed",
            {{"socket", socket},
             {"state", first_line},
             {"error", error},
             {"effect", "the service manager is not told; later failures are not logged"}});
}

bool parse_decimal(const char* text, std::uint64_t& out) {
  if (text == nullptr || *text == '\0') return false;
  const char* end = text + std::strlen(text);
  auto [ptr, ec] = std::from_chars(text, end, out);
  return ec == std::errc() && ptr == end;
}

}  // namespace

void notify(std::string_view state) {
  const char* env = std::getenv("NOTIFY_SOCKET");
  if (env == nullptr || *env == '\0') return;
  const std::string_view socket(env);

  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket.front() != '/' && socket.front() != '@') {
    report_failure(socket, state,
                   "NOTIFY_SOCKET must be an absolute path or an abstract name starting with '@'");
    return;
  }
  // A path needs room for its terminating NUL; an abstract name has none, its '@' becomes the leading NUL.
  if (socket.size() + (socket.front() == '/' ? 1 : 0) > sizeof addr.sun_path) {
    report_failure(socket, state, "NOTIFY_SOCKET is longer than a socket address holds");
    return;
  }
  std::memcpy(addr.sun_path, socket.data(), socket.size());
  if (socket.front() == '@') addr.sun_path[0] = '\0';
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket.size());

  // Non-blocking: a service manager that does not read must not stall the loop that sends the watchdog ping.
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    report_failure(socket, state, std::string("socket: ") + std::strerror(errno));
    return;
  }
  ssize_t sent;
  do {
    sent = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&addr),
                    length);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    report_failure(socket, state, std::string("sendto: ") + std::strerror(errno));
  } else if (static_cast<std::size_t>(sent) != state.size()) {
    report_failure(socket, state, "sendto: message cut short");
  }
  ::close(fd);
}

std::optional<std::chrono::microseconds> parse_watchdog(const char* watchdog_usec, const char* watchdog_pid,
                                                        pid_t self) {
  std::uint64_t usec = 0;
  if (!parse_decimal(watchdog_usec, usec) || usec == 0 ||
      usec > static_cast<std::uint64_t>(std::chrono::microseconds::max().count()))
    return std::nullopt;
  if (watchdog_pid != nullptr) {
    std::uint64_t pid = 0;
    if (!parse_decimal(watchdog_pid, pid) || pid != static_cast<std::uint64_t>(self)) return std::nullopt;
  }
  return std::chrono::microseconds(static_cast<std::int64_t>(usec));
}

std::optional<std::chrono::microseconds> watchdog_timeout() {
  return parse_watchdog(std::getenv("WATCHDOG_USEC"), std::getenv("WATCHDOG_PID"), ::getpid());
}

}  // namespace baton::sd_notify
