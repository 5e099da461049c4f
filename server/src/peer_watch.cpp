// SPDX-License-Identifier: Apache-2.0
#include "peer_watch.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace baton::server {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::shared_ptr<peer_watch> watch_peer(tcp::socket& socket) {
  auto watch = std::make_shared<peer_watch>();
  const int fd = socket.native_handle();
  socket.async_wait(tcp::socket::wait_read, [watch, fd](const boost::system::error_code& ec) {
    if (watch->done || ec == asio::error::operation_aborted) return;
    if (!ec) {
      char byte;
      ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) return;
    }
    watch->gone = true;
    watch->signal.emit(asio::cancellation_type::terminal);
  });
  return watch;
}

}  // namespace baton::server
