// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: the receiving end of the sd_notify protocol, a datagram socket as systemd binds it for
// NOTIFY_SOCKET.

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

namespace baton::test {

class notify_listener {
 public:
  /// Binds `name`: a path, or an abstract name when it starts with '@'.
  explicit notify_listener(const std::string& name) {
    sockaddr_un addr{};
    if (name.empty() || name.size() >= sizeof addr.sun_path) throw std::invalid_argument("bad socket name");
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("socket failed");
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, name.data(), name.size());
    if (name[0] == '@') addr.sun_path[0] = '\0';
    auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), length) != 0) {
      int e = errno;
      ::close(fd_);
      throw std::runtime_error("bind " + name + ": " + std::strerror(e));
    }
  }
  ~notify_listener() { ::close(fd_); }
  notify_listener(const notify_listener&) = delete;
  notify_listener& operator=(const notify_listener&) = delete;

  /// The next datagram, or "" when none comes within `timeout`.
  std::string receive(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    int ready;
    do {
      ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
    } while (ready < 0 && errno == EINTR);
    if (ready != 1) return "";
    char buf[4096];
    auto n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
  }

  /// Receives until a datagram equal to `message` or starting with `message` + "\n" comes: true, or until
  /// `bound` passes: false.
  bool wait_for(const std::string& message, std::chrono::milliseconds bound) {
    const auto until = std::chrono::steady_clock::now() + bound;
    for (;;) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      auto got = receive(left);
      if (got.empty()) return false;
      if (got == message || got.rfind(message + "\n", 0) == 0) return true;
    }
  }

 private:
  int fd_ = -1;
};

}  // namespace baton::test
