// SPDX-License-Identifier: Apache-2.0
#include "http_server.hpp"

#include "answers.hpp"
#include "framing.hpp"
#include "http_message.hpp"
#include "peer_watch.hpp"
#include "router.hpp"
#include "watchdog.hpp"

#include "baton/common/log.hpp"
#include "baton/common/sd_notify.hpp"
#include "baton/common/tls_files.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <functional>
#include <list>
#include <thread>
#include <vector>

namespace baton::server {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

}  // namespace

struct http_server::impl {
  struct worker {
    asio::io_context ioc{1};
    std::list<beast::tcp_stream*> idle;  // connections waiting for their next request (this thread only)
  };

  http_options options;
  lock_service& service;
  server_metrics& metrics;
  std::vector<std::unique_ptr<worker>> workers;
  tcp::acceptor acceptor;
  std::atomic<bool> draining{false};
  std::atomic<bool> drain_started{false};
  std::atomic<std::int64_t> open_connections{0};
  // Connections past max_connections being answered 503; past this many more they are closed unanswered, so
  // a connection flood costs a bounded amount of work.
  static constexpr std::int64_t max_refusing = 64;
  std::atomic<std::int64_t> refusing{0};
  address_connections per_address{options.limits.max_connections_per_address};
  router routes{options, service, metrics, draining};

  impl(http_options o, lock_service& s, server_metrics& m)
      : options(std::move(o)),
        service(s),
        metrics(m),
        workers(make_workers(options.threads)),
        acceptor(workers[0]->ioc) {
    service.set_waiter_limits(options.limits.max_waiters_per_key, options.limits.max_waiters);
    service.set_lock_limit(options.limits.max_locks);
    service.set_record_limit(options.limits.max_records);
  }

  static std::vector<std::unique_ptr<worker>> make_workers(unsigned n) {
    std::vector<std::unique_ptr<worker>> w;
    for (unsigned i = 0; i < std::max(1u, n); ++i)
      w.push_back(std::make_unique<worker>());
    return w;
  }

  std::vector<asio::io_context*> io_contexts() {
    std::vector<asio::io_context*> out;
    for (auto& w : workers)
      out.push_back(&w->ioc);
    return out;
  }

  // How long a connection may wait for a request before it has made an authenticated one.
  std::chrono::milliseconds first_request_timeout() const {
    return options.tokens ? std::min(options.read_timeout, options.limits.unauthenticated_timeout)
                          : options.read_timeout;
  }

  static std::string peer_of(const tcp::socket& socket) {
    beast::error_code ec;
    auto ep = socket.remote_endpoint(ec);
    if (ec) return "unknown";
    auto a = ep.address().to_string();
    return (ep.address().is_v6() ? "[" + a + "]" : a) + ":" + std::to_string(ep.port());
  }

  // Answers a connection past the limit with 503 without reading its request, then waits (briefly) for the
  // client to finish sending and close, so the answer is not lost to a reset.
  asio::awaitable<void> refuse_connection(tcp::socket socket, std::string code, std::string message) {
    struct counted {
      impl& self;
      ~counted() { self.refusing.fetch_sub(1); }
    } guard{*this};
    auto* mem = std::pmr::new_delete_resource();
    beast::tcp_stream stream(std::move(socket));
    auto res =
        make_response(mem, http::status::service_unavailable, 11, false, error_text(mem, code, message));
    res.set(http::field::retry_after, "1");
    metrics.count_request(route::other, 503);
    stream.expires_after(std::chrono::seconds(1));
    auto [wec, wn] = co_await http::async_write(stream, res, use_tuple);
    if (wec) co_return;
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    std::array<char, 4096> sink;
    for (;;) {
      auto [rec, rn] = co_await stream.async_read_some(asio::buffer(sink), use_tuple);
      if (rec) break;
    }
  }

  asio::awaitable<void> session(tcp::socket socket, worker& w, std::string client) {
    beast::tcp_stream stream(std::move(socket));
    // Bounded by what one request may hold: Beast otherwise reads up to 64 KiB at a time into it, which a
    // stalled client would keep allocated (docs/security.md, "Memory per connection").
    beast::flat_buffer buffer(options.limits.max_header_bytes + options.limits.max_body_bytes);
    metrics.connections.fetch_add(1, std::memory_order_relaxed);
    struct closer {
      impl& self;
      const std::string& address;
      ~closer() {
        self.per_address.release(address);
        self.open_connections.fetch_sub(1);
        self.metrics.connections.fetch_sub(1, std::memory_order_relaxed);
      }
    } close_guard{*this, client};

    if (!options.tls) {
      co_await serve(stream, buffer, w, client);
      beast::error_code ignored;
      stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
      co_return;
    }
    co_await serve_tls(std::move(stream), buffer, w, client);
  }

  asio::awaitable<void> serve_tls(beast::tcp_stream stream, beast::flat_buffer& buffer, worker& w,
                                  const std::string& client) {
    // The first bytes tell a TLS ClientHello from a plain HTTP request, so a client with an http:// URL gets
    // an answer it can show instead of a reset connection. Both waits count as idle: drain closes them.
    stream.expires_after(first_request_timeout());
    auto pos = w.idle.insert(w.idle.end(), &stream);
    auto [dec, is_tls] = co_await beast::async_detect_ssl(stream, buffer, use_tuple);
    w.idle.erase(pos);
    if (dec) co_return;
    if (!is_tls) {
      co_await refuse_plain_http(stream, buffer);
      co_return;
    }
    const std::string peer = peer_of(stream.socket());
    beast::ssl_stream<beast::tcp_stream> secure(std::move(stream), *options.tls);
    auto& lowest = beast::get_lowest_layer(secure);
    // A client that stalls the handshake is dropped like an idle one.
    lowest.expires_after(first_request_timeout());
    pos = w.idle.insert(w.idle.end(), &lowest);
    auto [hec, used] =
        co_await secure.async_handshake(asio::ssl::stream_base::server, buffer.data(), use_tuple);
    w.idle.erase(pos);
    if (hec) {
      const std::string verify = tls::verify_failure(secure.native_handle());
      log::warn(
          "tls_handshake_failed",
          {{"peer", peer}, {"error", hec.message()}, {"client_certificate", verify.empty() ? "-" : verify}});
      // The alert is on its way; read what the client still sends for a moment so closing does not reset
      // the connection before the client has read why (a TLS 1.3 client learns of a refused certificate
      // only on its first read).
      beast::error_code ignored;
      lowest.socket().shutdown(tcp::socket::shutdown_send, ignored);
      lowest.expires_after(
          std::min<std::chrono::milliseconds>(options.read_timeout, std::chrono::seconds(1)));
      char scratch[512];
      for (;;) {
        auto [rec, rn] = co_await lowest.async_read_some(asio::buffer(scratch), use_tuple);
        if (rec) break;
      }
      co_return;
    }
    buffer.consume(used);
    co_await serve(secure, buffer, w, client);
    // close_notify, so the client can tell the end of the connection from a truncation; bounded, since a
    // client that never answers it must not hold the connection.
    lowest.expires_after(std::min<std::chrono::milliseconds>(options.read_timeout, std::chrono::seconds(1)));
    co_await secure.async_shutdown(use_tuple);
  }

  // A plain HTTP request on a TLS port: one 400 answer that says so, then close.
  asio::awaitable<void> refuse_plain_http(beast::tcp_stream& stream, beast::flat_buffer& buffer) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(options.limits.max_body_bytes);
    parser.header_limit(static_cast<std::uint32_t>(options.limits.max_header_bytes));
    auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_tuple);
    if (ec) co_return;
    metrics.count_request(route::other, 400);
    auto* mem = std::pmr::new_delete_resource();
    auto res = make_response(
        mem, http::status::bad_request, parser.get().version(), false,
        error_text(mem, "tls_required", "this server accepts only TLS connections: use https://"));
    co_await http::async_write(stream, res, use_tuple);
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  // A record write may carry a value far larger than any other body (docs/protocol.md, "record"): a PUT of
  // the record route, from a caller with a valid token when tokens are required. Anyone else gets the
  // general limit, so nobody without a token holds more than that much memory per connection.
  bool takes_record_body(const request& req) const {
    if (req.method() != http::verb::put) return false;
    const auto k = parse_route(req.target());
    const auto* kind = std::get_if<lock_target::kind>(&k);
    if (!kind || *kind != lock_target::kind::record_read) return false;
    if (!options.tokens) return true;
    return std::holds_alternative<std::string>(
        auth::authenticate(*options.tokens->current(), req[http::field::authorization]));
  }

  // Requests on one connection until it closes, fails, times out or the server drains. `Stream` is the TCP
  // stream or the TLS stream over it. `client` is the peer's address, the key of its request rate.
  template <class Stream>
  asio::awaitable<void> serve(Stream& stream, beast::flat_buffer& buffer, worker& w,
                              const std::string& client) {
    auto& lowest = beast::get_lowest_layer(stream);
    bool authenticated = false;  // this connection has made a request with a valid token
    // This connection's entry in w.idle, moved in while it waits for a request and out while it serves
    // one: splicing allocates nothing.
    std::list<beast::tcp_stream*> mine{&lowest};
    const auto pos = mine.begin();
    auto arena = std::make_unique<request_arena>();
    std::pmr::memory_resource* const mem = arena.get();
    for (;;) {
      if (draining.load()) break;
      // Nothing of the last request is alive: its parser and answer ended with the last iteration.
      arena->reset();
      request_parser parser{std::piecewise_construct, std::make_tuple(mem), std::make_tuple(mem)};
      // The largest limit of any route until the header says which one this is: Beast refuses a
      // Content-Length over the limit as it reads the header. The route's own limit is applied below.
      parser.body_limit(std::max(options.limits.max_body_bytes, max_record_body_bytes));
      parser.header_limit(static_cast<std::uint32_t>(options.limits.max_header_bytes));
      lowest.expires_after(authenticated ? options.read_timeout : first_request_timeout());
      w.idle.splice(w.idle.end(), mine, pos);
      // The header first: its framing is checked before a byte of the body is read as anything.
      auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, use_tuple);
      std::optional<api_error> framing;
      std::size_t body_limit = options.limits.max_body_bytes;
      if (!ec) {
        framing = check_framing(parser.get());
        if (takes_record_body(parser.get())) body_limit = std::max(body_limit, max_record_body_bytes);
        parser.body_limit(body_limit);  // what a chunked body may still bring
        if (const auto length = parser.content_length(); length && *length > body_limit)
          ec = http::error::body_limit;
        // A client that sent `Expect: 100-continue` (curl does for larger bodies) waits for this before it
        // sends the body, about a second in curl's case. Sent only while a body is still to come.
        if (!framing && !ec && !parser.is_done() && parser.get().version() >= 11 &&
            beast::iequals(parser.get()[http::field::expect], "100-continue")) {
          http::response<http::empty_body> go_on{http::status::continue_, 11};
          std::tie(ec, n) = co_await http::async_write(stream, go_on, use_tuple);
        }
        if (!framing && !ec) {
          parse_buffered(parser, buffer, ec);
          if (!ec && !parser.is_done())
            std::tie(ec, n) = co_await http::async_read(stream, buffer, parser, use_tuple);
        }
      }
      mine.splice(mine.end(), w.idle, pos);
      if (ec || framing) {
        std::optional<api_error> answer = framing;
        if (framing) {
          // answered below
        } else if (ec == http::error::body_limit) {
          answer = api_error{413, "body_too_large",
                             "request body exceeds " + std::to_string(body_limit) + " bytes"};
        } else if (ec == http::error::header_limit) {
          answer = api_error{
              431, "header_too_large",
              "request header exceeds " + std::to_string(options.limits.max_header_bytes) + " bytes"};
        } else if (ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
                   ec != http::error::end_of_stream && ec != http::error::partial_message) {
          answer = api_error{400, "bad_request", "malformed HTTP request: " + ec.message()};
        }
        if (answer) {
          metrics.count_request(route::other, answer->status);
          auto res = make_response(mem, static_cast<http::status>(answer->status), 11, false,
                                   error_text(mem, answer->code, answer->message));
          lowest.expires_after(options.read_timeout);
          co_await http::async_write(stream, res, use_tuple);
        }
        break;  // end of stream, timeout, reset or an error already answered: close
      }

      request& req = parser.get();
      auto started = clock::now();
      lowest.expires_never();  // a long-poll may legitimately take up to a minute
      response res{std::piecewise_construct, std::make_tuple(mem), std::make_tuple(mem)};
      route r = route::other;
      std::string name;  // the authenticated client, empty without a valid token
      // A long-poll, or a queued acquire (POST .../acquire?wait_ms=): both wait, and a client that goes away
      // meanwhile cancels them (a queued acquire gives its place up, or its grant back).
      const bool long_poll = (req.method() == http::verb::get || req.method() == http::verb::post) &&
                             req.target().find("wait_ms=") != std::string_view::npos;
      auto watch = long_poll ? watch_peer(lowest.socket()) : nullptr;
      try {
        if (watch) {
          res = co_await asio::co_spawn(
              co_await asio::this_coro::executor, routes.handle(req, r, client, started, name, mem),
              asio::bind_cancellation_slot(watch->signal.slot(), asio::use_awaitable));
        } else {
          res = co_await routes.handle(req, r, client, started, name, mem);
        }
      } catch (const waiters_exhausted& e) {
        res = make_response(mem, http::status::service_unavailable, req.version(), req.keep_alive(),
                            error_text(mem, "too_many_waiters", std::string(e.what()) + "; retry later"));
        res.set(http::field::retry_after, "1");
      } catch (const locks_exhausted& e) {
        res = make_response(
            mem, e.server_wide ? http::status::service_unavailable : http::status::too_many_requests,
            req.version(), req.keep_alive(),
            error_text(mem, e.server_wide ? "too_many_locks" : "lock_quota_exceeded",
                       std::string(e.what()) + "; release a lock or retry later"));
        res.set(http::field::retry_after, "1");
      } catch (const storage_unavailable& e) {
        res = make_response(mem, http::status::service_unavailable, req.version(), false,
                            error_text(mem, "storage_unavailable", e.what()));
        res.set(http::field::retry_after, "1");
      } catch (const std::exception& e) {
        log::error("request_failed", {{"target", std::string(req.target())}, {"error", e.what()}});
        res = make_response(mem, http::status::internal_server_error, req.version(), false,
                            error_text(mem, "internal", e.what()));
      }
      if (watch) {
        watch->done = true;
        beast::error_code ignored;
        lowest.socket().cancel(ignored);
        if (watch->gone) break;  // nobody to answer; closing frees the slot now, not at wait_ms
      }
      if (!name.empty()) authenticated = true;
      // A refusal for who the client is or how much it sends ends the connection, so a client cannot hold a
      // slot with refused requests; with tokens, so does any answer to a request without a valid one.
      const auto status = res.result_int();
      if (status == 401 || status == 403 || status == 429 || (options.tokens && name.empty()))
        res.keep_alive(false);
      metrics.count_request(r, static_cast<int>(res.result_int()));
      if (r != route::wait && !long_poll)
        metrics.request_seconds.observe(std::chrono::duration<double>(clock::now() - started).count());
      if (draining.load()) res.keep_alive(false);
      lowest.expires_after(options.read_timeout);
      // The answer to a HEAD (always 405) is its header alone: a client reads no body after a HEAD, so body
      // bytes would be taken for the start of the next answer on the connection.
      text wire(mem);
      append_wire_bytes(res, req.method() == http::verb::head, wire);
      auto [wec, wn] = co_await asio::async_write(stream, asio::buffer(wire.data(), wire.size()), use_tuple);
      if (wec || !res.keep_alive()) break;
    }
  }

  asio::awaitable<void> accept_loop() {
    std::size_t next = 0;
    for (;;) {
      worker& w = *workers[next];
      next = (next + 1) % workers.size();
      auto [ec, socket] = co_await acceptor.async_accept(w.ioc, use_tuple);
      if (ec) {
        if (!acceptor.is_open() || draining.load()) co_return;
        log::warn("accept_failed", {{"error", ec.message()}});
        // Out of descriptors or similar: back off briefly instead of spinning.
        asio::steady_timer t(acceptor.get_executor(), std::chrono::milliseconds(50));
        co_await t.async_wait(use_tuple);
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      std::string address = socket.remote_endpoint(ec).address().to_string();
      std::optional<std::pair<std::string, std::string>> refusal;
      if (open_connections.load() >= static_cast<std::int64_t>(options.limits.max_connections))
        refusal.emplace("too_many_connections", "the server has " +
                                                    std::to_string(options.limits.max_connections) +
                                                    " open connections, its limit; retry later");
      else if (!per_address.take(address))
        refusal.emplace("too_many_connections_from_address",
                        "this address has " + std::to_string(options.limits.max_connections_per_address) +
                            " open connections, the limit per address; retry later");
      if (refusal) {
        if (refusing.fetch_add(1) < max_refusing) {
          asio::co_spawn(w.ioc, refuse_connection(std::move(socket), refusal->first, refusal->second),
                         asio::detached);
        } else {
          refusing.fetch_sub(1);
          socket.close(ec);
        }
        continue;
      }
      // Counted here, not in the session, so a burst of accepts cannot overshoot the limit.
      open_connections.fetch_add(1);
      asio::co_spawn(w.ioc, session(std::move(socket), w, std::move(address)), asio::detached);
    }
  }

  asio::awaitable<void> sweep_loop() {
    asio::steady_timer t(workers[0]->ioc);
    while (!draining.load()) {
      t.expires_after(options.sweep_interval);
      co_await t.async_wait(use_tuple);
      std::size_t expired = 0;
      for (;;) {
        auto step = service.sweep_step();
        expired += step.expired;
        if (step.pass_done || draining.load()) break;
        // Between steps, let this thread's connections and the other threads' requests waiting for the
        // mutex run, and let the log take the step's records before the next: a million leases falling due
        // in the same second are thousands of steps, paced by the disk (lock_service::wait_logged).
        if (step.last_lsn)
          co_await service.wait_logged(step.last_lsn);
        else
          co_await asio::post(workers[0]->ioc, asio::use_awaitable);
      }
      if (expired) log::debug("expired", {{"count", expired}});
    }
  }

  // SIGHUP: new connections get the certificate, key and client CAs the files hold now; open connections,
  // leases and the lock table are not touched. A file that does not load leaves the old ones in use.
  void reload_tls() {
    auto r = reload_server_tls(*options.tls, std::chrono::system_clock::now());
    if (!r.ok()) {
      metrics.tls_reloads_failed.fetch_add(1, std::memory_order_relaxed);
      log::error(
          "tls_reload_failed",
          {{"error", r.error}, {"kept", "previous certificate"}, {"served_sha256", r.certificate.sha256}});
      return;
    }
    metrics.tls_reloads_ok.fetch_add(1, std::memory_order_relaxed);
    metrics.tls_certificate_not_after.store(r.certificate.not_after_seconds, std::memory_order_relaxed);
    log_certificate("tls_reloaded", r.certificate);
  }

  // Starts drain() once, whoever asks first (a signal, or a storage failure). Thread-safe.
  void begin_drain(std::chrono::milliseconds timeout) {
    if (drain_started.exchange(true)) return;
    sd_notify::notify("STOPPING=1");
    asio::co_spawn(workers[0]->ioc, drain(timeout), asio::detached);
  }

  asio::awaitable<void> drain(std::chrono::milliseconds timeout) {
    draining.store(true);
    beast::error_code ignored;
    acceptor.close(ignored);
    service.wake_all();
    // Idle keep-alive connections have nothing in flight: close them on their own threads.
    for (auto& w : workers)
      asio::post(w->ioc, [wp = w.get()] {
        for (auto* s : wp->idle)
          s->cancel();
      });
    asio::steady_timer t(workers[0]->ioc);
    auto give_up = clock::now() + timeout;
    while (open_connections.load() > 0 && clock::now() < give_up) {
      t.expires_after(std::chrono::milliseconds(10));
      co_await t.async_wait(use_tuple);
    }
    for (auto& w : workers)
      w->ioc.stop();
  }
};

http_server::http_server(http_options options, lock_service& service, server_metrics& metrics)
    : impl_(std::make_unique<impl>(std::move(options), service, metrics)) {}

http_server::~http_server() = default;

tcp::endpoint http_server::bind() {
  auto& a = impl_->acceptor;
  a.open(impl_->options.listen.protocol());
  a.set_option(tcp::acceptor::reuse_address(true));
  a.bind(impl_->options.listen);
  a.listen(asio::socket_base::max_listen_connections);
  return a.local_endpoint();
}

void http_server::stop(std::chrono::milliseconds drain_timeout) {
  impl_->begin_drain(drain_timeout);
}

void http_server::run() {
  auto& m = *impl_;
  auto& main_ioc = m.workers[0]->ioc;
  asio::signal_set signals(main_ioc, SIGINT, SIGTERM);
  asio::signal_set hangup(main_ioc, SIGHUP);
  std::function<void()> await_hangup = [&] {
    hangup.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      if (!m.options.tokens && !m.options.tls)
        log::info("sighup_ignored", {{"reason", "no --tokens-file and no --tls-cert"}});
      if (m.options.tokens) {
        if (auto failed = m.options.tokens->reload())
          log::error("tokens_reload_failed", {{"error", *failed}, {"kept", "previous tokens"}});
        else
          log::info("tokens_reloaded", {{"file", m.options.tokens->path()},
                                        {"clients", m.options.tokens->current()->clients.size()}});
      }
      // Independent of the tokens: a bad tokens file does not keep a new certificate out, nor the reverse.
      if (m.options.tls) m.reload_tls();
      await_hangup();
    });
  };
  await_hangup();
  signals.async_wait([&m](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    log::info("shutdown", {{"signal", sig}});
    m.begin_drain(m.options.drain_timeout);
  });
  asio::co_spawn(main_ioc, m.accept_loop(), asio::detached);
  asio::co_spawn(main_ioc, m.sweep_loop(), asio::detached);
  if (auto timeout = sd_notify::watchdog_timeout())
    asio::co_spawn(main_ioc, watchdog_loop(m.io_contexts(), *timeout, m.draining), asio::detached);

  // Keep every worker's run() alive until drain() stops it, even while it has no connection.
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  for (auto& w : m.workers)
    guards.push_back(asio::make_work_guard(w->ioc));
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < m.workers.size(); ++i)
    threads.emplace_back([&m, i] { m.workers[i]->ioc.run(); });
  main_ioc.run();
  for (auto& t : threads)
    t.join();
}

}  // namespace baton::server
