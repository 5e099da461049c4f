// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE http_renew_batch
#include <boost/test/unit_test.hpp>

// backend::renew_batch through the HTTP backend: POST /v1/renew when the server advertises renew_batch (split
// to fit the server's limits), single renews when it does not, or when the route is missing after all.

#include "batond_fixture.hpp"
#include "coro.hpp"
#include "lock_requests.hpp"

#include "baton/backend.hpp"
#include "baton/client.hpp"
#include "baton/error.hpp"

#include <string>
#include <vector>

using namespace baton;
using namespace baton::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

client_config at(const std::string& url) {
  client_config c;
  c.server_url = url;
  c.identity = "batch";
  return c;
}

// The count of one series of batond's /metrics (0 when absent).
long long metric(http_client& c, const std::string& series) {
  const auto text = c.get("/metrics").body;
  const auto at = text.find(series + " ");
  return at == std::string::npos ? 0 : std::stoll(text.substr(at + series.size() + 1));
}

// `n` leases held by "me" plus, at the end, one entry with a wrong token and one for a free key.
std::vector<renew_entry> hold(http_client& c, int n, std::vector<std::uint64_t>& tokens) {
  std::vector<renew_entry> entries;
  for (int i = 0; i < n; ++i) {
    const std::string key = "lease-" + std::to_string(i);
    auto r = c.post("/v1/locks/" + key + "/acquire", acquire_body("me", 30000));
    BOOST_REQUIRE(r.status == 200);
    tokens.push_back(token_of(r));
    entries.push_back({key, "me", tokens.back(), 60000ms});
  }
  entries.push_back({"lease-0-again", "me", 1, 60000ms});
  entries.push_back({"lease-1", "me", tokens[1] + 1000, 60000ms});  // never issued
  // lease-1 twice would be a malformed batch: the wrong-token entry replaces the right one.
  entries.erase(entries.begin() + 1);
  return entries;
}

void expect_answers(const std::vector<renew_reply>& out, std::size_t held) {
  BOOST_REQUIRE(out.size() == held + 1);
  for (std::size_t i = 0; i + 2 < out.size(); ++i)
    BOOST_TEST(!out[i].ec, i << ": " << out[i].ec.message() << " " << out[i].diagnostic);
  BOOST_TEST((out[out.size() - 2].ec == error::lease_lost));
  BOOST_TEST(out[out.size() - 2].lost_reason == "not_held");
  BOOST_TEST((out.back().ec == error::lease_lost));
  BOOST_TEST(out.back().lost_reason == "token_mismatch");
}

}  // namespace

// 40 entries of about 60 bytes in a 1 KiB body limit: several batches, no single renew, answers in order.
BOOST_AUTO_TEST_CASE(the_http_backend_sends_batches_that_fit_the_servers_limits) {
  temp_dir dir;
  batond_process server(dir.path(), {"--max-body-bytes", "1024"});
  auto direct = server.client();
  std::vector<std::uint64_t> tokens;
  auto entries = hold(direct, 40, tokens);
  asio::io_context ioc;
  auto b = make_backend(ioc.get_executor(), at(server.url()));
  std::vector<renew_reply> out;
  run_coro(ioc, [&]() -> asio::awaitable<void> { out = co_await b->renew_batch(entries, 10s); }());
  expect_answers(out, 40);
  const auto batches = metric(direct, R"(baton_requests_total{route="renew_batch",code="200"})");
  BOOST_TEST(batches >= 3);  // 41 entries of ~60 bytes do not fit 1 KiB twice over
  BOOST_TEST(metric(direct, R"(baton_requests_total{route="renew",code="200"})") == 0);
  BOOST_TEST(metric(direct, R"(baton_operations_total{op="renew",outcome="ok"})") == 39);
  const auto g = direct.get("/v1/locks/lease-0");
  BOOST_TEST(g.json.at("ttl_remaining_ms").to_number<long long>() > 30000);
  // An empty batch is no request at all.
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    out = co_await b->renew_batch(std::vector<renew_entry>{}, 10s);
  }());
  BOOST_TEST(out.empty());
}

// A server without capabilities (404): single renews, with the same answers.
BOOST_AUTO_TEST_CASE(without_the_feature_the_http_backend_renews_one_by_one) {
  child_process lockd({bin_path("broken-lockd"), "--listen", "127.0.0.1:0", "--bug", "none"});
  const auto line = lockd.read_line(30s);
  const std::string url = "http://" + line.substr(line.rfind(' ') + 1);
  asio::io_context ioc;
  auto b = make_backend(ioc.get_executor(), at(url));
  std::vector<renew_entry> entries;
  for (int i = 0; i < 3; ++i) {
    acquire_reply a;
    run_coro(ioc, [&]() -> asio::awaitable<void> {
      a = co_await b->acquire("k" + std::to_string(i), "me", 30000ms, {}, 5s);
    }());
    BOOST_REQUIRE(!a.ec);
    entries.push_back({"k" + std::to_string(i), "me", a.token, 30000ms});
  }
  entries.push_back({"free", "me", 1, 30000ms});
  entries.push_back({"k0-old", "me", 1, 30000ms});
  std::swap(entries[3], entries[4]);  // order kept whatever the entries say
  std::vector<renew_reply> out;
  run_coro(ioc, [&]() -> asio::awaitable<void> { out = co_await b->renew_batch(entries, 10s); }());
  BOOST_REQUIRE(out.size() == 5u);
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(!out[i].ec);
  BOOST_TEST((out[3].ec == error::lease_lost));
  BOOST_TEST((out[4].ec == error::lease_lost));
}

// Advertised, yet POST /v1/renew is 404 (a proxy in front that knows only the single routes): the backend
// falls back to single renews for the whole batch and stays with them.
BOOST_AUTO_TEST_CASE(a_404_for_the_batch_falls_back_to_single_renews) {
  // broken-lockd serves the batch when its capabilities text holds "renew_batch" verbatim; the escaped
  // underscore advertises the feature while the route stays missing.
  child_process lockd({bin_path("broken-lockd"), "--listen", "127.0.0.1:0", "--bug", "none", "--capabilities",
                       R"({"protocol_version":1,"features":["renew\u005fbatch"],"renew_batch_max":10})"});
  const auto line = lockd.read_line(30s);
  const std::string url = "http://" + line.substr(line.rfind(' ') + 1);
  asio::io_context ioc;
  auto b = make_backend(ioc.get_executor(), at(url));
  acquire_reply a;
  run_coro(ioc, [&]() -> asio::awaitable<void> { a = co_await b->acquire("k", "me", 30000ms, {}, 5s); }());
  BOOST_REQUIRE(!a.ec);
  std::vector<renew_reply> out;
  const std::vector<renew_entry> entries{{"k", "me", a.token, 30000ms}, {"k2", "me", a.token, 30000ms}};
  for (int round = 0; round < 2; ++round) {
    run_coro(ioc, [&]() -> asio::awaitable<void> { out = co_await b->renew_batch(entries, 10s); }());
    BOOST_REQUIRE(out.size() == 2u);
    BOOST_TEST(!out[0].ec, out[0].diagnostic);
    BOOST_TEST((out[1].ec == error::lease_lost));
  }
}

// The default implementation's deadline: entries it had no time left to send are request_timeout.
BOOST_AUTO_TEST_CASE(a_batch_whose_time_ran_out_reports_the_unsent_entries_as_timed_out) {
  temp_dir dir;
  batond_process server(dir.path());
  asio::io_context ioc;
  auto b = make_backend(ioc.get_executor(), at(server.url()));
  std::vector<renew_reply> out;
  const std::vector<renew_entry> entries{{"a", "me", 1, 1000ms}, {"b", "me", 1, 1000ms}};
  run_coro(ioc, [&]() -> asio::awaitable<void> { out = co_await b->backend::renew_batch(entries, 0ms); }());
  BOOST_REQUIRE(out.size() == 2u);
  BOOST_TEST((out[0].ec == error::request_timeout));
  BOOST_TEST((out[1].ec == error::request_timeout));
}

// End to end: one client holding 30 leases that renew every 300 ms renews them in batches (a window of 50 ms
// gathers the renewals of leases acquired together), batond answers each entry, and every lease stays held.
BOOST_AUTO_TEST_CASE(a_client_holding_many_leases_renews_them_in_batches) {
  temp_dir dir;
  batond_process server(dir.path());
  auto direct = server.client();
  asio::io_context ioc;
  auto cfg = at(server.url());
  cfg.renew_batch_window = 50ms;
  client c(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease_options o;
    o.ttl = 10s;
    o.renew_every = 300ms;
    o.jitter = 0;
    std::vector<lease> leases;
    for (int i = 0; i < 30; ++i)
      leases.push_back(co_await c.async_acquire("many-" + std::to_string(i), o));
    // At least three rounds of renewals, within 60 s.
    for (int i = 0; i < 600 && c.stats().renews < 90; ++i)
      co_await sleep_for(100ms);
    BOOST_TEST(c.stats().renews >= 90u);
    BOOST_TEST(c.stats().losses == 0u);
    for (auto& l : leases)
      BOOST_TEST(l.active());
    const auto batches = metric(direct, R"(baton_requests_total{route="renew_batch",code="200"})");
    const auto singles = metric(direct, R"(baton_requests_total{route="renew",code="200"})");
    // Far fewer requests than renewals: on average at least three leases a request.
    BOOST_TEST(batches >= 1);
    BOOST_TEST((batches + singles) * 3 <= static_cast<long long>(c.stats().renews));
    for (auto& l : leases)
      co_await l.async_release();
  }());
  BOOST_TEST(direct.get("/v1/locks/many-0").status == 404);
}
