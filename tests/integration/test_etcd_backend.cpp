// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE etcd_backend
#include <boost/test/unit_test.hpp>

// The SDK against a real etcd (Debian's etcd-server, one member on loopback) through its v3 JSON gateway;
// test_etcd_cluster runs the scenarios against three members.

#include "batond_fixture.hpp"
#include "coro.hpp"
#include "etcd_client_config.hpp"
#include "etcd_cluster.hpp"
#include "lease_opts.hpp"
#include "recording_server.hpp"

#include "etcd_version.hpp"

#include "baton/client.hpp"

#include <boost/algorithm/string/join.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

using namespace baton;
using namespace baton::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

client_config config(const std::string& url) {
  return etcd_client_config(url, "etcd-test");
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Whether the lease is lost within `bound`, waiting no longer.
asio::awaitable<bool> lost_within(lease& l, std::chrono::milliseconds bound) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer t(co_await asio::this_coro::executor, bound);
  co_await (l.async_wait_lost() || t.async_wait(asio::as_tuple(asio::use_awaitable)));
  co_return l.state() == lease_state::lost;
}

}  // namespace

BOOST_AUTO_TEST_CASE(lease_lifecycle_on_etcd_with_create_revision_tokens) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  client a(ioc.get_executor(), config(etcd.url()));
  client b(ioc.get_executor(), config(etcd.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto ra = co_await a.async_try_acquire("jobs/report", lease_opts(2000ms, 500ms));
    BOOST_REQUIRE(ra.acquired.has_value());
    lease& l = *ra.acquired;
    BOOST_TEST(l.token() > 0u);
    auto rb = co_await b.async_try_acquire("jobs/report", lease_opts(2000ms, 500ms));
    BOOST_TEST(!rb.acquired.has_value());
    BOOST_TEST(rb.holder.owner == l.owner());
    BOOST_TEST(rb.holder.token == l.token());
    co_await sleep_for(5000ms);  // 2.5 TTLs: only keepalives hold it
    BOOST_TEST(l.active());
    BOOST_TEST(a.stats().renews >= 4u);
    auto h = co_await b.async_get("jobs/report");
    BOOST_REQUIRE(h.has_value());
    BOOST_TEST(h->token == l.token());
    BOOST_TEST((co_await l.async_release() == release_outcome::released));
    BOOST_TEST(!(co_await b.async_get("jobs/report")).has_value());
    BOOST_TEST((co_await l.async_release() == release_outcome::already_free));
    auto next = co_await b.async_acquire("jobs/report", lease_opts(2000ms, 500ms));
    BOOST_TEST(next.token() > l.token());  // create_revision only grows
    co_await next.async_release();
  }());
}

BOOST_AUTO_TEST_CASE(waiting_acquirer_takes_over_when_the_holder_releases) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  client a(ioc.get_executor(), config(etcd.url()));
  client b(ioc.get_executor(), config(etcd.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto first = co_await a.async_acquire("handover", lease_opts(10000ms));
    std::optional<lease> second;
    asio::co_spawn(
        co_await asio::this_coro::executor,
        [&]() -> asio::awaitable<void> {
          second.emplace(co_await b.async_acquire("handover", lease_opts(10000ms)));
        },
        asio::detached);
    co_await sleep_for(300ms);
    BOOST_TEST(!second.has_value());
    co_await first.async_release();
    for (int i = 0; i < 200 && !second; ++i)
      co_await sleep_for(50ms);
    BOOST_REQUIRE(second.has_value());
    BOOST_TEST(second->token() > first.token());
    co_await second->async_release();
  }());
}

BOOST_AUTO_TEST_CASE(revoked_etcd_lease_makes_the_sdk_lease_lost) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  client a(ioc.get_executor(), config(etcd.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await a.async_acquire("revoked", lease_opts(5000ms, 300ms));
    // Someone deletes the key behind our back: the next renew sees it is no longer ours.
    http_client raw(etcd.client_port(0));
    BOOST_TEST(
        raw.post("/v3/kv/deleterange", R"({"key":")" + etcd_b64("baton/locks/revoked") + R"("})").status ==
        200);
    co_await l.async_wait_lost();
    BOOST_TEST((l.state() == lease_state::lost));
    BOOST_TEST(l.loss_reason().find("not_held") != std::string::npos);
  }());
}

BOOST_AUTO_TEST_CASE(same_owner_retry_supersedes_with_a_newer_create_revision) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto b = make_backend(ioc.get_executor(), config(etcd.url()));
    auto first = co_await b->acquire("retry", "owner-1", 5000ms, {}, 2000ms);
    BOOST_REQUIRE(!first.ec);
    auto second = co_await b->acquire("retry", "owner-1", 5000ms, {}, 2000ms);
    BOOST_REQUIRE(!second.ec);
    BOOST_TEST(second.token > first.token);
    auto stale = co_await b->renew("retry", "owner-1", first.token, 5000ms, 2000ms);
    BOOST_TEST(stale.lost_reason == "token_mismatch");
    auto other = co_await b->acquire("retry", "owner-2", 5000ms, {}, 2000ms);
    BOOST_TEST((other.ec == error::held));
    BOOST_TEST(other.holder.owner == "owner-1");
    BOOST_TEST(other.holder.ttl_remaining.count() > 0);
  }());
}

// A same-owner re-acquire gives the new key a lease at least as long as what the old one has left, which it
// asks /v3/lease/timetolive for. A failed lookup counted as "nothing left": the old key was deleted and the
// new one got only the requested TTL, shortening the lease. Now the try fails as after a failed grant
// (outcome unknown, retried by the client with the same owner) and the old key stays. The stub plays a
// member where lock "retry" is held by this owner on lease 42 (its keys retry/2a and retry), and which fails
// that one lookup.
BOOST_AUTO_TEST_CASE(a_same_owner_reacquire_whose_old_lease_time_cannot_be_read_fails_and_keeps_the_key) {
  recording_server member(200, R"({"header":{"revision":"9"}})");
  member.answer("/version", 200, R"({"etcdserver":"3.5.13","etcdcluster":"3.5.0"})");
  member.answer("/v3/lease/grant", 200, R"({"header":{"revision":"9"},"ID":"7","TTL":"5"})");
  // The txn's reads: the first in line (this owner's contender key) and the guard naming the owner.
  member.answer("/v3/kv/txn", 200,
                R"({"header":{"revision":"9"},"responses":[{"response_range":{"kvs":[{"key":")" +
                    etcd_b64("baton/locks/retry/2a") +
                    R"(","create_revision":"3","mod_revision":"3","lease":"42"}]}},)" +
                    R"({"response_range":{"kvs":[{"key":")" + etcd_b64("baton/locks/retry") +
                    R"(","create_revision":"3","mod_revision":"3","value":")" + etcd_b64("owner-1") +
                    R"(","lease":"42"}]}}]})");
  asio::io_context ioc;
  const auto a =
      make_backend(ioc.get_executor(), config("etcd://127.0.0.1:" + std::to_string(member.port())));
  const std::pair<int, std::string> failures[] = {
      {503, R"({"error":"etcdserver: leader changed","code":14,"message":"etcdserver: leader changed"})"},
      {200, R"({"header":{"revision":"9"},"ID":"42"})"},  // no TTL
  };
  for (const auto& [status, body] : failures) {
    BOOST_TEST_CONTEXT("timetolive answered " << status << " " << body) {
      member.answer("/v3/lease/timetolive", status, body);
      const auto before = member.requests().size();
      acquire_reply r;
      run_coro(ioc, [&]() -> asio::awaitable<void> {
        r = co_await a->acquire("retry", "owner-1", 1000ms, {}, 2000ms);
      }());
      const auto sent = member.requests();
      std::vector<std::string> calls(sent.begin() + static_cast<std::ptrdiff_t>(before), sent.end());
      BOOST_TEST_MESSAGE("requests: " << boost::algorithm::join(calls, ", "));
      BOOST_TEST((r.ec == (status == 503 ? error::storage_unavailable : error::protocol_error)),
                 r.ec.message() << ": " << r.diagnostic);
      const auto lookup = std::find(calls.begin(), calls.end(), "POST /v3/lease/timetolive");
      BOOST_REQUIRE(lookup != calls.end());
      // Nothing after the lookup touches the key: only the unused new lease is revoked.
      BOOST_TEST(std::count(lookup, calls.end(), "POST /v3/kv/txn") == 0);
      BOOST_TEST(std::count(lookup, calls.end(), "POST /v3/lease/revoke") == 1);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_dead_member_in_the_url_is_skipped) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  client a(ioc.get_executor(), config("etcd://127.0.0.1:" + std::to_string(ephemeral_port()) +
                                      ",127.0.0.1:" + std::to_string(etcd.client_port(0))));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await a.async_acquire("multi", lease_opts(5000ms));
    BOOST_TEST(l.active());
    co_await l.async_release();
  }());
}

// A member cut off from the leader (the minority side of a partition) answers every request 503 "no leader"
// while the others serve. The backend went no further than that member: every acquire failed with
// storage_unavailable, and a holder could not renew, although the cluster had quorum. Now a 503 is left for
// the next member, as a timeout is. The stub plays the cut-off member; its /version is a fixed etcd.
BOOST_AUTO_TEST_CASE(a_member_without_a_leader_answering_503_is_left_for_the_next_one) {
  etcd_cluster etcd(1);
  recording_server cut_off(
      503, R"({"error":"etcdserver: no leader","code":14,"message":"etcdserver: no leader"})");
  cut_off.answer("/version", 200, R"({"etcdserver":"3.5.13","etcdcluster":"3.5.0"})");
  asio::io_context ioc;
  auto cfg = config("etcd://127.0.0.1:" + std::to_string(cut_off.port()) +
                    ",127.0.0.1:" + std::to_string(etcd.client_port(0)));
  cfg.retry.max_attempts = 1;  // no retry to hide behind: the one try must reach the serving member
  client a(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto r = co_await a.async_try_acquire("cut-off", lease_opts(5000ms));
    BOOST_REQUIRE(r.acquired.has_value());
    BOOST_TEST(r.acquired->active());
    co_await r.acquired->async_release();
  }());
  bool asked = false;
  for (const auto& req : cut_off.requests())
    asked = asked || req.rfind("POST /v3/", 0) == 0;
  BOOST_TEST(asked, "the cut-off member was never asked: the test shows nothing");
}

BOOST_AUTO_TEST_CASE(etcd_auth_takes_user_and_password_from_the_url_and_authenticates_again_after_expiry) {
  etcd_cluster etcd(1, std::chrono::seconds(30),
                    {"--auth-token-ttl", "2"});  // simple tokens idle for 2 s expire
  http_client admin(etcd.client_port(0));
  const std::pair<const char*, const char*> setup[] = {
      {"/v3/auth/user/add", R"({"name":"root","password":"rootpw"})"},
      {"/v3/auth/role/add", R"({"name":"root"})"},
      {"/v3/auth/user/grant", R"({"user":"root","role":"root"})"},
      {"/v3/auth/enable", "{}"},
  };
  for (const auto& [target, body] : setup)
    BOOST_REQUIRE_EQUAL(admin.post(target, body).status, 200);
  auto first = admin.post("/v3/auth/authenticate", R"({"name":"root","password":"rootpw"})");
  BOOST_REQUIRE_EQUAL(first.status, 200);
  const std::string stale_token(first.json.at("token").as_string());

  const std::string member = "127.0.0.1:" + std::to_string(etcd.client_port(0));
  asio::io_context ioc;
  client good(ioc.get_executor(), config("etcd://root:rootpw@" + member));
  client none(ioc.get_executor(), config(etcd.url()));
  client wrong(ioc.get_executor(), config("etcd://root:not-the-password@" + member));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await good.async_acquire("jobs/auth", lease_opts(3000ms, 1000ms));
    BOOST_TEST(l.token() > 0u);
    BOOST_TEST((co_await l.async_release() == release_outcome::released));
    co_await sleep_for(5000ms);  // 2.5 token TTLs without a request: the client's token has expired
    BOOST_TEST(!(co_await good.async_get("jobs/auth")).has_value());  // authenticated again
    auto again = co_await good.async_acquire("jobs/auth", lease_opts(3000ms, 1000ms));
    BOOST_TEST(again.token() > l.token());
    co_await again.async_release();
    for (client* c : {&none, &wrong}) {
      boost::system::error_code ec;
      std::string diagnostic;
      try {
        co_await c->async_get("jobs/auth");
      } catch (const baton::exception& e) {
        ec = e.code();
        diagnostic = e.diagnostic();
      }
      BOOST_TEST((ec == error::unauthorized), ec.message() << ": " << diagnostic);
      BOOST_TEST(diagnostic.find("not-the-password") == std::string::npos);
    }
  }());
  // The token taken at the start did expire: the second acquire above needed a fresh one.
  http_client raw(etcd.client_port(0));
  raw.set_authorization(stale_token);
  BOOST_TEST(raw.post("/v3/kv/range", R"({"key":"YQ=="})").status == 401);
}

BOOST_AUTO_TEST_CASE(a_value_is_stored_after_the_owner_and_entries_without_one_read_as_before) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto b = make_backend(ioc.get_executor(), config(etcd.url()));
    auto first = co_await b->acquire("leader", "owner-1", 5000ms, "10.0.0.1:80", 2000ms);
    BOOST_REQUIRE(!first.ec);
    auto seen = co_await b->get("leader", std::nullopt, 2000ms);
    BOOST_REQUIRE(seen.holder.has_value());
    BOOST_TEST(seen.holder->owner == "owner-1");
    BOOST_TEST(seen.holder->value == "10.0.0.1:80");
    auto other = co_await b->acquire("leader", "owner-2", 5000ms, "10.0.0.2:80", 2000ms);
    BOOST_TEST((other.ec == error::held));
    BOOST_TEST(other.holder.owner == "owner-1");
    BOOST_TEST(other.holder.value == "10.0.0.1:80");
    // A same-owner re-acquire replaces the value; renew keeps it; only the owner releases it.
    auto second = co_await b->acquire("leader", "owner-1", 5000ms, "10.0.0.1:81", 2000ms);
    BOOST_REQUIRE(!second.ec);
    BOOST_TEST(!(co_await b->renew("leader", "owner-1", second.token, 5000ms, 2000ms)).ec);
    BOOST_TEST((co_await b->get("leader", std::nullopt, 2000ms)).holder->value == "10.0.0.1:81");
    BOOST_TEST(((co_await b->release("leader", "owner-2", second.token, 2000ms)).outcome ==
                release_outcome::not_owner));
    BOOST_TEST(((co_await b->release("leader", "owner-1", first.token, 2000ms)).outcome ==
                release_outcome::not_owner));
    BOOST_TEST(((co_await b->release("leader", "owner-1", second.token, 2000ms)).outcome ==
                release_outcome::released));
    BOOST_TEST(!(co_await b->get("leader", std::nullopt, 2000ms)).holder.has_value());

    // An entry as written before values (the bare owner) reads with an empty value and releases as before.
    http_client raw(etcd.client_port(0));
    auto put = raw.post("/v3/kv/put", R"({"key":")" + etcd_b64("baton/locks/old") + R"(","value":")" +
                                          etcd_b64("old-owner") + R"("})");
    BOOST_REQUIRE(put.status == 200);
    auto old = co_await b->get("old", std::nullopt, 2000ms);
    BOOST_REQUIRE(old.holder.has_value());
    BOOST_TEST(old.holder->owner == "old-owner");
    BOOST_TEST(old.holder->value.empty());
    BOOST_TEST(((co_await b->release("old", "old-owner", old.holder->token, 2000ms)).outcome ==
                release_outcome::released));
  }());
}

BOOST_AUTO_TEST_CASE(etcd_auth_takes_a_percent_encoded_url_password_or_one_from_a_password_file) {
  etcd_cluster etcd(1);
  http_client admin(etcd.client_port(0));
  // Every character the URL would otherwise take for syntax: '@', ':', '/', ',' and '%'.
  const std::string password = "p@ss:w/rd,%x";
  const std::pair<const char*, std::string> setup[] = {
      {"/v3/auth/user/add", R"({"name":"root","password":"p@ss:w/rd,%x"})"},
      {"/v3/auth/role/add", R"({"name":"root"})"},
      {"/v3/auth/user/grant", R"({"user":"root","role":"root"})"},
      {"/v3/auth/enable", "{}"},
  };
  for (const auto& [target, body] : setup)
    BOOST_REQUIRE_EQUAL(admin.post(target, body).status, 200);

  temp_dir scratch;
  const auto file = scratch.path() / "etcd-password";
  std::ofstream(file) << password << "\n";
  const std::string member = "127.0.0.1:" + std::to_string(etcd.client_port(0));
  auto from_file = config("etcd://root@" + member);
  from_file.etcd_password_file = file.string();
  asio::io_context ioc;
  client in_url(ioc.get_executor(), config("etcd://root:p%40ss%3Aw%2Frd%2C%25x@" + member));
  client in_file(ioc.get_executor(), from_file);
  client undecoded(ioc.get_executor(), config("etcd://root:p%2540ss@" + member));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    for (client* c : {&in_url, &in_file}) {
      auto l = co_await c->async_acquire("jobs/password", lease_opts(3000ms, 1000ms));
      BOOST_TEST(l.token() > 0u);
      BOOST_TEST((co_await l.async_release() == release_outcome::released));
    }
    boost::system::error_code ec;
    try {
      co_await undecoded.async_get("jobs/password");
    } catch (const baton::exception& e) {
      ec = e.code();
    }
    BOOST_TEST((ec == error::unauthorized), ec.message());
  }());
  // The CLI's --etcd-password-file, and its one-line error for a file that is not there.
  auto cli = run_to_end({bin_path("baton"), "get", "jobs/password", "--server", "etcd://root@" + member,
                         "--etcd-password-file", file.string()},
                        (scratch.path() / "cli-stderr").string());
  BOOST_TEST(cli.code == 0, cli.err);
  BOOST_TEST(cli.out == "{\"key\":\"jobs/password\",\"held\":false}\n");
  auto missing = run_to_end({bin_path("baton"), "get", "jobs/password", "--server", "etcd://root@" + member,
                             "--etcd-password-file", "/nonexistent/pw"},
                            (scratch.path() / "missing-stderr").string());  // the first's has a warning
  BOOST_TEST(missing.code == 64);
  BOOST_TEST(missing.err ==
             "baton: error: invalid configuration: etcd_password_file \"/nonexistent/pw\": cannot read: "
             "No such file or directory\n");
}

// ---- Leases etcd ends behind the holder's back (etcd 3.4.23 revokes live leases after a leader's disk
// stall): the key watch makes it a loss within milliseconds, not at the next renew.

BOOST_AUTO_TEST_CASE(a_held_key_deleted_behind_the_holders_back_is_a_loss_well_before_the_next_renew) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  client a(ioc.get_executor(), config(etcd.url()));
  http_client raw(etcd.client_port(0));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    // Renewed every 10 s (8-12 s with jitter): a loss found by a renew comes seconds after the delete.
    auto gone = co_await a.async_acquire("watched/gone", lease_opts(30000ms, 10000ms));
    auto kept = co_await a.async_acquire("watched/kept", lease_opts(30000ms, 10000ms));
    auto other = co_await a.async_acquire("watched/other", lease_opts(30000ms, 10000ms));
    co_await sleep_for(200ms);  // the one watch stream is open by now
    const auto deleted_at = std::chrono::steady_clock::now();
    BOOST_TEST(raw.post("/v3/kv/deleterange", R"({"key":")" + etcd_b64("baton/locks/watched/gone") + R"("})")
                   .status == 200);
    BOOST_TEST(co_await lost_within(gone, 5000ms));
    const double after = seconds_since(deleted_at);
    BOOST_TEST_MESSAGE("lease lost " << after * 1000 << " ms after its key was deleted (renew period 10 s)");
    // Milliseconds on an idle machine; 2 s is 4x below the earliest renew.
    BOOST_TEST(after < 2.0);
    BOOST_TEST(gone.loss_reason().find("not_held") != std::string::npos, gone.loss_reason());
    // The stream watches every key of the client: the others are untouched by the delete, and by a release.
    BOOST_TEST((co_await other.async_release() == release_outcome::released));
    co_await sleep_for(300ms);
    BOOST_TEST(kept.active());
    BOOST_TEST((other.state() == lease_state::released));
    // A key written over by another owner is a loss too.
    const auto written_at = std::chrono::steady_clock::now();
    BOOST_TEST(raw.post("/v3/kv/put", R"({"key":")" + etcd_b64("baton/locks/watched/kept") +
                                          R"(","value":")" + etcd_b64("mallory") + R"("})")
                   .status == 200);
    BOOST_TEST(co_await lost_within(kept, 5000ms));
    BOOST_TEST(seconds_since(written_at) < 2.0);
    BOOST_TEST(kept.loss_reason().find("owner_mismatch") != std::string::npos, kept.loss_reason());
    BOOST_TEST(a.stats().losses == 2u);
  }());
}

// The warning about an etcd that revokes live leases went to stderr once per client without an event
// handler: `baton conformance --server etcd://...` makes about ten clients and printed it about ten times.
// Now stderr has it once per member and process, while each client's handler still hears it once per member
// (lease_event::kind::server_warning is documented per member and client). The stub member runs 3.4.23.
BOOST_AUTO_TEST_CASE(the_stderr_warning_comes_once_per_member_and_process_the_event_once_per_client) {
  recording_server member(200, R"({"header":{"revision":"9"}})");
  member.answer("/version", 200, R"({"etcdserver":"3.4.23","etcdcluster":"3.4.0"})");
  const auto url = "etcd://127.0.0.1:" + std::to_string(member.port());
  std::vector<std::string> heard_a, heard_b;
  auto with_handler = [&](std::vector<std::string>& into) {
    auto c = config(url);
    c.on_event = [&into](const lease_event& e) {
      if (e.what == lease_event::kind::server_warning) into.emplace_back(e.reason);
    };
    return c;
  };
  temp_dir scratch;
  const auto captured = scratch.path() / "stderr";
  {
    // stderr into a file while four clients, two of them with handlers, each make two requests.
    std::fflush(stderr);
    const int saved = ::dup(STDERR_FILENO);
    const int file = ::open(captured.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    BOOST_REQUIRE(saved >= 0 && file >= 0);
    ::dup2(file, STDERR_FILENO);
    ::close(file);
    {
      asio::io_context ioc;
      client quiet_1(ioc.get_executor(), config(url)), quiet_2(ioc.get_executor(), config(url));
      client a(ioc.get_executor(), with_handler(heard_a)), b(ioc.get_executor(), with_handler(heard_b));
      run_coro(ioc, [&]() -> asio::awaitable<void> {
        for (client* c : {&quiet_1, &a, &quiet_2, &b, &quiet_1, &quiet_2})
          BOOST_TEST(!(co_await c->async_get("warned")).has_value());
      }());
    }
    std::fflush(stderr);
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
  }
  std::ifstream in(captured);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (line.find("baton: warning: etcd 127.0.0.1:" + std::to_string(member.port()) + " ") == 0)
      lines.push_back(line);
  BOOST_TEST_MESSAGE("stderr warnings: " << lines.size() << ", events: " << heard_a.size() << " and "
                                         << heard_b.size());
  BOOST_TEST(lines.size() == 1u);
  BOOST_TEST(heard_a.size() == 1u);
  BOOST_TEST(heard_b.size() == 1u);
  if (!lines.empty() && !heard_a.empty()) BOOST_TEST(lines.front() == "baton: warning: " + heard_a.front());
}

BOOST_AUTO_TEST_CASE(debian_12s_etcd_is_warned_about_once_per_member_or_refused_when_asked) {
  etcd_cluster etcd(1);
  const auto version_answer = http_client(etcd.client_port(0)).get("/version").body;
  const bool affected = detail::check_etcd_version(version_answer).what ==
                        detail::etcd_version_check::verdict::revokes_live_leases;
  BOOST_TEST_MESSAGE("etcd /version: " << version_answer << (affected ? " (revokes live leases)" : ""));
  asio::io_context ioc;
  auto warned = config(etcd.url());
  std::vector<std::string> warnings;
  warned.on_event = [&](const lease_event& e) {
    if (e.what == lease_event::kind::server_warning) warnings.emplace_back(e.reason);
  };
  auto refusing = config(etcd.url());
  refusing.etcd_lease_revocation_bug = etcd_bug_policy::refuse;
  client a(ioc.get_executor(), warned);
  client r(ioc.get_executor(), refusing);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await a.async_acquire("versioned", lease_opts(5000ms));
    BOOST_TEST((co_await l.async_release() == release_outcome::released));
    BOOST_TEST(!(co_await a.async_get("versioned")).has_value());
    BOOST_TEST(warnings.size() == (affected ? 1u : 0u));  // once per member, not per request
    if (affected) BOOST_TEST(warnings.front().find("15247") != std::string::npos, warnings.front());
    boost::system::error_code ec;
    std::string diagnostic;
    try {
      co_await r.async_try_acquire("versioned", lease_opts(5000ms));
    } catch (const exception& e) {
      ec = e.code();
      diagnostic = e.diagnostic();
    }
    if (affected) {
      BOOST_TEST((ec == error::invalid_config), ec.message());
      BOOST_TEST(diagnostic.find("refused") != std::string::npos, diagnostic);
    } else {
      BOOST_TEST(!ec);
    }
  }());
  // Without an event handler (the CLI), the warning is one line on stderr.
  temp_dir scratch;
  auto cli = run_to_end({bin_path("baton"), "get", "versioned", "--server", etcd.url()},
                        (scratch.path() / "cli-stderr").string());
  BOOST_TEST(cli.code == 0, cli.err);
  if (affected) BOOST_TEST(cli.err.rfind("baton: warning: etcd 127.0.0.1:", 0) == 0u, cli.err);
  // --etcd-lease-revocation-bug=refuse: one line naming the member, its version and the setting; exit 64.
  auto refused = run_to_end(
      {bin_path("baton"), "get", "versioned", "--server", etcd.url(), "--etcd-lease-revocation-bug=refuse"},
      (scratch.path() / "refused-stderr").string());
  BOOST_TEST_MESSAGE("baton get --etcd-lease-revocation-bug=refuse: exit " << refused.code << ", "
                                                                           << refused.err);
  if (affected) {
    const auto member = "127.0.0.1:" + std::to_string(etcd.client_port(0));
    const auto version = detail::check_etcd_version(version_answer).version;
    BOOST_TEST(refused.code == 64);
    BOOST_TEST(refused.err == "baton: get \"versioned\": invalid configuration: " +
                                  detail::lease_revocation_message(member, version, true) + "\n");
    BOOST_TEST(refused.err.find("refused, as etcd_lease_revocation_bug is refuse") != std::string::npos);
    BOOST_TEST(refused.out.empty());
  } else {
    BOOST_TEST(refused.code == 0, refused.err);
  }
}

// docs/sdk.md, "Operators' view and break": on etcd a break revokes the holder's etcd lease. A stale token
// and a free key change nothing; the holder is lost, the next in line gets the lock with a larger token.
BOOST_AUTO_TEST_CASE(a_break_revokes_the_holders_etcd_lease_and_the_next_token_is_larger) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  client a(ioc.get_executor(), config(etcd.url()));
  client ops(ioc.get_executor(), config(etcd.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto held = co_await a.async_acquire("jobs/stuck", lease_opts(10000ms));
    auto [stale, none] =
        co_await ops.async_break("jobs/stuck", held.token() + 1000, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(stale == make_error_code(error::token_mismatch));
    BOOST_TEST(held.active());
    std::optional<lease> next;
    asio::co_spawn(
        co_await asio::this_coro::executor,
        [&]() -> asio::awaitable<void> {
          next.emplace(co_await ops.async_acquire("jobs/stuck", lease_opts(10000ms)));
        },
        asio::detached);
    co_await sleep_for(300ms);
    BOOST_TEST(!next.has_value());
    auto broken = co_await ops.async_break("jobs/stuck", held.token());
    BOOST_TEST(broken.token == held.token());
    BOOST_TEST(broken.owner == held.owner());
    BOOST_TEST(co_await lost_within(held, 3000ms));
    for (int i = 0; i < 100 && !next; ++i)
      co_await sleep_for(50ms);
    BOOST_REQUIRE(next.has_value());
    BOOST_TEST(next->token() > held.token());
    co_await next->async_release();
    auto [free_ec, nothing] = co_await ops.async_break("jobs/stuck", asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(free_ec == make_error_code(error::not_held));
    // Listing is not offered on etcd: refused before anything is sent.
    auto [list_ec, page] = co_await ops.async_list("jobs/", asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(list_ec == make_error_code(error::invalid_config));
  }());
}

// docs/design.md, "Lock-delay on etcd": the etcd backend refuses a lease with a lock-delay, before anything
// is sent, with a message that says so; the key stays free, and the same lease without the option is taken.
BOOST_AUTO_TEST_CASE(a_lock_delay_is_refused_on_etcd_before_anything_is_sent) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  client a(ioc.get_executor(), config(etcd.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto delayed = lease_opts(5000ms);
    delayed.lock_delay = 1000ms;
    for (bool wait : {false, true}) {
      boost::system::error_code ec;
      std::string diagnostic;
      try {
        if (wait)
          co_await a.async_acquire("delayed", delayed);
        else
          co_await a.async_try_acquire("delayed", delayed);
      } catch (const exception& e) {
        ec = e.code();
        diagnostic = e.diagnostic();
      }
      BOOST_TEST((ec == error::invalid_config), ec.message());
      BOOST_TEST(diagnostic.find("lock-delay is not supported by this backend") != std::string::npos,
                 diagnostic);
    }
    BOOST_TEST(!(co_await a.async_get("delayed")).has_value());
    // The same client's waiting acquires without the option work on: granted when the holder releases.
    auto plain = co_await a.async_acquire("delayed", lease_opts(5000ms));
    BOOST_TEST(plain.active());
    std::optional<lease> next;
    asio::co_spawn(
        co_await asio::this_coro::executor,
        [&]() -> asio::awaitable<void> {
          next.emplace(co_await a.async_acquire("delayed", lease_opts(5000ms)));
        },
        asio::detached);
    co_await sleep_for(300ms);
    BOOST_TEST(!next.has_value());
    co_await plain.async_release();
    for (int i = 0; i < 100 && !next; ++i)
      co_await sleep_for(50ms);
    BOOST_REQUIRE(next.has_value());
    co_await next->async_release();
  }());
}
