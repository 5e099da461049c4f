// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE batond
#include <boost/test/unit_test.hpp>

#include "batond_fixture.hpp"
#include "lock_requests.hpp"
#include "process_metrics_check.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <latch>
#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;

namespace {

std::string str(const http_reply& r, const char* field) {
  return std::string(r.json.at(field).as_string());
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Polls until GET says the key is free; the server's clock decides when that is.
void wait_until_free(http_client& c, const std::string& key, std::chrono::seconds bound = 20s) {
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (c.get("/v1/locks/" + key).status != 404) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "lease never expired");
    std::this_thread::sleep_for(20ms);
  }
}

// One connection for bytes as they are on the wire: answers that http_client could not read as one reply
// (a HEAD's, a 100 Continue before the real answer).
class raw_connection {
 public:
  explicit raw_connection(unsigned short port) : socket_(ioc_) {
    socket_.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  }
  void send(std::string_view bytes) { boost::asio::write(socket_, boost::asio::buffer(bytes)); }
  // Everything received until `until` has arrived, the peer closed or `bound` passed.
  std::string receive_until(std::string_view until, std::chrono::milliseconds bound = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    while (received_.find(until) == std::string::npos) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{socket_.native_handle(), POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[4096];
      boost::system::error_code ec;
      auto n = socket_.read_some(boost::asio::buffer(buf), ec);
      if (ec) break;
      received_.append(buf, n);
    }
    return received_;
  }

 private:
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  std::string received_;
};

std::string reason(const http_reply& r) {
  return r.json.is_object() && r.json.as_object().contains("reason") ? str(r, "reason") : "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(sixty_four_concurrent_acquires_of_one_key_have_exactly_one_winner) {
  temp_dir dir;
  batond_process server(dir.path());
  constexpr int n = 64;
  std::vector<std::unique_ptr<http_client>> clients;
  for (int i = 0; i < n; ++i)
    clients.push_back(std::make_unique<http_client>(server.port()));
  std::vector<http_reply> replies(n);
  std::latch start(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      replies[i] =
          clients[i]->post("/v1/locks/contended/acquire", acquire_body("w" + std::to_string(i), 30000));
    });
  for (auto& t : threads)
    t.join();

  int winners = 0, refused = 0;
  std::string winner;
  std::uint64_t winner_token = 0;
  for (auto& r : replies) {
    if (r.status == 200) {
      ++winners;
      winner = str(r, "owner");
      winner_token = token_of(r);
    } else if (r.status == 409) {
      ++refused;
      BOOST_TEST(str(r, "error") == "held");
    }
  }
  BOOST_TEST(winners == 1);
  BOOST_TEST(refused == n - 1);
  // Every refusal names the one winner.
  for (auto& r : replies)
    if (r.status == 409) {
      BOOST_TEST(str(r, "owner") == winner);
      BOOST_TEST(token_of(r) == winner_token);
    }
}

BOOST_AUTO_TEST_CASE(timeline_expired_holder_is_refused_after_the_next_token_is_granted) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  auto a = c.post("/v1/locks/report/acquire", acquire_body("worker-a", 300));
  BOOST_REQUIRE(a.status == 200);
  const auto n = token_of(a);
  BOOST_TEST(str(a, "key") == "report");
  BOOST_TEST(a.json.at("ttl_ms").as_int64() == 300);
  BOOST_TEST(c.post("/v1/locks/report/acquire", acquire_body("worker-b", 5000)).status == 409);

  wait_until_free(c, "report");  // worker-a stalls and stops renewing; its lease expires
  auto b = c.post("/v1/locks/report/acquire", acquire_body("worker-b", 5000));
  BOOST_REQUIRE(b.status == 200);
  BOOST_TEST(token_of(b) == n + 1);

  auto renew = c.post("/v1/locks/report/renew", renew_body("worker-a", n, 300));
  BOOST_TEST(renew.status == 409);
  BOOST_TEST(str(renew, "error") == "lost");
  BOOST_TEST(str(renew, "reason") == "owner_mismatch");
  auto release = c.post("/v1/locks/report/release", release_body("worker-a", n));
  BOOST_TEST(release.status == 409);
  BOOST_TEST(str(release, "error") == "not_owner");

  auto held = c.get("/v1/locks/report");
  BOOST_TEST(held.status == 200);
  BOOST_TEST(str(held, "owner") == "worker-b");
  BOOST_TEST(token_of(held) == n + 1);

  BOOST_TEST(c.post("/v1/locks/report/renew", renew_body("worker-b", n + 1, 5000)).status == 200);
  BOOST_TEST(c.post("/v1/locks/report/release", release_body("worker-b", n + 1)).status == 200);
  // A retried release after a lost reply is answered the same way.
  auto again = c.post("/v1/locks/report/release", release_body("worker-b", n + 1));
  BOOST_TEST(again.status == 200);
  BOOST_TEST(again.json.at("released").as_bool());
  // The next grant is larger again.
  BOOST_TEST(token_of(c.post("/v1/locks/report/acquire", acquire_body("worker-a", 5000))) == n + 2);
}

BOOST_AUTO_TEST_CASE(kill9_during_acquire_release_churn_never_lowers_tokens_and_keeps_held_leases) {
  temp_dir dir;
  std::uint64_t keeper_token = 0;
  std::uint64_t highest_acknowledged = 0;
  for (int round = 0; round < 3; ++round) {
    batond_process server(dir.path());
    auto c = server.client();
    if (round == 0) {
      auto k = c.post("/v1/locks/held/acquire", acquire_body("keeper", 600000));
      BOOST_REQUIRE(k.status == 200);
      keeper_token = token_of(k);
      highest_acknowledged = keeper_token;
    } else {
      // After the crash: the held lease survived and can be renewed; nobody else can take it.
      BOOST_TEST(c.post("/v1/locks/held/renew", renew_body("keeper", keeper_token, 600000)).status == 200);
      auto other = c.post("/v1/locks/held/acquire", acquire_body("intruder", 1000));
      BOOST_TEST(other.status == 409);
      BOOST_TEST(token_of(other) == keeper_token);
      // Every new token is larger than every token ever acknowledged.
      auto fresh =
          c.post("/v1/locks/fresh-" + std::to_string(round) + "/acquire", acquire_body("probe", 1000));
      BOOST_REQUIRE(fresh.status == 200);
      BOOST_TEST(token_of(fresh) > highest_acknowledged);
      highest_acknowledged = token_of(fresh);
    }

    std::atomic<std::uint64_t> max_ack{highest_acknowledged};
    std::atomic<int> cycles{0};
    std::vector<std::thread> workers;
    for (int w = 0; w < 4; ++w)
      workers.emplace_back([&, w] {
        try {
          http_client wc(server.port(), 10s);
          std::string key = "/v1/locks/churn-" + std::to_string(w);
          std::string owner = "churner-" + std::to_string(w);
          for (;;) {
            auto r = wc.post(key + "/acquire", acquire_body(owner, 60000));
            if (r.status != 200) continue;
            auto t = token_of(r);
            for (auto cur = max_ack.load(); t > cur && !max_ack.compare_exchange_weak(cur, t);) {
            }
            wc.post(key + "/release", release_body(owner, t));
            ++cycles;
          }
        } catch (const std::exception&) {
          // The server was killed under us: that is the point.
        }
      });
    // Let the churn run a while (bounded), then crash the server in the middle of it.
    auto until = std::chrono::steady_clock::now() + 10s;
    while (cycles.load() < 200 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(5ms);
    server.kill9();
    for (auto& t : workers)
      t.join();
    BOOST_TEST(cycles.load() > 0);
    highest_acknowledged = max_ack.load();
  }
  batond_process server(dir.path());
  auto c = server.client();
  // (A churn key may legitimately still be held: a lease granted just before the crash is restored.)
  auto last = c.post("/v1/locks/after-the-crashes/acquire", acquire_body("after", 1000));
  BOOST_REQUIRE(last.status == 200);
  BOOST_TEST(token_of(last) > highest_acknowledged);
}

BOOST_AUTO_TEST_CASE(restart_restores_held_leases_for_their_full_ttl) {
  temp_dir dir;
  std::uint64_t token;
  {
    batond_process server(dir.path());
    auto c = server.client();
    auto a = c.post("/v1/locks/migration/acquire", acquire_body("m", 60000));
    token = token_of(a);
    // Renewing with a longer TTL raises what a restart restores.
    BOOST_TEST(c.post("/v1/locks/migration/renew", renew_body("m", token, 120000)).status == 200);
    BOOST_TEST(server.terminate() == 0);
  }
  batond_process server(dir.path());
  auto c = server.client();
  auto g = c.get("/v1/locks/migration");
  BOOST_REQUIRE(g.status == 200);
  BOOST_TEST(token_of(g) == token);
  BOOST_TEST(g.json.at("ttl_remaining_ms").as_int64() > 60000);
  BOOST_TEST(c.post("/v1/locks/migration/renew", renew_body("m", token, 60000)).status == 200);
}

// A late copy of an earlier request (a retrying proxy, a held packet) that arrives after a renew raised the
// TTL must not shorten the lease its holder counts on: neither a 1 s renew nor a same-owner 1 s acquire,
// and not after a kill -9 either (docs/design.md, "No request shortens a lease").
BOOST_AUTO_TEST_CASE(late_copies_of_shorter_requests_do_not_shorten_a_raised_lease_even_across_a_kill9) {
  temp_dir dir;
  {
    batond_process server(dir.path());
    auto c = server.client();
    const auto token = token_of(c.post("/v1/locks/job/acquire", acquire_body("w", 1000)));
    BOOST_TEST(c.post("/v1/locks/job/renew", renew_body("w", token, 60000)).status == 200);
    BOOST_TEST(c.post("/v1/locks/job/renew", renew_body("w", token, 1000)).status == 200);
    auto g = c.get("/v1/locks/job");
    BOOST_REQUIRE(g.status == 200);
    BOOST_TEST(g.json.at("ttl_remaining_ms").as_int64() > 30000);
    auto again = c.post("/v1/locks/job/acquire", acquire_body("w", 1000));
    BOOST_REQUIRE(again.status == 200);
    BOOST_TEST(token_of(again) > token);
    BOOST_TEST(c.get("/v1/locks/job").json.at("ttl_remaining_ms").as_int64() > 30000);
    BOOST_TEST(c.post("/v1/locks/job/acquire", acquire_body("other", 1000)).status == 409);
    server.kill9();
  }
  batond_process server(dir.path());
  auto g = server.client().get("/v1/locks/job");
  BOOST_REQUIRE(g.status == 200);
  BOOST_TEST(g.json.at("ttl_remaining_ms").as_int64() > 30000);
}

BOOST_AUTO_TEST_CASE(long_poll_wakes_on_release_well_before_wait_ms) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  auto t = token_of(c.post("/v1/locks/lp/acquire", acquire_body("holder", 60000)));
  http_reply woke;
  double waited = 0;
  std::thread waiter([&] {
    http_client wc(server.port());
    auto start = std::chrono::steady_clock::now();
    woke = wc.get("/v1/locks/lp?wait_ms=30000&token=" + std::to_string(t));
    waited = seconds_since(start);
  });
  std::this_thread::sleep_for(200ms);
  BOOST_TEST(c.post("/v1/locks/lp/release", release_body("holder", t)).status == 200);
  waiter.join();
  BOOST_TEST(woke.status == 404);
  BOOST_TEST(str(woke, "error") == "not_held");
  BOOST_TEST(waited < 6.0);  // 5x below wait_ms: it was the release that woke it
}

BOOST_AUTO_TEST_CASE(long_poll_wakes_on_expiry_well_before_wait_ms) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  auto t = token_of(c.post("/v1/locks/lp/acquire", acquire_body("holder", 300)));
  auto start = std::chrono::steady_clock::now();
  auto woke = c.get("/v1/locks/lp?wait_ms=30000&token=" + std::to_string(t));
  BOOST_TEST(woke.status == 404);
  BOOST_TEST(seconds_since(start) < 6.0);
}

BOOST_AUTO_TEST_CASE(long_poll_wakes_a_free_key_waiter_on_acquire_and_answers_at_once_when_token_differs) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  http_reply woke;
  std::thread waiter([&] {
    http_client wc(server.port());
    woke = wc.get("/v1/locks/idle?wait_ms=30000&token=0");
  });
  std::this_thread::sleep_for(200ms);
  auto a = c.post("/v1/locks/idle/acquire", acquire_body("first", 60000));
  waiter.join();
  BOOST_TEST(woke.status == 200);
  BOOST_TEST(token_of(woke) == token_of(a));

  auto start = std::chrono::steady_clock::now();
  auto now = c.get("/v1/locks/idle?wait_ms=30000&token=999");
  BOOST_TEST(now.status == 200);
  BOOST_TEST(seconds_since(start) < 6.0);
}

BOOST_AUTO_TEST_CASE(long_poll_with_an_unchanged_holder_answers_after_wait_ms) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  auto t = token_of(c.post("/v1/locks/steady/acquire", acquire_body("holder", 60000)));
  auto start = std::chrono::steady_clock::now();
  auto r = c.get("/v1/locks/steady?wait_ms=300&token=" + std::to_string(t));
  double waited = seconds_since(start);
  BOOST_TEST(r.status == 200);
  BOOST_TEST(token_of(r) == t);
  BOOST_TEST(waited >= 0.3);
  BOOST_TEST(waited < 10.0);
}

BOOST_AUTO_TEST_CASE(bad_inputs_get_json_errors_and_the_server_keeps_serving) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  auto held = c.post("/v1/locks/precious/acquire", acquire_body("owner", 600000));
  BOOST_REQUIRE(held.status == 200);

  struct bad_case {
    std::string method, target, body;
    int status;
    std::string code;
  };
  const std::string long_key(513, 'k');
  std::vector<bad_case> cases{
      {"POST", "/v1/locks/k/acquire", "{not json", 400, "bad_request"},
      {"POST", "/v1/locks/k/acquire", "", 400, "bad_request"},
      {"POST", "/v1/locks/k/acquire", "[1,2]", 400, "bad_request"},
      {"POST", "/v1/locks/k/acquire", R"({"ttl_ms":1000})", 400, "bad_request"},
      {"POST", "/v1/locks/k/acquire", R"({"owner":"o","ttl_ms":1})", 400, "bad_request"},
      {"POST", "/v1/locks/k/acquire", R"({"owner":"o","ttl_ms":99999999})", 400, "bad_request"},
      {"POST", "/v1/locks/k/acquire", R"({"owner":"o","ttl_ms":"1000"})", 400, "bad_request"},
      {"POST", "/v1/locks/k/acquire", R"({"owner":"o\u0007","ttl_ms":1000})", 400, "bad_request"},
      {"POST", "/v1/locks/k/renew", R"({"owner":"o","token":-1,"ttl_ms":1000})", 400, "bad_request"},
      {"POST", "/v1/locks/k/release", R"({"owner":"o"})", 400, "bad_request"},
      {"POST", "/v1/locks/precious/release", R"({"owner":"owner","token":0})", 400, "bad_request"},
      // Read as "last one wins" this would be the holder's own release; it must change nothing.
      {"POST", "/v1/locks/precious/release",
       R"({"owner":"intruder","owner":"owner","token":)" + std::to_string(token_of(held)) + "}", 400,
       "bad_request"},
      {"POST", "/v1/locks/" + long_key + "/acquire", R"({"owner":"o","ttl_ms":1000})", 400, "bad_request"},
      {"POST", "/v1/locks//acquire", R"({"owner":"o","ttl_ms":1000})", 400, "bad_request"},
      {"POST", "/v1/locks/a%0Ab/acquire", R"({"owner":"o","ttl_ms":1000})", 400, "bad_request"},
      {"GET", "/v1/locks/k?wait_ms=soon", "", 400, "bad_request"},
      {"GET", "/v1/locks/k/acquire", "", 405, "method_not_allowed"},
      {"POST", "/v1/locks/k", "{}", 405, "method_not_allowed"},
      {"DELETE", "/v1/locks/precious", "", 405, "method_not_allowed"},
      {"POST", "/v1/locks/k/steal", "{}", 404, "not_found"},
      {"GET", "/nowhere", "", 404, "not_found"},
      {"GET", "/v1/locks/absent", "", 404, "not_held"},
      {"POST", "/v1/locks/k/acquire", std::string(70 * 1024, ' '), 413, "body_too_large"},
  };
  for (const auto& bc : cases) {
    http_client one(server.port());
    auto r = one.request(bc.method, bc.target, bc.body);
    BOOST_TEST_CONTEXT(bc.method << " " << bc.target.substr(0, 60) << " " << bc.body.substr(0, 60)) {
      BOOST_TEST(r.status == bc.status);
      BOOST_TEST(r.content_type == "application/json");
      BOOST_REQUIRE(r.json.is_object());
      BOOST_TEST(str(r, "error") == bc.code);
      BOOST_TEST(!str(r, "message").empty());
    }
  }

  // Malformed HTTP on the wire.
  auto garbage = http_client::raw(server.port(), "THIS IS NOT HTTP\r\n\r\n");
  BOOST_TEST(garbage.status == 400);
  BOOST_TEST(str(garbage, "error") == "bad_request");

  // Nothing above changed state, and the server still serves.
  BOOST_TEST(c.get("/healthz").status == 200);
  auto still = c.get("/v1/locks/precious");
  BOOST_TEST(still.status == 200);
  BOOST_TEST(token_of(still) == token_of(held));
  auto next = c.post("/v1/locks/k/acquire", acquire_body("o", 1000));
  BOOST_TEST(next.status == 200);
  BOOST_TEST(token_of(next) == token_of(held) + 1);  // no refused request consumed a token
}

BOOST_AUTO_TEST_CASE(a_stalled_client_is_disconnected_after_the_read_timeout) {
  temp_dir dir;
  batond_process server(dir.path(), {"--read-timeout-ms", "300"});
  auto start = std::chrono::steady_clock::now();
  // Half a request, then silence: the server must hang up rather than wait forever.
  BOOST_CHECK_THROW(http_client::raw(server.port(),
                                     "POST /v1/locks/k/acquire HTTP/1.1\r\nContent-Length: 50\r\n\r\n{", 20s),
                    std::exception);
  BOOST_TEST(seconds_since(start) < 15.0);
  BOOST_TEST(server.client().get("/healthz").status == 200);
}

BOOST_AUTO_TEST_CASE(metrics_and_healthz_answer) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  auto h = c.get("/healthz");
  BOOST_TEST(h.status == 200);
  BOOST_TEST(str(h, "status") == "ok");
  const auto token = token_of(c.post("/v1/locks/m/acquire", acquire_body("o", 1000)));
  auto m = c.get("/metrics");
  BOOST_TEST(m.status == 200);
  BOOST_TEST(metric_value(m.body, "baton_last_token").value_or(-1) == static_cast<double>(token));
  BOOST_TEST(metric_value(m.body, "baton_wal_bytes").value_or(0) > 0);
  check_process_metrics(m.body, BATON_VERSION);
  BOOST_TEST(m.body.find("baton_requests_total{route=\"acquire\",code=\"200\"} 1") != std::string::npos);
  BOOST_TEST(m.body.find("baton_operations_total{op=\"acquire\",outcome=\"granted\"} 1") !=
             std::string::npos);
  BOOST_TEST(m.body.find("baton_wal_fsync_seconds_count") != std::string::npos);
  BOOST_TEST(m.body.find("baton_locks_held 1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(sigterm_answers_in_flight_long_polls_and_exits_zero) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  auto t = token_of(c.post("/v1/locks/k/acquire", acquire_body("o", 60000)));
  http_reply answer;
  std::thread waiter([&] {
    http_client wc(server.port());
    answer = wc.get("/v1/locks/k?wait_ms=30000&token=" + std::to_string(t));
  });
  std::this_thread::sleep_for(200ms);
  auto start = std::chrono::steady_clock::now();
  BOOST_TEST(server.terminate() == 0);
  waiter.join();
  BOOST_TEST(answer.status == 200);
  BOOST_TEST(seconds_since(start) < 6.0);
}

BOOST_AUTO_TEST_CASE(a_second_batond_on_the_same_data_dir_refuses_to_start) {
  temp_dir dir;
  batond_process server(dir.path());
  child_process second({bin_path("batond"), "--listen", "127.0.0.1:0", "--data-dir", dir.path().string()},
                       (dir.path() / "second.err").string());
  BOOST_TEST(second.wait(30s) == 1);
}

// Request smuggling: a transfer coding other than a lone `chunked` (or one beside Content-Length) is where a
// proxy in front and batond could disagree on where a request ends. batond answers 400 and closes, so bytes
// after such a header are never served as a request of their own.
BOOST_AUTO_TEST_CASE(a_transfer_coding_other_than_a_lone_chunked_gets_400_and_smuggles_nothing) {
  temp_dir dir;
  batond_process server(dir.path());
  const std::string inner_body = acquire_body("smuggler", 60000);
  const std::string smuggled =
      "POST /v1/locks/smuggled/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(inner_body.size()) + "\r\n\r\n" + inner_body;
  auto head = [](std::string_view codings, std::string_view extra = {}) {
    return "POST /v1/locks/outer/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           "Transfer-Encoding: " +
           std::string(codings) + "\r\n" + std::string(extra) + "\r\n";
  };
  auto chunked = [](const std::string& body) {
    char size[16];
    std::snprintf(size, sizeof size, "%zx", body.size());
    return std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n";
  };

  auto identity = http_client::raw(server.port(), head("chunked, identity") + smuggled);
  BOOST_TEST(identity.status == 400);
  BOOST_TEST(!identity.keep_alive);

  auto gzip = http_client::raw(server.port(), head("gzip, chunked") + chunked(acquire_body("g", 60000)));
  BOOST_TEST(gzip.status == 400);
  auto twice = http_client::raw(
      server.port(), head("chunked", "Transfer-Encoding: chunked\r\n") + chunked(acquire_body("t", 60000)));
  BOOST_TEST(twice.status == 400);
  auto with_length = http_client::raw(
      server.port(), head("chunked", "Content-Length: 5\r\n") + chunked(acquire_body("l", 60000)));
  BOOST_TEST(with_length.status == 400);

  std::this_thread::sleep_for(200ms);  // a smuggled request would have been served by now
  http_client c(server.port());
  BOOST_TEST(c.get("/v1/locks/smuggled").status == 404);
  BOOST_TEST(c.get("/v1/locks/outer").status == 404);

  // A lone chunked coding is still served.
  auto plain = http_client::raw(server.port(), head("Chunked") + chunked(acquire_body("c", 60000)));
  BOOST_TEST(plain.status == 200);
}

// A web page cannot drive batond through a browser: a cross-site `text/plain` POST (no preflight), any
// request with an Origin, and, on a loopback listener, a Host that is not a loopback name (DNS rebinding).
// Each is refused before it changes anything, and closes its connection.
BOOST_AUTO_TEST_CASE(browser_requests_are_refused_cross_site_posts_origins_and_rebound_hosts) {
  temp_dir dir;
  batond_process server(dir.path());
  const std::string body = acquire_body("page", 60000);
  auto post = [&](std::string_view headers) {
    return http_client::raw(server.port(), "POST /v1/locks/k/acquire HTTP/1.1\r\n" + std::string(headers) +
                                               "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                                               body);
  };

  auto text_plain = post("Host: 127.0.0.1\r\nContent-Type: text/plain\r\n");
  BOOST_TEST(text_plain.status == 415);
  BOOST_TEST(str(text_plain, "error") == "unsupported_media_type");
  BOOST_TEST(post("Host: 127.0.0.1\r\n").status == 415);

  auto origin = post("Host: 127.0.0.1\r\nContent-Type: application/json\r\nOrigin: https://evil.example\r\n");
  BOOST_TEST(origin.status == 403);
  BOOST_TEST(str(origin, "error") == "cross_origin_refused");
  BOOST_TEST(!origin.keep_alive);

  auto rebound = post("Host: evil.example:7070\r\nContent-Type: application/json\r\n");
  BOOST_TEST(rebound.status == 421);
  BOOST_TEST(str(rebound, "error") == "misdirected_request");
  auto rebound_get =
      http_client::raw(server.port(), "GET /v1/locks/k HTTP/1.1\r\nHost: evil.example\r\n\r\n");
  BOOST_TEST(rebound_get.status == 421);

  http_client c(server.port());
  BOOST_TEST(c.get("/v1/locks/k").status == 404);  // nothing above acquired it

  // Loopback names with any port are served (the same owner acquiring again is granted again).
  for (std::string_view host : {"localhost:1", "127.0.0.1", "[::1]:7070"})
    BOOST_TEST(
        post("Host: " + std::string(host) + "\r\nContent-Type: application/json; charset=utf-8\r\n").status ==
            200,
        host);
}

// Keys and owners are the client's bytes, and they reach the log. Code points that break or reorder a line
// on a terminal (U+0085, U+2028, U+2029, U+202E and the other bidirectional controls) are written escaped,
// so one event stays one line that reads as what it holds.
BOOST_AUTO_TEST_CASE(line_and_bidi_controls_in_keys_and_owners_are_escaped_in_the_log) {
  temp_dir dir, logs;
  const auto log_path = logs.path() / "batond.log";
  child_process server({bin_path("batond"), "--listen", "127.0.0.1:0", "--data-dir", dir.path().string(),
                        "--log-level", "debug"},
                       log_path.string());
  std::string line = server.read_line(30s);
  BOOST_REQUIRE(line.rfind("batond listening on ", 0) == 0);
  http_client c(static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1))));

  // Key "a<U+2028>b<U+202E>c" percent-encoded; owner "o<U+200F>p<U+2029>q<U+2066>r" as JSON escapes. (U+0085
  // is a control character, refused in both.)
  auto r = c.post("/v1/locks/a%E2%80%A8b%E2%80%AEc/acquire",
                  R"({"owner":"o\u200fp\u2029q\u2066r","ttl_ms":60000})");
  BOOST_REQUIRE(r.status == 200);
  server.signal(SIGTERM);
  BOOST_REQUIRE(server.wait(30s) == 0);

  std::ifstream in(log_path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(text.find(R"(key="a\u2028b\u202ec")") != std::string::npos);
  BOOST_TEST(text.find(R"(owner="o\u200fp\u2029q\u2066r")") != std::string::npos);
  for (std::string_view raw :
       {"\xe2\x80\x8f", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xae", "\xe2\x81\xa6"})
    BOOST_TEST(text.find(raw) == std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_value_is_published_replaced_by_a_reacquire_and_kept_by_renew_and_a_kill9) {
  temp_dir dir;
  auto valued = [](std::string_view owner, std::string_view value) {
    return boost::json::serialize(boost::json::object{{"owner", owner}, {"ttl_ms", 60000}, {"value", value}});
  };
  std::uint64_t token;
  {
    batond_process server(dir.path());
    auto c = server.client();
    auto a = c.post("/v1/locks/leader/acquire", valued("a", "10.0.0.1:80"));
    BOOST_REQUIRE(a.status == 200);
    BOOST_TEST(str(c.get("/v1/locks/leader"), "value") == "10.0.0.1:80");
    auto held = c.post("/v1/locks/leader/acquire", valued("b", "10.0.0.2:80"));
    BOOST_TEST(held.status == 409);
    BOOST_TEST(str(held, "value") == "10.0.0.1:80");
    // The long-poll's answer carries it too (woken at once: the token differs from 0).
    BOOST_TEST(str(c.get("/v1/locks/leader?wait_ms=5000&token=0"), "value") == "10.0.0.1:80");
    token = token_of(c.post("/v1/locks/leader/acquire", valued("a", "10.0.0.1:81")));
    BOOST_TEST(str(c.get("/v1/locks/leader"), "value") == "10.0.0.1:81");
    BOOST_TEST(c.post("/v1/locks/leader/renew", renew_body("a", token, 60000)).status == 200);
    BOOST_TEST(str(c.get("/v1/locks/leader"), "value") == "10.0.0.1:81");
    // A holder without a value shows an empty one; a bad value is refused like any bad field.
    c.post("/v1/locks/plain/acquire", acquire_body("p", 60000));
    BOOST_TEST(str(c.get("/v1/locks/plain"), "value").empty());
    auto bad = c.post("/v1/locks/other/acquire", valued("a", std::string(1025, 'v')));
    BOOST_TEST(bad.status == 400);
    BOOST_TEST(str(bad, "error") == "bad_request");
    server.kill9();
  }
  batond_process server(dir.path());
  auto c = server.client();
  auto g = c.get("/v1/locks/leader");
  BOOST_REQUIRE(g.status == 200);
  BOOST_TEST(token_of(g) == token);
  BOOST_TEST(str(g, "value") == "10.0.0.1:81");
}

// docs/protocol.md, "renew": the reasons are decided in a fixed order, and an expired lease is an absent one
// whatever the owner and token sent.
BOOST_AUTO_TEST_CASE(renew_refusals_name_not_held_then_owner_mismatch_then_token_mismatch) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  const auto held = token_of(c.post("/v1/locks/k/acquire", acquire_body("a", 60000)));
  // A token never issued, larger than the holder's, is another token than the holder's.
  auto never = c.post("/v1/locks/k/renew", renew_body("a", held + 1000, 60000));
  BOOST_TEST(never.status == 409);
  BOOST_TEST(reason(never) == "token_mismatch");
  BOOST_TEST(reason(c.post("/v1/locks/k/renew", renew_body("b", held, 60000))) == "owner_mismatch");
  BOOST_TEST(reason(c.post("/v1/locks/k/renew", renew_body("b", held + 1000, 60000))) == "owner_mismatch");
  BOOST_TEST(reason(c.post("/v1/locks/free/renew", renew_body("a", held, 60000))) == "not_held");

  // Expired: not_held for its owner with its token, with another token, and for anyone else.
  const auto short_lived = token_of(c.post("/v1/locks/e/acquire", acquire_body("a", 200)));
  std::this_thread::sleep_for(300ms);
  BOOST_TEST(reason(c.post("/v1/locks/e/renew", renew_body("a", short_lived + 1, 60000))) == "not_held");
  BOOST_TEST(reason(c.post("/v1/locks/e/renew", renew_body("b", short_lived, 60000))) == "not_held");
  BOOST_TEST(reason(c.post("/v1/locks/e/renew", renew_body("a", short_lived, 60000))) == "not_held");

  // The release answers' exact bodies.
  BOOST_TEST(c.post("/v1/locks/k/release", release_body("a", held)).body ==
             R"({"released":true,"outcome":"released"})");
  BOOST_TEST(c.post("/v1/locks/k/release", release_body("a", held)).body ==
             R"({"released":true,"outcome":"already_free"})");
}

// docs/protocol.md, "Restart": once an answer has shown that a lease expired, a crash does not bring the
// lease back. Each answer here comes before the once-a-second sweep would have logged the expiry.
BOOST_AUTO_TEST_CASE(an_expiry_shown_in_an_answer_is_not_rolled_back_by_a_kill9) {
  temp_dir dir;
  std::uint64_t by_get, by_renew, by_poll;
  {
    batond_process server(dir.path());
    auto c = server.client();
    by_get = token_of(c.post("/v1/locks/by-get/acquire", acquire_body("a", 100)));
    by_renew = token_of(c.post("/v1/locks/by-renew/acquire", acquire_body("a", 100)));
    by_poll = token_of(c.post("/v1/locks/by-poll/acquire", acquire_body("a", 100)));
    auto woken = c.get("/v1/locks/by-poll?wait_ms=5000&token=" + std::to_string(by_poll));
    BOOST_TEST(woken.status == 404);
    BOOST_TEST(c.get("/v1/locks/by-get").status == 404);
    BOOST_TEST(reason(c.post("/v1/locks/by-renew/renew", renew_body("a", by_renew, 60000))) == "not_held");
    server.kill9();
  }
  batond_process server(dir.path());
  auto c = server.client();
  for (std::string key : {"by-get", "by-renew", "by-poll"})
    BOOST_TEST_CONTEXT(key) {
      BOOST_TEST(c.get("/v1/locks/" + key).status == 404);
    }
  BOOST_TEST(reason(c.post("/v1/locks/by-renew/renew", renew_body("a", by_renew, 60000))) == "not_held");
  BOOST_TEST(reason(c.post("/v1/locks/by-get/renew", renew_body("a", by_get, 60000))) == "not_held");
}

// docs/protocol.md, "get and long-poll": the query's edge cases.
BOOST_AUTO_TEST_CASE(long_poll_query_edge_cases_answer_as_documented) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  const auto t = token_of(c.post("/v1/locks/k/acquire", acquire_body("a", 60000)));
  auto timed = [&](const std::string& target) {
    auto start = std::chrono::steady_clock::now();
    auto r = c.get(target);
    return std::pair{r, seconds_since(start)};
  };
  // `token` without `wait_ms` is a plain GET; `wait_ms=0` answers at once; an unknown parameter is ignored.
  for (std::string q :
       std::vector<std::string>{"?token=" + std::to_string(t), "?wait_ms=0&token=" + std::to_string(t),
                                "?wait_ms=0", "?wait_ms=0&colour=blue"}) {
    auto [r, took] = timed("/v1/locks/k" + q);
    BOOST_TEST_CONTEXT(q) {
      BOOST_TEST(r.status == 200);
      BOOST_TEST(took < 1.0);
    }
  }
  // token=0, or none, while the key is held: the holder differs, so the answer comes at once.
  for (std::string q : {"?wait_ms=30000&token=0", "?wait_ms=30000"}) {
    auto [r, took] = timed("/v1/locks/k" + q);
    BOOST_TEST_CONTEXT(q) {
      BOOST_TEST(r.status == 200);
      BOOST_TEST(took < 1.0);
    }
  }
  // On a free key, token=0 waits for a holder until wait_ms.
  auto [free_answer, waited] = timed("/v1/locks/free?wait_ms=300&token=0");
  BOOST_TEST(free_answer.status == 404);
  BOOST_TEST(waited >= 0.29);
  // Either parameter twice, or not a decimal integer: 400, whichever copy would be read.
  for (std::string q :
       {"?wait_ms=10&wait_ms=10", "?wait_ms=10&token=1&token=2", "?token=1&token=1", "?wait_ms=", "?wait_ms",
        "?wait_ms=+5", "?token=-1", "?wait_ms=18446744073709551616"}) {
    auto r = c.get("/v1/locks/k" + q);
    BOOST_TEST_CONTEXT(q) {
      BOOST_TEST(r.status == 400);
      BOOST_TEST(str(r, "error") == "bad_request");
    }
  }
}

// docs/protocol.md, "Order of checks": a request with several faults gets the answer of the first check it
// fails: 404 (route), 405 (method), 400 (key, query), then the body.
BOOST_AUTO_TEST_CASE(a_request_with_several_faults_gets_the_first_checks_answer) {
  temp_dir dir;
  batond_process server(dir.path());
  struct fault {
    std::string method, target, body;
    int status;
  };
  const std::vector<fault> cases{
      {"GET", "/v1/locks/%00/steal", "", 404},          // unknown route beats a bad key
      {"POST", "/v1/locks/a/b/c/acquire", "{", 404},    // a raw '/' in a key: no such route
      {"GET", "/v1/locks/%00/acquire", "", 405},        // wrong method beats a bad key
      {"POST", "/v1/locks/k?wait_ms=soon", "{}", 405},  // and a bad query
      {"DELETE", "/v1/locks//release", "", 405},        // and an empty key
      {"POST", "/v1/locks//acquire", "{", 400},         // a bad key beats a bad body
      {"GET", "/v1/locks/%C2%85?wait_ms=1", "", 400},   // a C1 control in a key
      {"POST", "/v1/capabilities", "{}", 405},
  };
  for (const auto& f : cases) {
    http_client one(server.port());
    auto r = one.request(f.method, f.target, f.body);
    BOOST_TEST_CONTEXT(f.method << " " << f.target) {
      BOOST_TEST(r.status == f.status);
    }
  }
}

// The same with bearer tokens: 401 before anything, 403 (no access to the key) after the key was checked.
BOOST_AUTO_TEST_CASE(with_tokens_401_comes_first_and_403_after_the_route_method_and_key) {
  temp_dir dir, scratch;
  const auto tokens = scratch.path() / "tokens";
  {
    // The SHA-256 of "reader-token"; the client may read keys under jobs/ and nothing else.
    std::ofstream out(tokens);
    out << "sha256:ba5005a40cf5212e4ac0190104cc127edab013294bb71279a975b27a80982d45 reader ro:jobs/\n";
  }
  batond_process server(dir.path(), {"--tokens-file", tokens.string()});
  struct fault {
    std::string authorization, method, target, body;
    int status;
  };
  const std::string reader = "Bearer reader-token";
  const std::vector<fault> cases{
      {"", "GET", "/nowhere", "", 401},
      {"", "POST", "/v1/locks/%00/steal", "{", 401},
      {"Bearer wrong", "GET", "/v1/capabilities", "", 401},
      {reader, "GET", "/v1/locks/%00/steal", "", 404},
      {reader, "GET", "/v1/locks/other/acquire", "", 405},
      {reader, "GET", "/v1/locks/%00", "", 400},
      {reader, "GET", "/v1/locks/other", "", 403},
      {reader, "POST", "/v1/locks/jobs%2Fa/acquire", "{", 403},  // read-only: refused before the body
      {reader, "GET", "/v1/locks/jobs%2Fa", "", 404},            // not_held
      {reader, "GET", "/v1/capabilities", "", 200},
  };
  for (const auto& f : cases) {
    http_client one(server.port());
    one.set_authorization(f.authorization);
    auto r = one.request(f.method, f.target, f.body);
    BOOST_TEST_CONTEXT(f.authorization << " " << f.method << " " << f.target) {
      BOOST_TEST(r.status == f.status);
    }
  }
}

BOOST_AUTO_TEST_CASE(capabilities_name_the_protocol_version_and_the_optional_features) {
  temp_dir dir;
  batond_process server(dir.path());
  auto r = server.client().get("/v1/capabilities");
  BOOST_TEST(r.status == 200);
  BOOST_TEST(r.content_type == "application/json");
  BOOST_TEST(r.json.at("protocol_version").as_int64() == 1);
  const auto& features = r.json.at("features").as_array();
  for (const char* name : {"lease_values", "list_locks", "break_lease"})
    BOOST_TEST(std::find(features.begin(), features.end(), boost::json::value(name)) != features.end(), name);
  BOOST_TEST(r.json.at("list_max").as_int64() == 1000);
}

// Features list_locks and break_lease (docs/protocol.md, "list" and "break"), with bearer tokens: a listing
// pages in key order; a break needs admin access, is audited, counted and durable, wakes a long-poll, tells
// the broken holder why, and the next holder's token is larger, across a kill -9 too.
BOOST_AUTO_TEST_CASE(an_admin_lists_and_breaks_a_lease_and_the_next_holder_gets_a_larger_token) {
  temp_dir dir, scratch;
  const auto tokens = scratch.path() / "tokens";
  const auto log_path = scratch.path() / "batond.log";
  {
    // SHA-256 of "admin-token" and of "writer-token".
    std::ofstream out(tokens);
    out << "sha256:10a4c7c9fc5206d6f36dc6944a81bb6f4a3cb0e25014ae3b12e6c3e52712292a ops admin:jobs/\n"
        << "sha256:3590c0a59f72ce02700194a05f228a725c1f135a6dcb3ded9b2d86ab6a6f52cb worker rw:jobs/\n";
  }
  std::uint64_t broken_token = 0;
  {
    batond_process server(dir.path(), {"--tokens-file", tokens.string()}, 0, log_path.string());
    auto worker = server.client();
    worker.set_authorization("Bearer writer-token");
    auto ops = server.client();
    ops.set_authorization("Bearer admin-token");

    for (const char* key : {"jobs%2Fc", "jobs%2Fa", "jobs%2Fb", "jobs%2Fd", "jobs%2Fe"})
      BOOST_REQUIRE(
          worker.post(std::string("/v1/locks/") + key + "/acquire", acquire_body("w", 60000)).status == 200);
    // Pages of two, in key order, each naming the next cursor; the last one says null.
    std::vector<std::string> keys;
    std::string after;
    for (int page = 0; page < 5; ++page) {
      auto r = worker.get("/v1/locks?prefix=jobs%2F&limit=2" + (after.empty() ? "" : "&after=" + after));
      BOOST_REQUIRE(r.status == 200);
      for (const auto& l : r.json.at("locks").as_array()) {
        keys.emplace_back(l.at("key").as_string());
        BOOST_TEST(l.at("kind").as_string() == "lock");
        BOOST_TEST(l.at("owner").as_string() == "w");
        BOOST_TEST(l.at("client").as_string() == "worker");
        BOOST_TEST(l.at("waiters").as_int64() == 0);
        BOOST_TEST(l.at("ttl_remaining_ms").as_int64() > 50000);
      }
      if (r.json.at("next").is_null()) break;
      after = "jobs%2F" + std::string(r.json.at("next").as_string()).substr(5);
    }
    BOOST_TEST(keys == (std::vector<std::string>{"jobs/a", "jobs/b", "jobs/c", "jobs/d", "jobs/e"}),
               boost::test_tools::per_element());
    BOOST_TEST(worker.get("/v1/locks?prefix=jobs%2F&limit=0").status == 400);
    BOOST_TEST(worker.get("/v1/locks?prefix=other").status == 403);
    BOOST_TEST(str(worker.get("/v1/locks?prefix=jobs%2F&limit=1001"), "error") == "bad_request");

    // A worker may not break; the admin may, only the lease it names, and a free key is 404.
    const auto held = token_of(worker.get("/v1/locks/jobs%2Fa"));
    auto refused = worker.post("/v1/locks/jobs%2Fa/break", "{}");
    BOOST_TEST(refused.status == 403);
    BOOST_TEST(str(refused, "error") == "admin_required");
    auto stale = ops.post("/v1/locks/jobs%2Fa/break", R"({"token":)" + std::to_string(held + 100) + "}");
    BOOST_TEST(stale.status == 409);
    BOOST_TEST(str(stale, "error") == "token_mismatch");
    BOOST_TEST(token_of(stale) == held);
    BOOST_TEST(ops.post("/v1/locks/jobs%2Fzz/break", "{}").status == 404);

    // A long-poll on the holder is woken by the break.
    std::thread poller([&] {
      auto p = server.client();
      p.set_authorization("Bearer writer-token");
      const auto sent = std::chrono::steady_clock::now();
      auto r = p.get("/v1/locks/jobs%2Fa?wait_ms=10000&token=" + std::to_string(held));
      BOOST_TEST(r.status == 404);
      BOOST_TEST(seconds_since(sent) < 5.0);
    });
    std::this_thread::sleep_for(200ms);
    auto broke = ops.post("/v1/locks/jobs%2Fa/break", R"({"token":)" + std::to_string(held) + "}");
    poller.join();
    BOOST_REQUIRE(broke.status == 200);
    BOOST_TEST(broke.json.at("broken").as_bool());
    BOOST_TEST(str(broke, "owner") == "w");
    BOOST_TEST(str(broke, "client") == "worker");
    BOOST_TEST(token_of(broke) == held);
    broken_token = held;

    auto lost = worker.post("/v1/locks/jobs%2Fa/renew", renew_body("w", held, 60000));
    BOOST_TEST(lost.status == 409);
    BOOST_TEST(reason(lost) == "broken");
    BOOST_TEST(worker.get("/v1/locks/jobs%2Fa").status == 404);
    const auto metrics = worker.get("/metrics").body;
    BOOST_TEST(metrics.find(R"(baton_operations_total{op="break",outcome="broken"} 1)") != std::string::npos);
    BOOST_TEST(metrics.find(R"(baton_operations_total{op="break",outcome="token_mismatch"} 1)") !=
               std::string::npos);
    server.kill9();
  }
  std::ifstream in(log_path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(text.find("event=lease_broken by=ops key=jobs/a token=" + std::to_string(broken_token) +
                       " owner=w client=worker") != std::string::npos,
             text);

  // The break was durable: after a kill -9 the key is still free, and the next grant is larger.
  batond_process server(dir.path(), {"--tokens-file", tokens.string()});
  auto worker = server.client();
  worker.set_authorization("Bearer writer-token");
  BOOST_TEST(worker.get("/v1/locks/jobs%2Fa").status == 404);
  BOOST_TEST(token_of(worker.post("/v1/locks/jobs%2Fa/acquire", acquire_body("x", 60000))) > broken_token);
  auto listed = worker.get("/v1/locks?prefix=jobs%2F");
  BOOST_TEST(listed.json.at("locks").as_array().size() == 5u);
  BOOST_TEST(listed.json.at("next").is_null());
}

// Feature acquire_queue (docs/protocol.md, "Queued acquire"), over HTTP: one answer per hand-off, in arrival
// order, and a waiter whose connection closes gives its place up.
BOOST_AUTO_TEST_CASE(queued_acquires_are_served_in_arrival_order_and_a_closed_waiter_leaves_the_queue) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  const auto features = c.get("/v1/capabilities").json.at("features").as_array();
  BOOST_TEST(std::find(features.begin(), features.end(), boost::json::value("acquire_queue")) !=
             features.end());
  const auto waiting = [&] {
    const auto text = c.get("/metrics").body;
    const auto at = text.find("\nbaton_acquire_queue_waiting ");
    return at == std::string::npos ? -1 : std::stoi(text.substr(at + 29));
  };
  const auto queued_until = [&](int n) {
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (waiting() != n && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(10ms);
    return waiting() == n;
  };
  std::uint64_t token = token_of(c.post("/v1/locks/q/acquire", acquire_body("holder", 60000)));
  std::string holder = "holder";
  // w0, then a waiter that will close its connection, then w1 and w2.
  std::array<http_reply, 3> replies;
  std::vector<std::thread> threads;
  const auto enqueue = [&](int i) {
    threads.emplace_back([&, i] {
      http_client wc(server.port(), 30s);
      replies[static_cast<std::size_t>(i)] =
          wc.post("/v1/locks/q/acquire?wait_ms=20000", acquire_body("w" + std::to_string(i), 60000));
    });
  };
  enqueue(0);
  BOOST_REQUIRE(queued_until(1));
  {
    raw_connection gone(server.port());
    const std::string body = acquire_body("gone", 60000);
    gone.send(
        "POST /v1/locks/q/acquire?wait_ms=20000 HTTP/1.1\r\nHost: localhost\r\n"
        "Content-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body);
    BOOST_REQUIRE(queued_until(2));
  }  // closed while it waits
  BOOST_REQUIRE(queued_until(1));
  enqueue(1);
  BOOST_REQUIRE(queued_until(2));
  enqueue(2);
  BOOST_REQUIRE(queued_until(3));
  for (int i = 0; i < 3; ++i) {
    BOOST_REQUIRE(c.post("/v1/locks/q/release", release_body(holder, token)).status == 200);
    threads[static_cast<std::size_t>(i)].join();
    const auto& r = replies[static_cast<std::size_t>(i)];
    BOOST_REQUIRE(r.status == 200);
    BOOST_TEST(str(r, "owner") == "w" + std::to_string(i));  // arrival order; "gone" was skipped
    BOOST_TEST(r.json.at("queued_ms").as_int64() >= 0);
    BOOST_TEST(token_of(r) == token + 1);  // nothing was granted to the waiter that left
    token = token_of(r);
    holder = "w" + std::to_string(i);
  }
  BOOST_TEST(waiting() == 0);
}

// docs/protocol.md, "Encoding": HTTP framing cases an implementer must not guess.
BOOST_AUTO_TEST_CASE(head_expect_continue_chunked_and_missing_length_are_answered_as_documented) {
  temp_dir dir;
  batond_process server(dir.path());
  const std::string post_head =
      "POST /v1/locks/k/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\n";
  const std::string body = acquire_body("a", 60000);

  // HEAD: 405 with its header alone, and the connection still answers the next request in order.
  raw_connection head(server.port());
  head.send(
      "HEAD /v1/locks/k HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
      "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  auto both = head.receive_until(R"({"status":"ok"})");
  BOOST_TEST(both.rfind("HTTP/1.1 405 ", 0) == 0u, both);
  BOOST_TEST(both.find("Allow: GET") != std::string::npos, both);
  BOOST_TEST(both.find("method_not_allowed") == std::string::npos, both);  // no body after a HEAD's header
  BOOST_TEST(both.find("\r\n\r\nHTTP/1.1 200 OK") != std::string::npos, both);

  // Expect: 100-continue gets 100 Continue before the client sends its body, then the answer.
  raw_connection expect(server.port());
  expect.send(post_head + "Expect: 100-continue\r\nContent-Length: " + std::to_string(body.size()) +
              "\r\n\r\n");
  auto interim = expect.receive_until("\r\n\r\n", 2s);
  BOOST_TEST(interim.rfind("HTTP/1.1 100 Continue\r\n", 0) == 0u, interim);
  expect.send(body);
  BOOST_TEST(expect.receive_until(R"("token":)").find("HTTP/1.1 200 OK") != std::string::npos);

  // A chunked body is read like any other.
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  auto chunked = http_client::raw(server.port(),
                                  "POST /v1/locks/c/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
                                      std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n");
  BOOST_TEST(chunked.status == 200);

  // Neither Content-Length nor Transfer-Encoding: the request has no body (RFC 9112), so 400.
  auto no_length = http_client::raw(server.port(), post_head + "\r\n");
  BOOST_TEST(no_length.status == 400);
  BOOST_TEST(str(no_length, "error") == "bad_request");
}

// docs/protocol.md, "Encoding": what "no control characters" means, and strings JSON cannot carry.
BOOST_AUTO_TEST_CASE(owners_refuse_c0_del_c1_and_lone_surrogates_and_keep_other_layout_characters) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  for (std::string owner : {R"(a\u0000)", R"(a\u001f)", R"(a\u007f)", R"(a\u0085)", R"(a\u009f)",
                            R"(a\ud800)", R"(a\udc00b)", "a\xc2\x9b", "a\xff"}) {
    auto r = c.post("/v1/locks/k/acquire", R"({"owner":")" + owner + R"(","ttl_ms":60000})");
    BOOST_TEST_CONTEXT(owner) {
      BOOST_TEST(r.status == 400);
      BOOST_TEST(str(r, "error") == "bad_request");
    }
  }
  // Not control characters: the line separator, a bidirectional override, U+00A0 (just after C1).
  auto ok = c.post("/v1/locks/k/acquire", R"({"owner":"a\u2028b\u202ec\u00a0\ud83d\udd12","ttl_ms":60000})");
  BOOST_TEST(ok.status == 200);
  BOOST_TEST(str(ok, "owner") ==
             "a\xe2\x80\xa8"
             "b\xe2\x80\xae"
             "c\xc2\xa0\xf0\x9f\x94\x92");
  BOOST_TEST(c.get("/v1/locks/%C2%80").status == 400);
  BOOST_TEST(c.get("/v1/locks/%C2%A0").status == 404);
}

BOOST_AUTO_TEST_CASE(version_prints_the_projects_version_and_exits) {
  temp_dir dir;
  child_process p({bin_path("batond"), "--version"}, (dir.path() / "stderr").string());
  BOOST_TEST(p.read_line(std::chrono::seconds(30)) == "batond " BATON_VERSION);
  BOOST_TEST(p.wait(std::chrono::seconds(30)) == 0);
}

// --listen follows the agent's rule (baton/common/listen_address.hpp): in ::1:7070 the last colon may be the
// port's or the address's, so an IPv6 address takes brackets, and the refusal names the form to write.
BOOST_AUTO_TEST_CASE(an_ipv6_listen_address_without_brackets_is_refused_naming_the_bracketed_form) {
  temp_dir dir;
  const auto refused =
      run_to_end({bin_path("batond"), "--data-dir", dir.path().string(), "--listen", "::1:7070"},
                 (dir.path() / "batond.err").string(), 30s);
  BOOST_TEST(refused.code == 2);
  BOOST_TEST(refused.err == "batond: --listen: an IPv6 address needs brackets: [::1]:7070\n");
  const auto name =
      run_to_end({bin_path("batond"), "--data-dir", dir.path().string(), "--listen", "myhost:7070"},
                 (dir.path() / "name.err").string(), 30s);
  BOOST_TEST(name.code == 2);
  BOOST_TEST(name.err.find("batond: --listen: \"myhost\" is not an IP address") == 0u, name.err);
}

// Lock-delay (docs/protocol.md, "Lock-delay"): a release frees the key at once; an expiry and a break keep
// it from everyone for the delay; a delay over --max-lock-delay-ms is refused naming it; and a kill -9
// during the delay does not free the key early: the restarted server begins it again in full, and a queued
// acquire waits it out. Real time: a 200 ms lease with a 1500 ms delay. A refusal is asserted only while the
// delay must still run by the client's clock (a slow machine may ask too late to tell); a grant never comes
// before the delay could have ended, however slow the machine.
BOOST_AUTO_TEST_CASE(lock_delay_outlives_an_expiry_and_a_break_and_a_kill9_but_not_a_release) {
  using clock = std::chrono::steady_clock;
  temp_dir dir;
  auto body = [](std::string_view owner, int ttl_ms, int delay_ms) {
    return R"({"owner":")" + std::string(owner) + R"(","ttl_ms":)" + std::to_string(ttl_ms) +
           R"(,"lock_delay_ms":)" + std::to_string(delay_ms) + "}";
  };
  auto refused_for_delay = [](const http_reply& r) {
    return r.status == 409 && str(r, "error") == "held" &&
           r.json.as_object().contains("lock_delay_remaining_ms") &&
           r.json.at("lock_delay_remaining_ms").as_int64() > 0;
  };
  constexpr auto delay = 1500ms;
  std::uint64_t first_token = 0;
  clock::time_point killed;
  unsigned short port = 0;
  {
    batond_process server(dir.path(), {"--max-lock-delay-ms", "5000"});
    port = server.port();
    auto c = server.client();
    auto over = c.post("/v1/locks/ld-bound/acquire", body("a", 1000, 5001));
    BOOST_TEST(over.status == 400);
    BOOST_TEST(str(over, "message").find("from 0 to 5000") != std::string::npos, over.body);

    auto rel = c.post("/v1/locks/ld-release/acquire", body("a", 60000, 5000));
    BOOST_REQUIRE(rel.status == 200);
    BOOST_TEST(rel.json.at("lock_delay_ms").as_int64() == 5000);
    BOOST_TEST(c.post("/v1/locks/ld-release/release", release_body("a", token_of(rel))).status == 200);
    BOOST_TEST(c.post("/v1/locks/ld-release/acquire", acquire_body("b", 1000)).status == 200);

    auto held = c.post("/v1/locks/ld-break/acquire", body("a", 60000, 1500));
    const auto break_sent = clock::now();
    BOOST_TEST(c.post("/v1/locks/ld-break/break", "{}").status == 200);
    auto after_break = c.post("/v1/locks/ld-break/acquire", acquire_body("b", 1000));
    if (clock::now() < break_sent + delay) BOOST_TEST(refused_for_delay(after_break), after_break.body);
    BOOST_TEST(token_of(held) > 0u);

    const auto sent = clock::now();
    auto a = c.post("/v1/locks/ld/acquire", body("a", 200, 1500));
    BOOST_REQUIRE(a.status == 200);
    first_token = token_of(a);
    std::this_thread::sleep_for(300ms);  // the lease has expired
    auto b = c.post("/v1/locks/ld/acquire", acquire_body("b", 1000));
    auto page = c.get("/v1/locks?prefix=ld");
    if (clock::now() < sent + 200ms + delay) {
      BOOST_TEST(refused_for_delay(b), b.body);
      BOOST_TEST(str(b, "owner").empty());
      BOOST_TEST(page.body.find(R"("key":"ld","kind":"lock_delay")") != std::string::npos, page.body);
    } else {
      BOOST_TEST(b.status == 200, b.body);
    }
    killed = clock::now();
    server.kill9();
  }
  // Restarted on the same port: the delay begins again in full at recovery, which comes after `killed`.
  batond_process server(dir.path(), {"--max-lock-delay-ms", "5000"}, port);
  auto c = server.client();
  auto q = c.post("/v1/locks/ld/acquire?wait_ms=20000", acquire_body("c", 1000));
  BOOST_REQUIRE(q.status == 200);
  BOOST_TEST((clock::now() - killed >= delay));
  BOOST_TEST(token_of(q) > first_token);
}
