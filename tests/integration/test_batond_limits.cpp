// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE batond_limits
#include <boost/test/unit_test.hpp>

// Each limit of docs/security.md ("Limits") against a real batond started with a low value: the answer is the
// documented status with a JSON error (and Retry-After where the client may retry), and the server keeps
// serving.

#include "batond_fixture.hpp"
#include "test_pki.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/serialize.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;
namespace json = boost::json;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

std::string str(const http_reply& r, const char* field) {
  return r.json.is_object() && r.json.as_object().contains(field) && r.json.at(field).is_string()
             ? std::string(r.json.at(field).as_string())
             : std::string();
}

std::string acquire_body(std::string_view owner) {
  return json::serialize(json::object{{"owner", owner}, {"ttl_ms", 60000}});
}

// Polls the baton_waiters gauge until it reads `n` (bounded).
void wait_for_waiters(http_client& c, int n) {
  auto deadline = std::chrono::steady_clock::now() + 20s;
  const std::string line = "baton_waiters " + std::to_string(n) + "\n";
  while (c.get("/metrics").body.find(line) == std::string::npos) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "waiters never reached " << n);
    std::this_thread::sleep_for(20ms);
  }
}

// A tokens file granting "holder" (token "holder-secret-token") every key, plus `more` lines.
std::filesystem::path write_tokens(const temp_dir& scratch, const std::string& more = {}) {
  auto path = scratch.path() / "tokens";
  // SHA-256 of "holder-secret-token".
  std::ofstream(path)
      << "sha256:5ad82dd40119c2e3a9b59574d506e47a586ed6e49c4108290096823f78248b9c holder rw:*\n"
      << more;
  return path;
}

}  // namespace

// The server-wide limit, and the limit of one address (here both are reached by the same client).
BOOST_AUTO_TEST_CASE(
    a_connection_past_max_connections_or_its_addresss_limit_gets_503_with_retry_after_and_a_freed_slot_serves_again) {
  for (auto [flag, error] :
       {std::pair{"--max-connections", "too_many_connections"},
        std::pair{"--max-connections-per-address", "too_many_connections_from_address"}}) {
    BOOST_TEST_CONTEXT(flag) {
      temp_dir dir;
      batond_process server(dir.path(), {flag, "2", "--threads", "1"});
      auto a = std::make_unique<http_client>(server.port());
      http_client b(server.port());
      BOOST_REQUIRE(a->get("/healthz").status == 200);
      BOOST_REQUIRE(b.get("/healthz").status == 200);

      auto refused = http_client::raw(server.port(), "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
      BOOST_TEST(refused.status == 503);
      BOOST_TEST(str(refused, "error") == error);
      BOOST_TEST(refused.retry_after == "1");
      BOOST_TEST(!refused.keep_alive);

      a.reset();  // frees a slot once the server sees the close
      auto deadline = std::chrono::steady_clock::now() + 20s;
      int status = 0;
      while (
          (status =
               http_client::raw(server.port(), "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status) !=
          200) {
        BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                              "slot never freed, last status " << status);
        std::this_thread::sleep_for(20ms);
      }
      BOOST_TEST(b.get("/healthz").status == 200);
    }
  }
}

BOOST_AUTO_TEST_CASE(headers_and_bodies_past_their_limits_get_431_and_413) {
  temp_dir dir;
  batond_process server(dir.path(), {"--max-header-bytes", "2048", "--max-body-bytes", "1024"});
  auto big_header = http_client::raw(server.port(), "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " +
                                                        std::string(4096, 'p') + "\r\n\r\n");
  BOOST_TEST(big_header.status == 431);
  BOOST_TEST(str(big_header, "error") == "header_too_large");
  BOOST_TEST(str(big_header, "message").find("2048") != std::string::npos);

  std::string body = R"({"owner":")" + std::string(2000, 'o') + R"(","ttl_ms":1000})";
  auto big_body = http_client::raw(
      server.port(), "POST /v1/locks/k/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body);
  BOOST_TEST(big_body.status == 413);
  BOOST_TEST(str(big_body, "error") == "body_too_large");

  // Just under the limits is served.
  auto c = server.client();
  auto ok = c.request("GET", "/v1/locks/" + std::string(1500, 'k'));
  BOOST_TEST(ok.status == 400);  // the key is too long for the protocol, but the header was read
  BOOST_TEST(str(ok, "error") == "bad_request");
  BOOST_TEST(c.post("/v1/locks/k/acquire", acquire_body(std::string(900, 'o'))).status ==
             400);  // owner > 256
  BOOST_TEST(c.post("/v1/locks/k/acquire", acquire_body("o")).status == 200);
}

BOOST_AUTO_TEST_CASE(a_client_over_its_rate_gets_429_with_retry_after) {
  temp_dir dir;
  // One token every 10 s and a burst of 3: the fourth quick request is refused whatever the machine's speed.
  batond_process server(dir.path(), {"--rate-limit", "0.1", "--rate-burst", "3"});
  auto c = server.client();
  for (int i = 0; i < 3; ++i)
    BOOST_REQUIRE(c.get("/v1/locks/k").status == 404);
  auto refused = c.get("/v1/locks/k");
  BOOST_TEST(refused.status == 429);
  BOOST_TEST(str(refused, "error") == "rate_limited");
  BOOST_REQUIRE(!refused.retry_after.empty());
  int after = std::stoi(refused.retry_after);
  BOOST_TEST(after >= 1);
  BOOST_TEST(after <= 10);
  BOOST_TEST(!refused.keep_alive);  // a refused client does not keep its connection slot
  BOOST_TEST(c.get("/healthz").status ==
             429);  // on a new connection: the bucket is the client's, not the connection's
}

BOOST_AUTO_TEST_CASE(long_polls_past_the_per_key_and_total_waiter_limits_get_503_with_retry_after) {
  temp_dir dir;
  batond_process server(dir.path(), {"--max-waiters-per-key", "2", "--max-waiters", "3"});
  auto c = server.client();
  std::vector<int> answers(3, 0);
  std::vector<std::jthread> waiters;  // joined even when a check fails (bounded by wait_ms)
  auto start_waiter = [&](int i, std::string key) {
    waiters.emplace_back([&, i, key] {
      http_client w(server.port());
      answers[i] = w.get("/v1/locks/" + key + "?wait_ms=30000&token=0").status;
    });
  };
  start_waiter(0, "a");
  start_waiter(1, "a");
  wait_for_waiters(c, 2);

  auto per_key = c.get("/v1/locks/a?wait_ms=30000&token=0");
  BOOST_TEST(per_key.status == 503);
  BOOST_TEST(str(per_key, "error") == "too_many_waiters");
  BOOST_TEST(per_key.retry_after == "1");
  BOOST_TEST(c.get("/v1/locks/a").status == 404);  // a plain GET is not a waiter

  start_waiter(2, "b");
  wait_for_waiters(c, 3);
  auto total = c.get("/v1/locks/c?wait_ms=30000&token=0");
  BOOST_TEST(total.status == 503);
  BOOST_TEST(str(total, "error") == "too_many_waiters");

  // Acquiring the keys wakes the waiters; their slots are free again.
  BOOST_TEST(c.post("/v1/locks/a/acquire", acquire_body("o")).status == 200);
  BOOST_TEST(c.post("/v1/locks/b/acquire", acquire_body("o")).status == 200);
  for (auto& t : waiters)
    t.join();
  for (int s : answers)
    BOOST_TEST(s == 200);
  wait_for_waiters(c, 0);
  auto again = c.get("/v1/locks/c?wait_ms=100&token=0");
  BOOST_TEST(again.status == 404);
}

// With tokens the rate is charged per authenticated name: a process on the holder's address that has no
// token spends only the address's bucket for unauthenticated requests, never the holder's.
BOOST_AUTO_TEST_CASE(unauthenticated_requests_from_the_holders_address_do_not_spend_its_rate) {
  temp_dir dir, scratch;
  const auto tokens = write_tokens(scratch);
  batond_process server(dir.path(),
                        {"--tokens-file", tokens.string(), "--rate-limit", "0.1", "--rate-burst", "3"});
  auto holder = server.client();
  holder.set_authorization("Bearer holder-secret-token");
  auto granted = holder.post("/v1/locks/k/acquire", acquire_body("h"));
  BOOST_REQUIRE(granted.status == 200);
  const auto token = granted.json.at("token").as_int64();

  int refused = 0;
  for (int i = 0; i < 6; ++i) {
    auto r = http_client::raw(server.port(), "GET /v1/locks/k HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    if (r.status == 429) ++refused;
  }
  BOOST_TEST(refused >= 3);  // the address's bucket of 3 ran out

  auto renewed =
      holder.post("/v1/locks/k/renew",
                  json::serialize(json::object{{"owner", "h"}, {"token", token}, {"ttl_ms", 60000}}));
  BOOST_TEST(renewed.status == 200);
}

// With tokens, a connection without a valid token cannot stay open: a 401 (or 403, 429) closes it, an
// unauthenticated /healthz closes it, and one that sends nothing is closed after
// --unauthenticated-timeout-ms. An authenticated client keeps its connection.
BOOST_AUTO_TEST_CASE(connections_without_a_valid_token_are_closed_after_their_answer_or_a_short_idle_time) {
  temp_dir dir, scratch;
  const auto tokens = write_tokens(scratch);
  batond_process server(dir.path(),
                        {"--tokens-file", tokens.string(), "--unauthenticated-timeout-ms", "300"});

  auto unauthorized = http_client::raw(server.port(), "GET /v1/locks/k HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  BOOST_TEST(unauthorized.status == 401);
  BOOST_TEST(!unauthorized.keep_alive);
  auto health = http_client::raw(server.port(), "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  BOOST_TEST(health.status == 200);
  BOOST_TEST(!health.keep_alive);

  asio::io_context ioc;
  tcp::socket silent(ioc);
  silent.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.port()));
  auto started = std::chrono::steady_clock::now();
  char byte;
  boost::system::error_code ec;
  asio::read(silent, asio::buffer(&byte, 1), ec);  // returns when the server closes
  BOOST_TEST(ec == asio::error::eof);
  BOOST_TEST((std::chrono::steady_clock::now() - started < 10s));

  auto holder = server.client();
  holder.set_authorization("Bearer holder-secret-token");
  auto ok = holder.get("/v1/locks/k");
  BOOST_TEST(ok.status == 404);
  BOOST_TEST(ok.keep_alive);
}

// A long-poll whose client has gone is noticed at once: its waiter and its connection slot are freed, not
// held until wait_ms.
BOOST_AUTO_TEST_CASE(a_long_poll_whose_client_closed_frees_its_waiter_and_connection_at_once) {
  temp_dir dir;
  batond_process server(dir.path(), {"--max-connections", "2", "--threads", "1"});
  auto c = server.client();
  {
    asio::io_context ioc;
    tcp::socket s(ioc);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.port()));
    asio::write(s, asio::buffer(std::string_view("GET /v1/locks/k?wait_ms=60000&token=0 HTTP/1.1\r\n"
                                                 "Host: 127.0.0.1\r\n\r\n")));
    wait_for_waiters(c, 1);
  }  // closed while waiting
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (c.get("/metrics").body.find("baton_waiters 0\n") == std::string::npos) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "the waiter outlived its client");
    std::this_thread::sleep_for(20ms);
  }
  // The slot is free: a second connection (the limit is 2, c holds one) is served.
  BOOST_TEST(http_client::raw(server.port(), "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status ==
             200);
  // A long-poll whose client stays is still answered.
  BOOST_TEST(c.get("/v1/locks/k?wait_ms=200&token=0").status == 404);
}

// The table is bounded: past --max-locks an acquire of a free key gets 503 too_many_locks, and past a
// client's max_locks quota 429 lock_quota_exceeded. A refused acquire takes no token and changes nothing,
// a holder re-acquiring its own key is not refused, and each refusal is counted.
BOOST_AUTO_TEST_CASE(acquires_past_max_locks_and_a_clients_quota_are_refused_before_any_change) {
  temp_dir dir, scratch;
  // SHA-256 of "small-secret-token".
  const auto tokens = write_tokens(
      scratch,
      "sha256:82b1d41c29c3a14514f066eb8df50f9d10af236c6e7bc7b814985b6fc60b92c1 small rw:* max_locks=1\n");
  batond_process server(dir.path(), {"--tokens-file", tokens.string(), "--max-locks", "3"});
  auto holder = server.client();
  holder.set_authorization("Bearer holder-secret-token");
  auto small = server.client();
  small.set_authorization("Bearer small-secret-token");
  auto token_of = [](const http_reply& r) { return r.json.at("token").as_int64(); };

  BOOST_REQUIRE(small.post("/v1/locks/s1/acquire", acquire_body("o")).status == 200);
  auto over_quota = small.post("/v1/locks/s2/acquire", acquire_body("o"));
  BOOST_TEST(over_quota.status == 429);
  BOOST_TEST(str(over_quota, "error") == "lock_quota_exceeded");
  BOOST_TEST(over_quota.retry_after == "1");
  BOOST_TEST(small.post("/v1/locks/s1/acquire", acquire_body("o")).status == 200);  // its own key again

  BOOST_REQUIRE(holder.post("/v1/locks/a/acquire", acquire_body("o")).status == 200);
  auto last = holder.post("/v1/locks/b/acquire", acquire_body("o"));
  BOOST_REQUIRE(last.status == 200);
  auto full = holder.post("/v1/locks/c/acquire", acquire_body("o"));
  BOOST_TEST(full.status == 503);
  BOOST_TEST(str(full, "error") == "too_many_locks");
  BOOST_TEST(full.retry_after == "1");
  BOOST_TEST(holder.get("/v1/locks/c").status == 404);
  auto again = holder.post("/v1/locks/b/acquire", acquire_body("o"));  // re-grant: no new lock
  BOOST_TEST(again.status == 200);
  BOOST_TEST(token_of(again) == token_of(last) + 1);  // the refusals took no token

  auto metrics = holder.get("/metrics").body;
  BOOST_TEST(metrics.find("baton_operations_total{op=\"acquire\",outcome=\"too_many_locks\"} 1\n") !=
             std::string::npos);
  BOOST_TEST(metrics.find("baton_operations_total{op=\"acquire\",outcome=\"lock_quota_exceeded\"} 1\n") !=
             std::string::npos);
}

// A client that makes batond log (each failed TLS handshake is a warn line) cannot make it write without
// bound: an event writes at most 20 lines a second, and a later line says how many were dropped.
BOOST_AUTO_TEST_CASE(a_flood_of_failed_tls_handshakes_writes_a_bounded_number_of_log_lines) {
  temp_dir dir, logs;
  const auto log_path = logs.path() / "batond.log";
  batond_process server(dir.path(), test_pki::shared().batond_args(), 0, log_path.string());
  auto garbage = [&] {
    asio::io_context ioc;
    tcp::socket s(ioc);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.port()));
    // A ClientHello offering only TLS_RSA_WITH_AES_128_CBC_SHA, which batond does not serve.
    std::string hello = "\x03\x03" + std::string(32, '\0') + std::string("\x00\x00\x02\x00\x2f\x01\x00", 7);
    std::string handshake = "\x01" + std::string(1, '\0') + std::string(1, '\0') +
                            std::string(1, static_cast<char>(hello.size())) + hello;
    std::string record =
        std::string("\x16\x03\x01\x00", 4) + std::string(1, static_cast<char>(handshake.size())) + handshake;
    asio::write(s, asio::buffer(record));
    char byte;
    boost::system::error_code ec;
    asio::read(s, asio::buffer(&byte, 1), ec);  // until batond closes
  };
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i)
    garbage();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::this_thread::sleep_for(1100ms);
  garbage();  // the first line of a new window
  server.terminate();

  std::ifstream in(log_path);
  int lines = 0;
  bool counted = false;
  for (std::string line; std::getline(in, line);) {
    if (line.find("event=tls_handshake_failed") == std::string::npos) continue;
    ++lines;
    counted = counted || line.find(" suppressed=") != std::string::npos;
  }
  BOOST_TEST(lines >= 20);
  BOOST_TEST(lines <= 20 * (static_cast<int>(seconds) + 2) + 1);
  if (seconds < 4) BOOST_TEST(lines < 101);
  BOOST_TEST(counted);
}

// The default limits fit the largest valid request (a 512-byte key, a 256-byte owner even with every byte
// JSON-escaped) with room to spare, and keep what a stalled request can make batond hold small
// (docs/security.md, "Memory per connection").
BOOST_AUTO_TEST_CASE(default_limits_are_8_kib_of_header_and_8_kib_of_body) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  std::string owner;
  for (int i = 0; i < 256; ++i)
    owner += "\\u0041";
  const std::string largest = R"({"owner":")" + owner + R"(","ttl_ms":60000})";
  BOOST_TEST(c.post("/v1/locks/" + std::string(512, 'k') + "/acquire", largest).status == 200);

  const std::string body = R"({"owner":"o","ttl_ms":1000,"pad":")" + std::string(8 * 1024, 'p') + R"("})";
  auto big_body = http_client::raw(
      server.port(),
      "POST /v1/locks/k/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body);
  BOOST_TEST(big_body.status == 413);
  auto big_header = http_client::raw(server.port(), "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " +
                                                        std::string(9 * 1024, 'p') + "\r\n\r\n");
  BOOST_TEST(big_header.status == 431);
}
