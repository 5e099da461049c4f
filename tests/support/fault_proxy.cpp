// SPDX-License-Identifier: Apache-2.0
#include "fault_proxy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>

namespace baton::test {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// ---- http_framer

namespace {

constexpr std::size_t max_header_bytes = 64 * 1024;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Optional whitespace around a header value (RFC 9110 section 5.6.3).
std::string_view trim(std::string_view s) {
  auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

bool is_http1_version(std::string_view v) {
  return v.size() == 8 && v.starts_with("HTTP/1.") && is_digit(v[7]);
}

}  // namespace

http_framer::segment http_framer::next(std::string_view bytes) {
  segment seg;
  switch (state_) {
    case state::opaque:
    case state::until_close:
      seg.size = bytes.size();
      return seg;
    case state::body:
      seg.size = static_cast<std::size_t>(std::min<std::uint64_t>(body_left_, bytes.size()));
      body_left_ -= seg.size;
      if (body_left_ == 0) {
        seg.ends_message = true;
        state_ = state::header;
      }
      return seg;
    case state::header:
      break;
  }
  if (bytes.empty()) return seg;
  seg.starts_message = header_.empty();
  // Byte by byte: the header block is small, and this finds its end even when it is split across reads.
  for (char c : bytes) {
    header_.push_back(c);
    ++seg.size;
    if (header_.size() > max_header_bytes) {
      state_ = state::opaque;
    } else if (!header_.ends_with("\r\n")) {
      continue;
    } else if (!start_line_checked_) {
      // Judge the start line as soon as it is complete, so that non-HTTP bytes become opaque early.
      start_line_checked_ = true;
      if (!start_line_valid()) state_ = state::opaque;
    } else if (header_.ends_with("\r\n\r\n")) {
      if (!begin_body()) {
        state_ = state::opaque;
      } else {
        seg.ends_message = state_ == state::header;  // no body
        header_.clear();
        start_line_checked_ = false;
        return seg;
      }
    }
    if (state_ == state::opaque) {
      // The rest of the input is not part of any message either.
      header_ = std::string();
      seg.size = bytes.size();
      return seg;
    }
  }
  return seg;
}

bool http_framer::start_line_valid() const {
  std::string_view line(header_.data(), header_.size() - 2);
  if (kind_ == kind::response) {
    // "HTTP/1.1 200 OK"; the reason phrase may be empty.
    return line.size() >= 12 && is_http1_version(line.substr(0, 8)) && line[8] == ' ' &&
           std::all_of(line.begin() + 9, line.begin() + 12, is_digit) &&
           (line.size() == 12 || line[12] == ' ');
  }
  // "POST /v1/locks/a/acquire HTTP/1.1"
  auto first_space = line.find(' ');
  auto last_space = line.rfind(' ');
  if (first_space == std::string_view::npos || first_space == 0 || last_space <= first_space + 1)
    return false;
  auto method = line.substr(0, first_space);
  auto target = line.substr(first_space + 1, last_space - first_space - 1);
  return std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; }) &&
         target.find(' ') == std::string_view::npos && is_http1_version(line.substr(last_space + 1));
}

bool http_framer::begin_body() {
  std::string_view rest = header_;
  rest.remove_prefix(rest.find("\r\n") + 2);  // the start line, already checked
  std::optional<std::uint64_t> length;
  for (auto end = rest.find("\r\n"); end != 0; end = rest.find("\r\n")) {
    auto line = rest.substr(0, end);
    rest.remove_prefix(end + 2);
    auto colon = line.find(':');
    if (colon == std::string_view::npos) return false;
    auto name = line.substr(0, colon);
    auto value = trim(line.substr(colon + 1));
    // Chunked bodies would need a real parser; batond never sends them, so give up counting instead.
    if (boost::beast::iequals(name, "transfer-encoding")) return false;
    if (boost::beast::iequals(name, "content-length")) {
      std::uint64_t n = 0;
      auto [end_of_number, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (value.empty() || ec != std::errc() || end_of_number != value.data() + value.size()) return false;
      if (length && *length != n) return false;
      length = n;
    }
  }
  if (kind_ == kind::response) {
    int status = (header_[9] - '0') * 100 + (header_[10] - '0') * 10 + (header_[11] - '0');
    // RFC 9112 section 6.3: these replies never have a body, whatever their headers say.
    if (status / 100 == 1 || status == 204 || status == 304) {
      length = 0;
    } else if (!length) {
      state_ = state::until_close;
      return true;
    }
  }
  // A request without Content-Length has no body (RFC 9112 section 6.3, rule 6).
  body_left_ = length.value_or(0);
  state_ = body_left_ > 0 ? state::body : state::header;
  return true;
}

// ---- fault_proxy

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// Indexes the per-direction state and counters.
enum direction { to_upstream = 0, to_client = 1 };

// A bug in the proxy should fail the test loudly (std::terminate from the proxy's thread), not vanish.
constexpr auto rethrow = [](std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
};

// SO_LINGER 0 turns close() into a RST, which is what a crashed peer or a middlebox's reset looks like.
void reset_socket(tcp::socket& s) {
  boost::system::error_code ec;
  s.set_option(tcp::socket::linger(true, 0), ec);
  s.close(ec);
}

}  // namespace

struct fault_proxy::impl {
  struct connection;

  // Settings: written by any thread, read by the proxy's thread at each chunk.
  std::atomic<std::int64_t> delay_ms{0};
  std::atomic<bool> blackhole{false};
  std::atomic<bool> refuse{false};
  std::mutex drops_mutex;
  std::array<int, 2> drops_pending{};                 // guarded by drops_mutex
  drop_style response_drop_style = drop_style::hang;  // guarded by drops_mutex
  int duplicates_pending = 0;                         // guarded by drops_mutex
  std::chrono::milliseconds duplicate_delay{0};       // guarded by drops_mutex
  int replacements_pending = 0;                       // guarded by drops_mutex
  std::string replacement;                            // guarded by drops_mutex
  std::atomic<std::size_t> duplicated{0};
  std::atomic<std::size_t> replaced{0};

  std::atomic<std::size_t> accepted{0};
  std::atomic<std::size_t> refused{0};
  std::atomic<std::size_t> resets{0};
  std::atomic<std::size_t> blackholed{0};
  std::array<std::atomic<std::size_t>, 2> forwarded{};
  std::array<std::atomic<std::size_t>, 2> dropped{};

  std::atomic<unsigned short> upstream_port{0};
  unsigned short port = 0;
  // Proxy thread only. Declared before the io_context: connections still owned by coroutine frames are
  // destroyed with it and unregister themselves here.
  std::unordered_set<connection*> connections;
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  std::thread thread;

  // Decides whether the message starting now in direction `d` is swallowed, and how.
  std::optional<drop_style> take_drop(direction d) {
    std::lock_guard lock(drops_mutex);
    if (drops_pending[d] <= 0) return std::nullopt;
    --drops_pending[d];
    ++dropped[d];
    return d == to_client ? response_drop_style : drop_style::hang;
  }

  // The reply to send instead of the one starting now, when one is due.
  std::optional<std::string> take_replacement() {
    std::lock_guard lock(drops_mutex);
    if (replacements_pending <= 0) return std::nullopt;
    --replacements_pending;
    return replacement;
  }

  // The delay of a duplicate of the request that just completed, when one is due.
  std::optional<std::chrono::milliseconds> take_duplicate() {
    std::lock_guard lock(drops_mutex);
    if (duplicates_pending <= 0) return std::nullopt;
    --duplicates_pending;
    return duplicate_delay;
  }

  static asio::awaitable<void> accept_loop(impl& self);
  static asio::awaitable<void> replay(impl& self, std::string request, std::chrono::milliseconds delay);
};

// One client connection and its upstream connection. All state is touched on the proxy's thread only.
struct fault_proxy::impl::connection {
  connection(impl& p, tcp::socket c) : proxy(p), client(std::move(c)), upstream(client.get_executor()) {
    proxy.connections.insert(this);
  }
  ~connection() { proxy.connections.erase(this); }

  impl& proxy;
  tcp::socket client;
  tcp::socket upstream;
  std::array<http_framer, 2> framers{http_framer(http_framer::kind::request),
                                     http_framer(http_framer::kind::response)};
  // The fault of the message now passing in each direction, when it is being swallowed.
  std::array<std::optional<drop_style>, 2> swallowing;
  std::optional<std::string> replacing;  // what the client gets instead of the reply now passing
  std::string request_bytes;             // the request now passing upstream, for duplicate_requests
  bool hung = false;                     // a swallowed message left the connection silent for good
  bool closed = false;                   // reset or closed by the proxy: the pumps stop

  tcp::socket& source(direction d) { return d == to_upstream ? client : upstream; }
  tcp::socket& sink(direction d) { return d == to_upstream ? upstream : client; }

  void reset_both() {
    reset_socket(client);
    reset_socket(upstream);
    closed = true;
  }

  // Ends a swallowed message; true when the client's connection must now be reset.
  bool end_swallowed(direction d) {
    auto style = *swallowing[d];
    swallowing[d].reset();
    if (style == drop_style::reset) return true;
    hung = true;
    return false;
  }

  // Returns the part of `bytes` to forward, applying the per-message faults; sets `reset_client` when a reply
  // swallowed with drop_style::reset is complete (what follows it is then irrelevant).
  std::string filter(direction d, std::string_view bytes, bool& reset_client) {
    std::string out;
    const bool partitioned = proxy.blackhole.load();
    if (partitioned) proxy.blackholed += bytes.size();
    auto& framer = framers[d];
    while (!bytes.empty() && !reset_client) {
      auto seg = framer.next(bytes);
      auto piece = bytes.substr(0, seg.size);
      bytes.remove_prefix(seg.size);
      // Every byte goes through the framer, forwarded or not, so message boundaries stay right across faults.
      if (framer.opaque()) {
        swallowing[d].reset();  // not HTTP: only the whole-connection faults apply
        if (d == to_client) replacing.reset();
      } else if (seg.starts_message && !hung && !partitioned) {
        swallowing[d] = proxy.take_drop(d);
        if (d == to_client && !swallowing[d]) replacing = proxy.take_replacement();
      }
      const bool replaced = d == to_client && replacing;
      const bool forward = !hung && !partitioned && !swallowing[d] && !replaced;
      if (forward) out.append(piece);
      if (d == to_upstream && !framer.opaque()) {
        if (seg.starts_message) request_bytes.clear();
        if (forward) request_bytes.append(piece);
      }
      if (seg.ends_message) {
        if (swallowing[d]) {
          reset_client = end_swallowed(d);
        } else if (replaced) {
          if (!hung && !partitioned) {
            out.append(*replacing);
            ++proxy.replaced;
          }
          replacing.reset();
        } else if (forward) {
          ++proxy.forwarded[d];
          if (d == to_upstream) {
            if (auto delay = proxy.take_duplicate())
              asio::co_spawn(client.get_executor(), impl::replay(proxy, request_bytes, *delay), rethrow);
          }
        }
      }
    }
    return out;
  }

  static asio::awaitable<void> run(std::shared_ptr<connection> self) {
    auto [ec] = co_await self->upstream.async_connect(
        {asio::ip::address_v4::loopback(), self->proxy.upstream_port.load()}, use_tuple);
    if (self->closed) co_return;
    // Nothing listens upstream: the client sees its connection reset, as a server crash would look.
    if (ec) {
      self->reset_both();
      co_return;
    }
    // Requests and replies are small; Nagle's algorithm would only add latency the test did not ask for.
    self->client.set_option(tcp::no_delay(true), ec);
    self->upstream.set_option(tcp::no_delay(true), ec);
    auto ex = self->client.get_executor();
    asio::co_spawn(ex, pump(self, to_upstream), rethrow);
    asio::co_spawn(ex, pump(self, to_client), rethrow);
  }

  // Forwards one direction chunk by chunk; the connection lives while either direction's pump runs.
  static asio::awaitable<void> pump(std::shared_ptr<connection> self, direction d) {
    std::array<char, 16 * 1024> buf;
    asio::steady_timer timer(self->client.get_executor());
    for (;;) {
      auto [ec, n] = co_await self->source(d).async_read_some(asio::buffer(buf), use_tuple);
      if (self->closed) co_return;
      bool reset_client = false;
      if (ec) {
        // A swallowed message cut short ends here (for a reply without Content-Length, that is its end).
        if (self->swallowing[d]) reset_client = self->end_swallowed(d);
        if (reset_client) break;
        // A partition or a hung connection passes on nothing, not even a close: the other side stays open.
        if (self->hung || self->proxy.blackhole.load()) co_return;
        if (ec == asio::error::eof) {
          self->sink(d).shutdown(tcp::socket::shutdown_send, ec);
        } else {
          self->reset_both();
        }
        co_return;
      }
      std::string out = self->filter(d, {buf.data(), n}, reset_client);
      if (!out.empty()) {
        if (auto delay = std::chrono::milliseconds(self->proxy.delay_ms.load()); delay.count() > 0) {
          timer.expires_after(delay);
          co_await timer.async_wait(use_tuple);
          if (self->closed) co_return;
        }
        auto [write_ec, written] = co_await asio::async_write(self->sink(d), asio::buffer(out), use_tuple);
        if (self->closed) co_return;
        if (write_ec) {
          self->reset_both();
          co_return;
        }
      }
      if (reset_client) break;
    }
    ++self->proxy.resets;
    reset_socket(self->client);
    boost::system::error_code ignored;
    self->upstream.close(ignored);
    self->closed = true;
  }
};

asio::awaitable<void> fault_proxy::impl::replay(impl& self, std::string request,
                                                std::chrono::milliseconds delay) {
  asio::steady_timer timer(self.ioc);
  if (delay.count() > 0) {
    timer.expires_after(delay);
    co_await timer.async_wait(use_tuple);
  }
  tcp::socket s(self.ioc);
  auto [ec] =
      co_await s.async_connect({asio::ip::address_v4::loopback(), self.upstream_port.load()}, use_tuple);
  if (ec) co_return;  // the server is down: the copy is lost, as it would be on a network
  auto [write_ec, written] = co_await asio::async_write(s, asio::buffer(request), use_tuple);
  if (write_ec) co_return;
  ++self.duplicated;
  // Half-close so the server ends the connection after its reply, which nobody reads but the proxy.
  s.shutdown(tcp::socket::shutdown_send, ec);
  std::array<char, 4096> sink;
  for (;;) {
    auto [read_ec, n] = co_await s.async_read_some(asio::buffer(sink), use_tuple);
    if (read_ec) break;
  }
}

asio::awaitable<void> fault_proxy::impl::accept_loop(impl& self) {
  asio::steady_timer backoff(self.ioc);
  for (;;) {
    auto [ec, socket] = co_await self.acceptor.async_accept(use_tuple);
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) {
      // Out of descriptors, most likely: wait rather than spin.
      backoff.expires_after(std::chrono::milliseconds(10));
      co_await backoff.async_wait(use_tuple);
      continue;
    }
    ++self.accepted;
    if (self.refuse.load()) {
      ++self.refused;
      reset_socket(socket);
      continue;
    }
    auto c = std::make_shared<connection>(self, std::move(socket));
    asio::co_spawn(self.ioc, connection::run(std::move(c)), rethrow);
  }
}

fault_proxy::fault_proxy(unsigned short upstream_port, const std::string& listen_address)
    : impl_(std::make_unique<impl>()) {
  impl_->upstream_port = upstream_port;
  tcp::endpoint listen_on(asio::ip::make_address(listen_address), 0);
  impl_->acceptor.open(listen_on.protocol());
  impl_->acceptor.bind(listen_on);
  impl_->acceptor.listen();
  impl_->port = impl_->acceptor.local_endpoint().port();
  asio::co_spawn(impl_->ioc, impl::accept_loop(*impl_), rethrow);
  impl_->thread = std::thread([&ioc = impl_->ioc] { ioc.run(); });
}

fault_proxy::~fault_proxy() {
  // Stopping abandons every pending operation; their coroutine frames, and with them the connections and
  // their sockets, are destroyed with the io_context.
  impl_->ioc.stop();
  impl_->thread.join();
}

unsigned short fault_proxy::port() const {
  return impl_->port;
}

void fault_proxy::set_upstream_port(unsigned short p) {
  impl_->upstream_port = p;
}

void fault_proxy::duplicate_requests(int n, std::chrono::milliseconds delay) {
  std::lock_guard lock(impl_->drops_mutex);
  impl_->duplicates_pending = std::max(0, n);
  impl_->duplicate_delay = std::max(std::chrono::milliseconds(0), delay);
}

std::size_t fault_proxy::requests_duplicated() const {
  return impl_->duplicated;
}

void fault_proxy::set_delay(std::chrono::milliseconds d) {
  impl_->delay_ms = std::max<std::int64_t>(0, d.count());
}

void fault_proxy::drop_responses(int n, drop_style style) {
  std::lock_guard lock(impl_->drops_mutex);
  impl_->drops_pending[to_client] = std::max(0, n);
  impl_->response_drop_style = style;
}

void fault_proxy::replace_responses(int n, std::string reply) {
  std::lock_guard lock(impl_->drops_mutex);
  impl_->replacements_pending = std::max(0, n);
  impl_->replacement = std::move(reply);
}

void fault_proxy::drop_requests(int n) {
  std::lock_guard lock(impl_->drops_mutex);
  impl_->drops_pending[to_upstream] = std::max(0, n);
}

void fault_proxy::reset_all() {
  // Done on the proxy's thread, which owns the sockets; waiting for it makes "after reset_all returns, every
  // connection open before the call is reset" true, so a test needs no sleep.
  std::promise<void> done;
  asio::post(impl_->ioc, [&] {
    for (auto* c : impl_->connections) {
      if (c->closed) continue;
      c->reset_both();
      ++impl_->resets;
    }
    done.set_value();
  });
  done.get_future().wait();
}

void fault_proxy::set_blackhole(bool on) {
  impl_->blackhole = on;
}
void fault_proxy::set_refuse(bool on) {
  impl_->refuse = on;
}

std::size_t fault_proxy::connections_accepted() const {
  return impl_->accepted;
}
std::size_t fault_proxy::connections_refused() const {
  return impl_->refused;
}
std::size_t fault_proxy::connections_reset() const {
  return impl_->resets;
}
std::size_t fault_proxy::requests_forwarded() const {
  return impl_->forwarded[to_upstream];
}
std::size_t fault_proxy::responses_forwarded() const {
  return impl_->forwarded[to_client];
}
std::size_t fault_proxy::requests_dropped() const {
  return impl_->dropped[to_upstream];
}
std::size_t fault_proxy::responses_dropped() const {
  return impl_->dropped[to_client];
}
std::size_t fault_proxy::responses_replaced() const {
  return impl_->replaced;
}
std::size_t fault_proxy::bytes_blackholed() const {
  return impl_->blackholed;
}

}  // namespace baton::test
