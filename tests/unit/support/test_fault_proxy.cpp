// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE fault_proxy
#include <boost/test/unit_test.hpp>

#include "batond_fixture.hpp"
#include "fault_proxy.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <functional>
#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;

namespace {

// One keep-alive connection, a hard deadline per step and no retry. The faults under test must reach the
// caller, and http_client hides them: it retries once on a fresh connection (so a lost reply or a reset
// is papered over), and its SO_RCVTIMEO does not bound Asio's blocking reads (after EAGAIN Asio polls again
// with no timeout), so against a silent peer it would wait forever.
class strict_client {
 public:
  strict_client(unsigned short port, std::chrono::milliseconds timeout) : timeout_(timeout) {
    run([&](auto handler) {
      stream_.async_connect(asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), port), handler);
    });
  }

  /// Throws boost::system::system_error: beast::error::timeout when the deadline passed, else the socket's
  /// or the parser's error.
  http_reply request(http::verb verb, std::string_view target, std::string_view body = {}) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.keep_alive(true);
    req.prepare_payload();
    run([&](auto handler) { http::async_write(stream_, req, handler); });
    http::response<http::string_body> res;
    run([&](auto handler) { http::async_read(stream_, buffer_, res, handler); });
    http_reply reply;
    reply.status = static_cast<int>(res.result_int());
    reply.body = res.body();
    boost::system::error_code ec;
    reply.json = json::parse(reply.body, ec);
    return reply;
  }

 private:
  // Runs one asynchronous step to completion under the deadline and throws its error.
  template <class Start>
  void run(Start start) {
    boost::system::error_code result;
    stream_.expires_after(timeout_);
    start([&](boost::system::error_code ec, auto&&...) { result = ec; });
    ioc_.restart();
    ioc_.run();
    if (result) throw boost::system::system_error(result);
  }

  asio::io_context ioc_;
  beast::tcp_stream stream_{ioc_};
  beast::flat_buffer buffer_;
  std::chrono::milliseconds timeout_;
};

bool is_timeout(const boost::system::system_error& e) {
  return e.code() == beast::error::timeout;
}
// An RST, as opposed to silence or an orderly close (which would surface as end of stream).
bool is_reset(const boost::system::system_error& e) {
  return e.code() == asio::error::connection_reset;
}

std::string acquire_body(std::string_view owner, int ttl_ms) {
  return json::serialize(json::object{{"owner", owner}, {"ttl_ms", ttl_ms}});
}
std::uint64_t token_of(const http_reply& r) {
  return r.json.at("token").to_number<std::uint64_t>();
}

// The proxy acts on its own thread; waits for what it should do, boundedly, since a loaded machine may be
// slow to get there.
bool eventually(const std::function<bool()>& done, std::chrono::seconds bound = 30s) {
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

struct proxied_batond {
  temp_dir dir;
  batond_process server{dir.path()};
  fault_proxy proxy{server.port()};
  http_client direct = server.client();  // bypasses the proxy: what the server really applied
};

// Feeds `chunks` to `framer` and returns the sizes of the complete messages, checking that messages never
// overlap.
std::vector<std::size_t> message_sizes(http_framer& framer, const std::vector<std::string_view>& chunks) {
  std::vector<std::size_t> sizes;
  bool in_message = false;
  std::size_t size = 0;
  for (auto chunk : chunks) {
    while (!chunk.empty()) {
      auto seg = framer.next(chunk);
      BOOST_REQUIRE(seg.size > 0);
      chunk.remove_prefix(seg.size);
      if (seg.starts_message) {
        BOOST_REQUIRE(!in_message);
        in_message = true;
        size = 0;
      }
      size += seg.size;
      if (seg.ends_message) {
        BOOST_REQUIRE(in_message);
        in_message = false;
        sizes.push_back(size);
      }
    }
  }
  return sizes;
}

}  // namespace

// ---- The framer, without a network

BOOST_AUTO_TEST_CASE(framer_splits_pipelined_requests_at_their_content_length) {
  http_framer framer(http_framer::kind::request);
  std::string_view post = "POST /v1/locks/a/acquire HTTP/1.1\r\ncontent-LENGTH:  5 \r\n\r\nhello";
  std::string_view get = "GET /v1/locks/a HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string both = std::string(post) + std::string(get);
  BOOST_TEST(message_sizes(framer, {both}) == (std::vector<std::size_t>{post.size(), get.size()}));
  BOOST_TEST(!framer.opaque());
}

BOOST_AUTO_TEST_CASE(framer_finds_a_reply_end_when_every_byte_arrives_alone) {
  http_framer framer(http_framer::kind::response);
  std::string_view reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < reply.size(); ++i)
    bytes.push_back(reply.substr(i, 1));
  BOOST_TEST(message_sizes(framer, bytes) == std::vector<std::size_t>{reply.size()});
}

BOOST_AUTO_TEST_CASE(framer_gives_204_no_body_and_a_reply_without_length_the_rest_of_the_stream) {
  http_framer framer(http_framer::kind::response);
  std::string_view no_content = "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n";
  std::string_view unframed = "HTTP/1.0 200 OK\r\n\r\nuntil the connection closes";
  std::string both = std::string(no_content) + std::string(unframed);
  BOOST_TEST(message_sizes(framer, {both}) == std::vector<std::size_t>{no_content.size()});
  BOOST_TEST(!framer.opaque());
}

BOOST_AUTO_TEST_CASE(framer_turns_opaque_on_what_it_cannot_frame) {
  for (std::string_view bytes : {"\x16\x03\x01 not http\r\n", "GET /a HTTP/2\r\n\r\n",
                                 "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                                 "POST /a HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
                                 "POST /a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"}) {
    http_framer framer(http_framer::kind::request);
    auto seg = framer.next(bytes);
    BOOST_TEST(framer.opaque(), bytes);
    BOOST_TEST(seg.size == bytes.size());
    BOOST_TEST(!seg.ends_message);
  }
}

// ---- The proxy, against a real batond

BOOST_FIXTURE_TEST_CASE(pass_through_keeps_one_keep_alive_connection, proxied_batond) {
  http_client c(proxy.port());
  auto acquired = c.post("/v1/locks/k/acquire", acquire_body("a", 30000));
  BOOST_TEST(acquired.status == 200);
  auto held = c.get("/v1/locks/k");
  BOOST_TEST(held.status == 200);
  BOOST_TEST(token_of(held) == token_of(acquired));
  BOOST_TEST(c.get("/healthz").status == 200);

  BOOST_TEST(proxy.connections_accepted() == 1u);
  BOOST_TEST(proxy.requests_forwarded() == 3u);
  BOOST_TEST(proxy.responses_forwarded() == 3u);
}

BOOST_FIXTURE_TEST_CASE(swallowed_reply_with_hang_times_the_client_out_though_the_server_applied_it,
                        proxied_batond) {
  proxy.drop_responses(1, drop_style::hang);
  strict_client c(proxy.port(), 500ms);
  BOOST_CHECK_EXCEPTION(c.request(http::verb::post, "/v1/locks/k/acquire", acquire_body("a", 30000)),
                        boost::system::system_error, is_timeout);

  // Counted when the reply's first byte arrives, which batond sends only once the acquire is on disk.
  BOOST_REQUIRE(eventually([&] { return proxy.responses_dropped() == 1; }));
  auto held = direct.get("/v1/locks/k");
  BOOST_TEST(held.status == 200);
  BOOST_TEST(held.json.at("owner").as_string() == "a");
  BOOST_TEST(proxy.connections_reset() == 0u);

  // Only one reply was to be lost: a retry on a fresh connection is answered, with a newer token.
  http_client retry(proxy.port());
  auto again = retry.post("/v1/locks/k/acquire", acquire_body("a", 30000));
  BOOST_TEST(again.status == 200);
  BOOST_TEST(token_of(again) > token_of(held));
}

BOOST_FIXTURE_TEST_CASE(swallowed_reply_with_reset_gives_the_client_a_connection_error, proxied_batond) {
  proxy.drop_responses(1, drop_style::reset);
  strict_client c(proxy.port(), 30s);
  BOOST_CHECK_EXCEPTION(c.request(http::verb::post, "/v1/locks/k/acquire", acquire_body("a", 30000)),
                        boost::system::system_error, is_reset);

  BOOST_TEST(proxy.responses_dropped() == 1u);
  BOOST_TEST(proxy.connections_reset() == 1u);
  BOOST_TEST(direct.get("/v1/locks/k").status == 200);
}

BOOST_FIXTURE_TEST_CASE(replaced_reply_is_what_the_client_hears_though_the_server_applied_the_request,
                        proxied_batond) {
  const std::string body = R"({"error":"from_proxy"})";
  const std::string reply =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
      body;
  proxy.replace_responses(1, reply);
  strict_client c(proxy.port(), 30s);
  auto r = c.request(http::verb::post, "/v1/locks/k/acquire", acquire_body("a", 30000));
  BOOST_TEST(r.status == 503);
  BOOST_TEST(r.json.at("error").as_string() == "from_proxy");
  BOOST_TEST(proxy.responses_replaced() == 1u);
  auto held = direct.get("/v1/locks/k");
  BOOST_TEST(held.status == 200);
  BOOST_TEST(held.json.at("owner").as_string() == "a");

  // Only one reply was to be replaced: the next one on the same connection is the server's own.
  auto again = c.request(http::verb::get, "/v1/locks/k");
  BOOST_TEST(again.status == 200);
  BOOST_TEST(token_of(again) == token_of(held));
  BOOST_TEST(proxy.responses_replaced() == 1u);
}

BOOST_FIXTURE_TEST_CASE(swallowed_request_never_reaches_the_server, proxied_batond) {
  proxy.drop_requests(1);
  strict_client c(proxy.port(), 500ms);
  BOOST_CHECK_EXCEPTION(c.request(http::verb::post, "/v1/locks/k/acquire", acquire_body("a", 30000)),
                        boost::system::system_error, is_timeout);

  // Once counted the whole request is swallowed, so it cannot reach the server later.
  BOOST_REQUIRE(eventually([&] { return proxy.requests_dropped() == 1; }));
  BOOST_TEST(direct.get("/v1/locks/k").status == 404);
  BOOST_TEST(proxy.requests_forwarded() == 0u);
}

BOOST_FIXTURE_TEST_CASE(reset_all_breaks_an_open_keep_alive_connection, proxied_batond) {
  strict_client c(proxy.port(), 30s);
  BOOST_TEST(c.request(http::verb::get, "/healthz").status == 200);

  proxy.reset_all();
  BOOST_CHECK_EXCEPTION(c.request(http::verb::get, "/healthz"), boost::system::system_error, is_reset);
  BOOST_TEST(proxy.connections_reset() == 1u);

  // Only the connections open at the time were reset.
  http_client fresh(proxy.port());
  BOOST_TEST(fresh.get("/healthz").status == 200);
}

BOOST_FIXTURE_TEST_CASE(blackhole_hangs_open_and_new_connections_until_lifted, proxied_batond) {
  http_client idle(proxy.port());
  BOOST_TEST(idle.get("/healthz").status == 200);  // the proxy has set this connection up

  proxy.set_blackhole(true);
  {
    strict_client c(proxy.port(), 500ms);
    BOOST_CHECK_EXCEPTION(c.request(http::verb::post, "/v1/locks/k/acquire", acquire_body("a", 30000)),
                          boost::system::system_error, is_timeout);
  }
  BOOST_REQUIRE(eventually([&] { return proxy.bytes_blackholed() > 0; }));
  BOOST_TEST(direct.get("/v1/locks/k").status == 404);

  proxy.set_blackhole(false);
  BOOST_TEST(idle.post("/v1/locks/k/acquire", acquire_body("a", 30000)).status == 200);
  http_client fresh(proxy.port());
  BOOST_TEST(fresh.get("/v1/locks/k").status == 200);
}

BOOST_FIXTURE_TEST_CASE(delay_holds_each_direction_for_at_least_the_delay, proxied_batond) {
  constexpr auto delay = 200ms;
  http_client c(proxy.port());
  proxy.set_delay(delay);
  auto start = std::chrono::steady_clock::now();
  BOOST_TEST(c.get("/healthz").status == 200);
  auto elapsed = std::chrono::steady_clock::now() - start;
  // The reply cannot be read before the delayed request was written, and is itself delayed: twice over.
  // Only a lower bound: a loaded machine may add any amount.
  BOOST_TEST(elapsed >= 2 * delay);

  proxy.set_delay(0ms);
  BOOST_TEST(c.get("/healthz").status == 200);
}

BOOST_FIXTURE_TEST_CASE(refuse_resets_new_connections_and_spares_open_ones, proxied_batond) {
  http_client existing(proxy.port());
  BOOST_TEST(existing.get("/healthz").status == 200);  // accepted before refusing starts

  proxy.set_refuse(true);
  BOOST_CHECK_EXCEPTION(strict_client(proxy.port(), 30s).request(http::verb::get, "/healthz"),
                        boost::system::system_error, is_reset);
  BOOST_TEST(proxy.connections_refused() == 1u);
  BOOST_TEST(existing.get("/healthz").status == 200);

  proxy.set_refuse(false);
  http_client fresh(proxy.port());
  BOOST_TEST(fresh.get("/healthz").status == 200);
  BOOST_TEST(proxy.connections_accepted() == 3u);
}

BOOST_FIXTURE_TEST_CASE(a_delayed_duplicate_request_reaches_the_server_after_later_requests, proxied_batond) {
  proxy.duplicate_requests(1, 300ms);
  http_client c(proxy.port());
  auto first = c.post("/v1/locks/k/acquire", acquire_body("a", 30000));
  BOOST_REQUIRE(first.status == 200);
  const auto token = token_of(first);
  // Released before the copy of the acquire arrives: the copy then takes the free lock again.
  auto release = json::serialize(json::object{{"owner", "a"}, {"token", token}});
  BOOST_TEST(c.post("/v1/locks/k/release", release).status == 200);

  BOOST_REQUIRE(eventually([&] { return proxy.requests_duplicated() == 1; }));
  BOOST_REQUIRE(eventually([&] { return direct.get("/v1/locks/k").status == 200; }));
  auto now_held = direct.get("/v1/locks/k");
  BOOST_TEST(now_held.json.at("owner").as_string() == "a");
  BOOST_TEST(token_of(now_held) > token);
  BOOST_TEST(proxy.requests_forwarded() == 2u);  // the copy is not counted as forwarded
}

BOOST_FIXTURE_TEST_CASE(new_connections_follow_a_changed_upstream_port, proxied_batond) {
  temp_dir other_dir;
  batond_process other(other_dir.path());
  BOOST_TEST(other.client().post("/v1/locks/only-here/acquire", acquire_body("a", 30000)).status == 200);

  proxy.set_upstream_port(other.port());
  http_client fresh(proxy.port());
  BOOST_TEST(fresh.get("/v1/locks/only-here").status == 200);
}
