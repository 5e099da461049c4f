// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE http_proclaim
#include <boost/test/unit_test.hpp>

// backend::proclaim through the HTTP backend (docs/protocol.md, "proclaim"): sent to a batond, which
// advertises the feature; not sent at all to a server without it, or whose route is missing after all, with a
// clear error; and `baton proclaim`, the CLI's spelling of it.

#include "batond_fixture.hpp"
#include "coro.hpp"
#include "lock_requests.hpp"

#include "baton/backend.hpp"
#include "baton/client.hpp"
#include "baton/error.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>

#include <stdlib.h>

#include <string>
#include <vector>

using namespace baton;
using namespace baton::test;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

client_config at(const std::string& url) {
  client_config c;
  c.server_url = url;
  c.identity = "proclaim";
  return c;
}

std::string value_at(http_client& c, const std::string& key) {
  auto g = c.get("/v1/locks/" + key);
  BOOST_REQUIRE_MESSAGE(g.status == 200, g.body);
  return std::string(g.json.at("value").as_string());
}

// broken-lockd without a bug, with `capabilities` as its GET /v1/capabilities body (none: 404); its URL.
struct lockd {
  explicit lockd(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{bin_path("broken-lockd"), "--listen", "127.0.0.1:0", "--bug", "none"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    proc = std::make_unique<child_process>(argv);
    const auto line = proc->read_line(30s);
    url = "http://" + line.substr(line.rfind(' ') + 1);
  }
  std::unique_ptr<child_process> proc;
  std::string url;
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_http_backend_proclaims_to_batond_under_the_same_token_durably) {
  temp_dir dir;
  std::uint64_t token = 0;
  {
    batond_process server(dir.path());
    auto direct = server.client();
    asio::io_context ioc;
    auto b = make_backend(ioc.get_executor(), at(server.url()));
    auto other = make_backend(ioc.get_executor(), at(server.url()));
    run_coro(ioc, [&]() -> asio::awaitable<void> {
      auto a = co_await b->acquire("leader", "a", 60'000ms, "10.0.0.1:80", 5s);
      BOOST_REQUIRE(!a.ec);
      token = a.token;
      auto p = co_await b->proclaim("leader", "a", a.token, "10.0.0.2:80", 5s);
      BOOST_TEST(!p.ec, p.ec.message() << " " << p.diagnostic);
      auto g = co_await b->get("leader", std::nullopt, 5s);
      BOOST_REQUIRE(g.holder.has_value());
      BOOST_TEST(g.holder->token == a.token);
      BOOST_TEST(g.holder->value == "10.0.0.2:80");
      auto stale = co_await b->proclaim("leader", "a", a.token + 7, "x", 5s);
      BOOST_TEST(stale.ec == error::lease_lost);
      BOOST_TEST(stale.lost_reason == "token_mismatch");
      auto stolen = co_await b->proclaim("leader", "b", a.token, "x", 5s);
      BOOST_TEST(stolen.ec == error::lease_lost);
      BOOST_TEST(stolen.lost_reason == "owner_mismatch");
      auto bad = co_await b->proclaim("leader", "a", a.token, std::string(1025, 'v'), 5s);
      BOOST_TEST(bad.ec == error::bad_request);
      // An observer that names the value it saw is woken by the next proclaim (the backend sends `value=`
      // once it knows the server has the feature: it learnt that with its first proclaim).
      const wait_for_change seen{a.token, 20'000ms, std::string("10.0.0.2:80")};
      auto first = co_await other->proclaim("elsewhere", "nobody", 1, "x", 5s);  // learns the features
      BOOST_TEST(first.ec == error::lease_lost);
      auto watching = other->get("leader", seen, 30s);
      // Named: the coroutine refers to the lambda, which must outlive it.
      auto proclaim_later = [&]() -> asio::awaitable<proclaim_reply> {
        co_await sleep_for(300ms);
        co_return co_await b->proclaim("leader", "a", a.token, "10.0.0.3:80", 5s);
      };
      auto proclaiming = proclaim_later();
      const auto started = std::chrono::steady_clock::now();
      auto [woken, q] = co_await (std::move(watching) && std::move(proclaiming));
      BOOST_TEST(!q.ec);
      BOOST_REQUIRE(woken.holder.has_value());
      BOOST_TEST(woken.holder->value == "10.0.0.3:80");
      BOOST_TEST((std::chrono::steady_clock::now() - started < 10s));
    }());
    BOOST_TEST(value_at(direct, "leader") == "10.0.0.3:80");
    server.kill9();
  }
  batond_process server(dir.path());
  auto direct = server.client();
  BOOST_TEST(value_at(direct, "leader") == "10.0.0.3:80");
  BOOST_TEST(token_of(direct.get("/v1/locks/leader")) == token);
}

BOOST_AUTO_TEST_CASE(a_server_without_the_feature_is_not_sent_a_proclaim_and_the_error_says_why) {
  lockd old;  // no capabilities at all (404), as before the endpoint existed
  lockd lost_route({"--capabilities", R"({"protocol_version":1,"features":["proclaim"]})"});
  for (const auto* url : {&old.url, &lost_route.url}) {
    BOOST_TEST_CONTEXT(*url) {
      asio::io_context ioc;
      auto b = make_backend(ioc.get_executor(), at(*url));
      run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto a = co_await b->acquire("leader", "a", 30'000ms, "10.0.0.1:80", 5s);
        BOOST_REQUIRE(!a.ec);
        for (int round = 0; round < 2; ++round) {
          auto p = co_await b->proclaim("leader", "a", a.token, "10.0.0.2:80", 5s);
          BOOST_TEST(p.ec == error::invalid_config);
          BOOST_TEST(p.diagnostic.find("does not support proclaim") != std::string::npos, p.diagnostic);
        }
        auto g = co_await b->get("leader", std::nullopt, 5s);
        BOOST_REQUIRE(g.holder.has_value());
        BOOST_TEST(g.holder->value == "10.0.0.1:80");
        BOOST_TEST(g.holder->token == a.token);
      }());
    }
  }
}

namespace {
struct cli_result {
  int code = -1;
  std::string out;
};
cli_result baton_cli(const std::string& url, std::vector<std::string> args) {
  args.insert(args.begin(), {bin_path("baton"), "--server", url});
  child_process p(args, "/dev/null");
  cli_result r;
  r.code = p.wait(60s);
  try {
    r.out = p.read_line(5s);
  } catch (const std::runtime_error&) {
  }
  return r;
}
}  // namespace

BOOST_AUTO_TEST_CASE(baton_proclaim_prints_the_lease_and_exits_76_when_it_is_not_held) {
  ::unsetenv("BATON_SERVER");
  temp_dir dir;
  batond_process server(dir.path());
  auto direct = server.client();
  auto token = token_of(direct.post("/v1/locks/leader/acquire", acquire_body("a", 60'000)));
  const auto t = std::to_string(token);
  auto ok =
      baton_cli(server.url(), {"proclaim", "leader", "--owner", "a", "--token", t, "--value", "10.0.0.7:80"});
  BOOST_TEST(ok.code == 0);
  auto j = json::parse(ok.out);
  BOOST_TEST(j.at("value").as_string() == "10.0.0.7:80");
  BOOST_TEST(j.at("token").to_number<std::uint64_t>() == token);
  BOOST_TEST(value_at(direct, "leader") == "10.0.0.7:80");
  auto cleared = baton_cli(server.url(), {"proclaim", "leader", "--owner", "a", "--token", t, "--value", ""});
  BOOST_TEST(cleared.code == 0);
  BOOST_TEST(value_at(direct, "leader").empty());
  auto stale = baton_cli(server.url(), {"proclaim", "leader", "--owner", "a", "--token",
                                        std::to_string(token + 1), "--value", "x"});
  BOOST_TEST(stale.code == 76);
  BOOST_TEST(stale.out.empty());
  BOOST_TEST(baton_cli(server.url(), {"proclaim", "leader", "--owner", "a", "--token", t}).code == 64);
}

// The lock's record (docs/protocol.md, "record") through the HTTP backend and the public API against batond:
// a lease writes it, any client reads it, it outlives the lease and a kill -9; a deposed holder is refused.
BOOST_AUTO_TEST_CASE(a_lease_writes_the_record_through_batond_and_it_outlives_the_lease_and_a_kill9) {
  temp_dir dir;
  std::uint64_t token = 0;
  const std::string state = "{\"nightly\":{\"slot\":42,\"outcome\":\"ok\"}}";
  {
    batond_process server(dir.path(), {"--min-ttl-ms", "100"});
    asio::io_context ioc;
    auto cfg = at(server.url());
    cfg.request_timeout = 5s;
    client c(ioc.get_executor(), cfg);
    client reader(ioc.get_executor(), cfg);
    auto b = make_backend(ioc.get_executor(), cfg);
    run_coro(ioc, [&]() -> asio::awaitable<void> {
      BOOST_TEST(!(co_await reader.async_read_record("agent")).has_value());
      lease_options o;
      o.ttl = 60'000ms;
      lease l = co_await c.async_acquire("agent", o);
      token = l.token();
      BOOST_TEST(co_await l.async_write_record("draft") == 1u);
      BOOST_TEST(co_await l.async_write_record(state) == 2u);
      auto rec = co_await reader.async_read_record("agent");
      BOOST_REQUIRE(rec.has_value());
      BOOST_TEST(rec->value == state);
      BOOST_TEST(rec->token == token);
      BOOST_TEST(rec->version == 2u);
      BOOST_TEST(rec->owner == l.owner());
      // Refusals through the backend, with the renew's reasons; nothing changed.
      auto stale = co_await b->write_record("agent", l.owner(), token + 7, "x", 5s);
      BOOST_TEST(stale.ec == error::lease_lost);
      BOOST_TEST(stale.lost_reason == "token_mismatch");
      auto stolen = co_await b->write_record("agent", "b", token, "x", 5s);
      BOOST_TEST(stolen.ec == error::lease_lost);
      BOOST_TEST(stolen.lost_reason == "owner_mismatch");
      // Over the server's record_max_bytes: refused before anything is sent.
      auto big = co_await b->write_record("agent", l.owner(), token, std::string(65537, 'x'), 5s);
      BOOST_TEST(big.ec == error::invalid_config);
      BOOST_TEST(big.diagnostic.find("record_max_bytes") != std::string::npos, big.diagnostic);
      auto largest = co_await b->write_record("agent", l.owner(), token, std::string(65536, '"'), 5s);
      BOOST_TEST(!largest.ec, largest.diagnostic);  // every byte escaped: the route's body limit fits it
      BOOST_TEST(co_await l.async_write_record(state) == 4u);
      co_await l.async_release();
      // Released: the record stays, and the old holder may not write it any more.
      auto late = co_await b->write_record("agent", l.owner(), token, "late", 5s);
      BOOST_TEST(late.ec == error::lease_lost);
      BOOST_TEST(late.lost_reason == "not_held");
      BOOST_TEST((co_await reader.async_read_record("agent"))->value == state);
    }());
    server.kill9();
  }
  batond_process server(dir.path());
  asio::io_context ioc;
  client reader(ioc.get_executor(), at(server.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto rec = co_await reader.async_read_record("agent");
    BOOST_REQUIRE(rec.has_value());
    BOOST_TEST(rec->value == state);
    BOOST_TEST(rec->token == token);
    BOOST_TEST(rec->version == 4u);
  }());
}

BOOST_AUTO_TEST_CASE(a_server_without_records_is_not_sent_one_and_the_error_says_why) {
  lockd old;  // no capabilities at all (404)
  lockd lost_route({"--capabilities", R"({"protocol_version":1,"features":["lock_record"]})"});
  for (const auto* url : {&old.url, &lost_route.url}) {
    BOOST_TEST_CONTEXT(*url) {
      asio::io_context ioc;
      client c(ioc.get_executor(), at(*url));
      run_coro(ioc, [&]() -> asio::awaitable<void> {
        lease_options o;
        o.ttl = 30'000ms;
        lease l = co_await c.async_acquire("agent", o);
        for (int round = 0; round < 2; ++round) {
          auto [ec, version] = co_await l.async_write_record("x", asio::as_tuple(asio::use_awaitable));
          BOOST_TEST((ec == error::invalid_config), ec.message());
          BOOST_TEST(version == 0u);
          auto [rec, found] = co_await c.async_read_record("agent", asio::as_tuple(asio::use_awaitable));
          BOOST_TEST((rec == error::invalid_config), rec.message());
          BOOST_TEST(!found.has_value());
        }
        BOOST_TEST(l.active());  // a feature the server lacks does not end the lease
        co_await l.async_release();
      }());
    }
  }
}

BOOST_AUTO_TEST_CASE(baton_record_get_prints_the_record_or_none) {
  ::unsetenv("BATON_SERVER");
  temp_dir dir;
  batond_process server(dir.path());
  auto direct = server.client();
  auto none = baton_cli(server.url(), {"record", "get", "agent"});
  BOOST_TEST(none.code == 0);
  BOOST_TEST(json::parse(none.out) == json::parse(R"({"key":"agent","record":false})"));
  auto token = token_of(direct.post("/v1/locks/agent/acquire", acquire_body("a", 60'000)));
  BOOST_REQUIRE(
      direct.request("PUT", "/v1/locks/agent/record", record_body("a", token, "line1\nline2")).status == 200);
  auto got = baton_cli(server.url(), {"record", "get", "agent"});
  BOOST_TEST(got.code == 0);
  auto j = json::parse(got.out);
  BOOST_TEST(j.at("record").as_bool());
  BOOST_TEST(j.at("value").as_string() == "line1\nline2");  // one line of JSON: the newline escaped
  BOOST_TEST(j.at("token").to_number<std::uint64_t>() == token);
  BOOST_TEST(j.at("version").to_number<int>() == 1);
  BOOST_TEST(j.at("owner").as_string() == "a");
  BOOST_TEST(baton_cli(server.url(), {"record", "agent"}).code == 64);
  lockd old;
  BOOST_TEST(baton_cli(old.url, {"record", "get", "agent"}).code == 64);
}
