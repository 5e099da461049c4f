// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE etcd_mutex
#include <boost/test/unit_test.hpp>

// Baton's locks on etcd are etcd's own concurrency.Mutex and Election (docs/sdk.md, "etcd"): `etcdctl lock`
// and `etcdctl elect` (Go's concurrency package) and Baton exclude each other on one name, see each other's
// leader, and wait in one line, first come first served. Real etcd members on loopback, real etcdctl.

#include "batond_fixture.hpp"
#include "coro.hpp"
#include "etcd_client_config.hpp"
#include "etcd_cluster.hpp"
#include "eventually.hpp"
#include "http_client.hpp"
#include "lease_opts.hpp"
#include "process.hpp"

#include "baton/client.hpp"
#include "baton/election.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

using namespace baton;
using namespace baton::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {

client_config config(const std::string& url) {
  auto c = etcd_client_config(url, "mutex-test");
  c.etcd_lease_revocation_bug = etcd_bug_policy::warn;
  return c;
}

std::string endpoints(const etcd_cluster& etcd) {
  std::string out;
  for (std::size_t i = 0; i < etcd.size(); ++i)
    out += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(etcd.client_port(i));
  return out;
}

// etcdctl (v3 API) against every member of `etcd`.
std::vector<std::string> etcdctl(const etcd_cluster& etcd, std::vector<std::string> args) {
  std::vector<std::string> argv{"/usr/bin/etcdctl", "--endpoints", endpoints(etcd)};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

// The keys under `prefix` in etcd (member 0), with their create_revision and lease.
struct raw_kv {
  std::string key;
  std::uint64_t create = 0, lease = 0;
};
std::vector<raw_kv> keys_under(const etcd_cluster& etcd, const std::string& prefix) {
  std::string end = prefix;
  ++end.back();
  auto r = http_client(etcd.client_port(0), 5s)
               .post("/v3/kv/range",
                     R"({"key":")" + etcd_b64(prefix) + R"(","range_end":")" + etcd_b64(end) + R"("})");
  std::vector<raw_kv> out;
  if (auto* kvs = r.json.as_object().if_contains("kvs"))
    for (const auto& kv : kvs->as_array()) {
      raw_kv k;
      const std::string key64(kv.at("key").as_string());
      std::string key(boost::beast::detail::base64::decoded_size(key64.size()), '\0');
      key.resize(boost::beast::detail::base64::decode(key.data(), key64.data(), key64.size()).first);
      k.key = key;
      k.create = std::stoull(std::string(kv.at("create_revision").as_string()));
      if (auto* l = kv.as_object().if_contains("lease")) k.lease = std::stoull(std::string(l->as_string()));
      out.push_back(std::move(k));
    }
  return out;
}

}  // namespace

// etcdctl holds: Baton's try is refused naming it, Baton's wait is granted the moment etcdctl lets go, with
// a larger token. Baton holds: etcdctl waits, and gets the lock only after Baton's release.
BOOST_AUTO_TEST_CASE(baton_and_etcdctl_lock_exclude_each_other_both_ways) {
  etcd_cluster etcd(1);
  temp_dir scratch;
  const fs::path rev1 = scratch.path() / "rev1", done1 = scratch.path() / "done1";
  child_process go_holder(
      etcdctl(etcd, {"lock", "baton/locks/k1", "--", "sh", "-c",
                     "echo $ETCD_LOCK_REV > " + rev1.string() + ".tmp && mv " + rev1.string() + ".tmp " +
                         rev1.string() + "; while [ ! -e " + done1.string() + " ]; do sleep 0.05; done"}),
      (scratch.path() / "etcdctl1.err").string());
  BOOST_REQUIRE(eventually([&] { return fs::exists(rev1); }, 20s));
  const std::uint64_t go_token = std::stoull(read_file(rev1));

  asio::io_context ioc;
  client c(ioc.get_executor(), config(etcd.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto tried = co_await c.async_try_acquire("k1", lease_opts(5000ms));
    BOOST_TEST(!tried.acquired.has_value());
    BOOST_TEST(tried.holder.token == go_token);
    BOOST_TEST(tried.holder.owner.rfind("etcd:", 0) == 0, tried.holder.owner);
    auto waiting = start_background(ioc, c.async_acquire("k1", lease_opts(5000ms)));
    co_await sleep_for(700ms);
    BOOST_TEST(!waiting->done);  // etcdctl still holds
    std::ofstream(done1).put('x');
    for (int i = 0; i < 200 && !waiting->done; ++i)
      co_await sleep_for(50ms);
    BOOST_REQUIRE(waiting->done);
    BOOST_REQUIRE(waiting->value.has_value());
    BOOST_TEST(waiting->value->token() > go_token);
    co_await waiting->value->async_release();
  }());
  BOOST_TEST(go_holder.wait(10s) == 0);

  // Baton holds k2; etcdctl lock waits in line behind it.
  const fs::path rev2 = scratch.path() / "rev2";
  std::uint64_t baton_token = 0;
  std::optional<lease> held;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    held.emplace(co_await c.async_acquire("k2", lease_opts(5000ms)));
    baton_token = held->token();
  }());
  child_process go_waiter(
      etcdctl(etcd, {"lock", "baton/locks/k2", "--", "sh", "-c", "echo $ETCD_LOCK_REV > " + rev2.string()}),
      (scratch.path() / "etcdctl2.err").string());
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await sleep_for(1500ms);
    BOOST_TEST(!fs::exists(rev2));  // waiting: Baton holds
    BOOST_TEST((co_await held->async_release() == release_outcome::released));
  }());
  BOOST_REQUIRE(eventually([&] { return fs::exists(rev2) && !read_file(rev2).empty(); }, 20s));
  BOOST_TEST(std::stoull(read_file(rev2)) > baton_token);
  BOOST_TEST(go_waiter.wait(10s) == 0);
}

// etcdctl elect leads: Baton sees its proposal as the leader's value, and Baton's campaign leads once it
// resigns. Baton leads: `etcdctl elect -l` shows Baton's value, then its proclaimed one, and an etcdctl
// candidate leads once Baton resigns.
BOOST_AUTO_TEST_CASE(baton_and_etcdctl_elect_see_each_others_leader_and_take_turns) {
  etcd_cluster etcd(1);
  temp_dir scratch;
  asio::io_context ioc;
  client c(ioc.get_executor(), config(etcd.url()));
  {
    child_process go_leader(etcdctl(etcd, {"elect", "baton/locks/e1", "go-proposal"}),
                            (scratch.path() / "elect1.err").string());
    const std::string key = go_leader.read_line(20s);  // the leader key, then the proposal
    BOOST_TEST(key.rfind("baton/locks/e1/", 0) == 0, key);
    BOOST_TEST(go_leader.read_line(5s) == "go-proposal");
    election e(c, "e1");
    run_coro(ioc, [&]() -> asio::awaitable<void> {
      auto leader = co_await e.async_leader();
      BOOST_REQUIRE(leader.has_value());
      BOOST_TEST(leader->value == "go-proposal");
      auto campaign = start_background(ioc, e.async_campaign("baton-value", lease_opts(5000ms)));
      co_await sleep_for(700ms);
      BOOST_TEST(!campaign->done);
      go_leader.signal(SIGINT);  // etcdctl resigns and closes its session
      for (int i = 0; i < 200 && !campaign->done; ++i)
        co_await sleep_for(50ms);
      BOOST_REQUIRE(campaign->done);
      BOOST_REQUIRE(campaign->value.has_value());
      auto now = co_await e.async_leader();
      BOOST_REQUIRE(now.has_value());
      BOOST_TEST(now->value == "baton-value");
      co_await e.async_resign();
    }());
    go_leader.wait(10s);
  }
  election e2(c, "e2");
  std::optional<lease> leading;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    leading.emplace(co_await e2.async_campaign("10.0.0.1:80", lease_opts(5000ms)));
  }());
  child_process observer(etcdctl(etcd, {"elect", "-l", "baton/locks/e2"}),
                         (scratch.path() / "observe.err").string());
  BOOST_TEST(observer.read_line(20s).rfind("baton/locks/e2/", 0) == 0);
  BOOST_TEST(observer.read_line(5s) == "10.0.0.1:80");
  run_coro(ioc, [&]() -> asio::awaitable<void> { co_await e2.async_proclaim("10.0.0.1:81"); }());
  BOOST_TEST(observer.read_line(20s).rfind("baton/locks/e2/", 0) == 0);
  BOOST_TEST(observer.read_line(5s) == "10.0.0.1:81");
  child_process go_candidate(etcdctl(etcd, {"elect", "baton/locks/e2", "go-next"}),
                             (scratch.path() / "elect2.err").string());
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await sleep_for(1000ms);
    co_await e2.async_resign();
  }());
  BOOST_TEST(go_candidate.read_line(20s).rfind("baton/locks/e2/", 0) == 0);
  BOOST_TEST(go_candidate.read_line(5s) == "go-next");
  go_candidate.signal(SIGINT);
  observer.signal(SIGINT);
  go_candidate.wait(10s);
  observer.wait(10s);
}

// Waiting acquires on etcd queue in etcd's line: granted in the order they arrived, each waiter watching only
// the key before its own. A waiter cancelled in the line leaves no key behind, and one that is killed
// (its process gone, its etcd lease kept alive by nobody) holds the line up to its TTL only.
BOOST_AUTO_TEST_CASE(waiters_on_etcd_are_granted_in_arrival_order_and_leave_no_key_behind) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  client c(ioc.get_executor(), config(etcd.url()));
  constexpr int waiters = 5;
  std::vector<int> granted;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto holder = co_await c.async_acquire("line", lease_opts(10000ms));
    std::vector<std::shared_ptr<background<lease>>> line;
    for (int i = 0; i < waiters; ++i) {
      line.push_back(start_background(ioc, c.async_acquire("line", lease_opts(10000ms))));
      co_await sleep_for(100ms);  // each one in line before the next arrives
    }
    // Waiter 2 gives up: cancelled in the line, its key goes at once.
    auto cancel_me = std::make_shared<asio::cancellation_signal>();
    auto cancelled = std::make_shared<bool>(false);
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
          try {
            co_await c.async_acquire("line", lease_opts(10000ms));
          } catch (const std::exception&) {
            *cancelled = true;
          }
        },
        asio::bind_cancellation_slot(cancel_me->slot(), asio::detached));
    co_await sleep_for(300ms);
    BOOST_TEST(keys_under(etcd, "baton/locks/line/").size() == static_cast<std::size_t>(waiters + 2));
    cancel_me->emit(asio::cancellation_type::terminal);
    for (int i = 0; i < 100 && keys_under(etcd, "baton/locks/line/").size() > std::size_t(waiters + 1); ++i)
      co_await sleep_for(50ms);
    BOOST_TEST(*cancelled);
    BOOST_TEST(keys_under(etcd, "baton/locks/line/").size() == static_cast<std::size_t>(waiters + 1));

    co_await holder.async_release();
    std::uint64_t last_token = holder.token();
    for (int n = 0; n < waiters; ++n) {
      int who = -1;
      for (int t = 0; t < 200 && who < 0; ++t) {
        for (int i = 0; i < waiters; ++i)
          if (line[i]->done && std::find(granted.begin(), granted.end(), i) == granted.end()) who = i;
        if (who < 0) co_await sleep_for(25ms);
      }
      BOOST_REQUIRE(who >= 0);
      granted.push_back(who);
      BOOST_REQUIRE(line[who]->value.has_value());
      BOOST_TEST(line[who]->value->token() > last_token);
      last_token = line[who]->value->token();
      co_await sleep_for(150ms);  // nobody else is granted while this one holds
      int holding = 0;
      for (int i = 0; i < waiters; ++i)
        holding += line[i]->done && std::find(granted.begin(), granted.end(), i) == granted.end();
      BOOST_TEST(holding == 0);
      co_await line[who]->value->async_release();
    }
    for (int t = 0; t < 100 && !keys_under(etcd, "baton/locks/line").empty(); ++t)
      co_await sleep_for(50ms);
    BOOST_TEST(keys_under(etcd, "baton/locks/line").empty());  // neither the guard nor a contender key
  }());
  const std::vector<int> arrival{0, 1, 2, 3, 4};
  BOOST_TEST(granted == arrival, boost::test_tools::per_element());

  // A `baton acquire --wait` killed in the line: its key stays until its etcd lease ends (2 s), then the
  // next waiter is granted.
  temp_dir scratch;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto holder = co_await c.async_acquire("dropped", lease_opts(10000ms));
    child_process dropped(
        {bin_path("baton"), "acquire", "dropped", "--ttl", "2s", "--wait", "--server", etcd.url()},
        (scratch.path() / "dropped.err").string());
    co_await sleep_for(1000ms);
    BOOST_TEST(keys_under(etcd, "baton/locks/dropped/").size() == 2u);
    dropped.signal(SIGKILL);
    dropped.wait(5s);
    auto next = start_background(ioc, c.async_acquire("dropped", lease_opts(10000ms)));
    co_await sleep_for(300ms);
    const auto released = std::chrono::steady_clock::now();
    co_await holder.async_release();
    for (int i = 0; i < 200 && !next->done; ++i)
      co_await sleep_for(50ms);
    BOOST_REQUIRE(next->value.has_value());
    const auto after = std::chrono::steady_clock::now() - released;
    BOOST_TEST_MESSAGE("granted " << std::chrono::duration_cast<std::chrono::milliseconds>(after).count()
                                  << " ms after the release, behind a killed waiter with a 2 s lease");
    BOOST_TEST((after < 10s));  // the killed waiter's lease ends within its 2 s TTL (plus etcd's sweep)
    co_await next->value->async_release();
  }());
}

// A rolling upgrade from the single-key layout (Baton before the etcd recipe): a holder of the old layout
// keeps the lock from new clients, new holders write the old key too, and waiters that were in line before
// an old-layout holder came are granted only after it, each with a larger token than the one before (the
// token is the revision at which a hold began: the guard's create_revision).
BOOST_AUTO_TEST_CASE(old_and_new_layout_clients_never_both_hold_and_tokens_keep_growing) {
  etcd_cluster etcd(1);
  http_client raw(etcd.client_port(0));
  auto grant = [&] {
    auto g = raw.post("/v3/lease/grant", R"({"TTL":"30"})");
    return std::string(g.json.at("ID").as_string());
  };
  // An old client holds "up": its key is the lock's name, the owner its value, under its etcd lease.
  const std::string old_lease = grant();
  BOOST_REQUIRE(raw.post("/v3/kv/put", R"({"key":")" + etcd_b64("baton/locks/up") + R"(","value":")" +
                                           etcd_b64("old-owner") + R"(","lease":")" + old_lease + R"("})")
                    .status == 200);
  asio::io_context ioc;
  client c(ioc.get_executor(), config(etcd.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto tried = co_await c.async_try_acquire("up", lease_opts(5000ms));
    BOOST_TEST(!tried.acquired.has_value());
    BOOST_TEST(tried.holder.owner == "old-owner");
    const auto old_token = tried.holder.token;
    auto waiting = start_background(ioc, c.async_acquire("up", lease_opts(5000ms)));
    co_await sleep_for(700ms);
    BOOST_TEST(!waiting->done);
    raw.post("/v3/lease/revoke", R"({"ID":")" + old_lease + R"("})");  // the old client releases
    for (int i = 0; i < 200 && !waiting->done; ++i)
      co_await sleep_for(50ms);
    BOOST_REQUIRE(waiting->value.has_value());
    BOOST_TEST(waiting->value->token() > old_token);
    // The new holder writes the old key too, naming its owner: an old client sees the lock held.
    const auto keys = keys_under(etcd, "baton/locks/up");
    BOOST_TEST(keys.size() == 2u);
    BOOST_TEST(std::count_if(keys.begin(), keys.end(),
                             [](const raw_kv& k) { return k.key == "baton/locks/up"; }) == 1);
    co_await waiting->value->async_release();
  }());

  // In line first (behind an etcdctl-style holder), then an old client takes the old key: the waiter waits
  // for it, and takes its place again behind it, so its token is larger than the old holder's.
  const std::string go_lease = grant();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%llx", std::stoull(go_lease));
  BOOST_REQUIRE(raw.post("/v3/kv/put", R"({"key":")" + etcd_b64(std::string("baton/locks/race/") + hex) +
                                           R"(","value":"","lease":")" + go_lease + R"("})")
                    .status == 200);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto waiting = start_background(ioc, c.async_acquire("race", lease_opts(5000ms)));
    co_await sleep_for(300ms);
    auto second = start_background(ioc, c.async_acquire("race", lease_opts(5000ms)));  // behind the first
    co_await sleep_for(300ms);
    const std::string late_lease = grant();
    BOOST_REQUIRE(raw.post("/v3/kv/put", R"({"key":")" + etcd_b64("baton/locks/race") + R"(","value":")" +
                                             etcd_b64("late-old-owner") + R"(","lease":")" + late_lease +
                                             R"("})")
                      .status == 200);
    std::uint64_t late_token = 0;
    for (const auto& k : keys_under(etcd, "baton/locks/race"))
      if (k.key == "baton/locks/race") late_token = k.create;
    BOOST_REQUIRE(late_token != 0);
    raw.post("/v3/lease/revoke", R"({"ID":")" + go_lease + R"("})");  // the etcdctl holder lets go
    co_await sleep_for(700ms);
    BOOST_TEST(!waiting->done);  // first in line, but the old layout's holder holds
    raw.post("/v3/lease/revoke", R"({"ID":")" + late_lease + R"("})");
    for (int i = 0; i < 200 && !waiting->done; ++i)
      co_await sleep_for(50ms);
    BOOST_REQUIRE(waiting->value.has_value());
    BOOST_TEST(waiting->value->token() > late_token);
    BOOST_TEST(!second->done);
    co_await waiting->value->async_release();
    // The second never saw the old holder (it watched the first's key): its token is larger still.
    for (int i = 0; i < 200 && !second->done; ++i)
      co_await sleep_for(50ms);
    BOOST_REQUIRE(second->value.has_value());
    BOOST_TEST(second->value->token() > waiting->value->token());
    co_await second->value->async_release();
  }());
}

// Six contenders on one name, three Baton clients and three `etcdctl lock` loops, on three members, the
// leader killed in the middle: no two are ever inside at once (each enters by creating one directory, which
// fails if another is inside).
BOOST_AUTO_TEST_CASE(mixed_baton_and_etcdctl_contenders_never_overlap_across_a_leader_kill) {
  etcd_cluster etcd(3);
  temp_dir scratch;
  const fs::path inside = scratch.path() / "inside", overlaps = scratch.path() / "overlaps";
  constexpr int rounds = 8;
  std::vector<std::unique_ptr<child_process>> go;
  for (int i = 0; i < 3; ++i) {
    const std::string lock = "/usr/bin/etcdctl --endpoints " + endpoints(etcd) + " lock baton/locks/mixed --";
    const std::string section = "mkdir " + inside.string() + " 2>/dev/null || echo go >> " +
                                overlaps.string() + "; sleep 0.05; rmdir " + inside.string();
    go.push_back(std::make_unique<child_process>(
        std::vector<std::string>{"/bin/sh", "-c",
                                 "i=0; while [ $i -lt " + std::to_string(rounds) + " ]; do " + lock +
                                     " sh -c '" + section + "' && i=$((i+1)); done"},
        (scratch.path() / ("go" + std::to_string(i) + ".err")).string()));
  }
  std::atomic<int> baton_rounds{0}, baton_overlaps{0};
  std::vector<std::thread> baton;
  for (int i = 0; i < 3; ++i)
    baton.emplace_back([&] {
      asio::io_context ioc;
      client c(ioc.get_executor(), config(etcd.url()));
      run_coro(
          ioc,
          [&]() -> asio::awaitable<void> {
            for (int done = 0; done < rounds;) {
              try {
                auto l = co_await c.async_acquire("mixed", lease_opts(5000ms));
                if (l.active()) {
                  std::error_code ec;
                  if (!fs::create_directory(inside, ec)) ++baton_overlaps;
                  co_await sleep_for(50ms);
                  fs::remove(inside, ec);
                  ++done;
                  ++baton_rounds;
                }
                co_await l.async_release();
              } catch (const baton::exception& e) {
                BOOST_TEST_MESSAGE("a Baton contender retries after: " << e.what());
              }
            }
          }(),
          180s);
    });
  // The leader dies after a few rounds, and comes back.
  BOOST_REQUIRE(eventually([&] { return baton_rounds.load() >= 3; }, 60s));
  const auto leader = etcd.leader();
  etcd.kill(leader);
  std::this_thread::sleep_for(2s);
  etcd.start(leader);
  for (auto& t : baton)
    t.join();
  for (auto& p : go)
    BOOST_TEST(p->wait(120s) == 0);
  BOOST_TEST(baton_rounds.load() == 3 * rounds);
  BOOST_TEST(baton_overlaps.load() == 0);
  BOOST_TEST(!fs::exists(overlaps), "etcdctl found another contender inside");
}

// The holder's own owner asking again (a process that retries with its owner) supersedes at once, as a
// plain re-acquire does, instead of waiting in line behind itself; a lock named below another ("n/x") is not
// taken for a contender of "n".
BOOST_AUTO_TEST_CASE(the_holders_own_owner_supersedes_at_once_and_nested_names_are_separate_locks) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  client c(ioc.get_executor(), config(etcd.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease_options known = lease_opts(5000ms);
    known.owner = "known-owner";
    auto first = co_await c.async_acquire("so", known);
    const auto asked = std::chrono::steady_clock::now();
    auto again = co_await c.async_acquire("so", known, 3000ms);
    BOOST_TEST((std::chrono::steady_clock::now() - asked < 2s));  // not the 3 s wait
    BOOST_TEST(again.token() > first.token());
    BOOST_TEST((co_await again.async_release() == release_outcome::released));

    auto nested = co_await c.async_acquire("n/x", lease_opts(5000ms));
    auto parent = co_await c.async_try_acquire("n", lease_opts(5000ms));
    BOOST_REQUIRE(parent.acquired.has_value());  // "n/x" holds another lock
    BOOST_TEST((co_await c.async_get("n"))->token == parent.acquired->token());
    co_await parent.acquired->async_release();
    co_await nested.async_release();
  }());
}

// A waiter cancelled while etcd does not answer (a keep-alive or a read in flight) still gives its place up
// as soon as etcd answers again, not at its etcd lease's end (9 s here).
BOOST_AUTO_TEST_CASE(a_waiter_cancelled_while_etcd_hangs_leaves_the_line_once_etcd_answers) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  client c(ioc.get_executor(), config(etcd.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto holder = co_await c.async_acquire("hang", lease_opts(30000ms));
    auto cancel_me = std::make_shared<asio::cancellation_signal>();
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
          try {
            co_await c.async_acquire("hang", lease_opts(9000ms));
          } catch (const std::exception&) {
          }
        },
        asio::bind_cancellation_slot(cancel_me->slot(), asio::detached));
    co_await sleep_for(2000ms);
    BOOST_TEST(keys_under(etcd, "baton/locks/hang/").size() == 2u);
    etcd.pause(0);
    co_await sleep_for(2000ms);  // the waiter's keep-alive (every 3 s) is in flight, unanswered
    cancel_me->emit(asio::cancellation_type::terminal);
    co_await sleep_for(300ms);
    etcd.resume(0);
    const auto resumed = std::chrono::steady_clock::now();
    while (keys_under(etcd, "baton/locks/hang/").size() > 1 &&
           std::chrono::steady_clock::now() - resumed < 8s)
      co_await sleep_for(50ms);
    const auto after = std::chrono::steady_clock::now() - resumed;
    BOOST_TEST_MESSAGE("the cancelled waiter's key went "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(after).count()
                       << " ms after etcd answered again");
    BOOST_TEST((after < 2s));  // its etcd lease had at least 4 s left
    co_await holder.async_release();
  }());
}
