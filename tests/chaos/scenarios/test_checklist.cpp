// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE checklist
#include <boost/test/unit_test.hpp>

// The failure checklist of docs/design.md ("Failure checklist"), one test per scenario. Each tells the story
// of its scenario step by step and asserts, at each step, who owns the key, which token is current, whether a
// write with each token is accepted by the fenced resource, whether a retry is safe (and that retrying really
// is), and how the system recovers.
//
// Where timing decides the outcome, the story runs on the pure cores with the server's clock driven by hand:
// the lock table (batond's semantics), the lease state machine (the SDK's decisions) and the fenced store's
// item_store (the resource). Where the process is the point — a reply lost on the wire, a crash in the middle
// of group commits, a restart — it runs against a real batond on a loopback port, through the fault proxy
// where a reply must be lost. No sleep decides an outcome.

#include "baton/detail/lease_fsm.hpp"
#include "batond_fixture.hpp"
#include "fault_proxy.hpp"
#include "item_store.hpp"
#include "journal.hpp"
#include "lock_requests.hpp"
#include "lock_table.hpp"
#include "wal_record.hpp"

#include <atomic>
#include <fstream>
#include <latch>
#include <map>
#include <mutex>
#include <thread>
#include <variant>

namespace srv = baton::server;
using baton::lease_state;
using fsm = baton::detail::lease_fsm;
using baton::test::acquire_body;
using baton::test::batond_process;
using baton::test::drop_style;
using baton::test::fault_proxy;
using baton::test::http_client;
using baton::test::http_reply;
using baton::test::release_body;
using baton::test::renew_body;
using baton::test::temp_dir;
using baton::test::token_of;
using namespace std::chrono_literals;
using std::chrono::milliseconds;
using time_point = std::chrono::steady_clock::time_point;

namespace {

const time_point t0 = time_point{} + 1000s;
const std::string key = "report";
const std::string resource = "reports";  // what the fenced store guards with the key's tokens

// The client's state machine on this file's one time line, the server's steady clock. lease_fsm keeps its
// deadline on lease_clock; both count nanoseconds, so a time point converts by its count.
class lease_fsm {
 public:
  using action = fsm::action;
  using renew_outcome = fsm::renew_outcome;
  using timing = fsm::timing;
  lease_fsm(timing t, time_point sent, std::uint64_t seed) : f_(t, to_lease(sent), seed) {}
  lease_state state() const { return f_.state(); }
  time_point deadline() const { return from_lease(f_.deadline()); }
  time_point next_renew() const { return from_lease(f_.next_renew()); }
  action poll(time_point now) { return f_.poll(to_lease(now)); }
  renew_outcome on_renew_ok(time_point sent, time_point now) {
    return f_.on_renew_ok(to_lease(sent), to_lease(now));
  }
  void on_renew_refused(std::string reason) { f_.on_renew_refused(std::move(reason)); }
  void on_renew_failed(time_point now) { f_.on_renew_failed(to_lease(now)); }

 private:
  static baton::lease_clock::time_point to_lease(time_point t) {
    return baton::lease_clock::time_point(t.time_since_epoch());
  }
  static time_point from_lease(baton::lease_clock::time_point t) { return time_point(t.time_since_epoch()); }
  fsm f_;
};

lease_fsm::timing lease_timing(milliseconds ttl, milliseconds every, milliseconds margin) {
  baton::retry_policy retry;
  retry.initial_backoff = 100ms;
  retry.max_backoff = 1000ms;
  return {ttl, every, margin, /*jitter=*/0.0, retry};
}

// One story's world: the lock server's table, the fenced resource, and the server's clock, moved by hand.
struct world {
  srv::lock_table table;
  fenced_store::item_store store{1000};
  time_point now = t0;

  // Acquire: the granted token, or 0 when refused.
  std::uint64_t acquire(std::string_view owner, milliseconds ttl) {
    auto r = table.acquire(key, owner, ttl, now);
    auto* g = std::get_if<srv::acquire_granted>(&r);
    return g ? g->token : 0;
  }
  // The refusal reason of a renew, or "renewed".
  std::string renew(std::string_view owner, std::uint64_t token, milliseconds ttl) {
    auto r = table.renew(key, owner, token, ttl, now);
    if (auto* refused = std::get_if<srv::renew_refused>(&r))
      return std::string(srv::to_string(refused->reason));
    return "renewed";
  }
  srv::release_outcome release(std::string_view owner, std::uint64_t token) {
    return table.release(key, owner, token, now).outcome;
  }
  // The current owner of the key ("" when free) and its token (0 when free).
  std::string owner() const {
    auto v = table.get(key, now);
    return v ? v->owner : "";
  }
  std::uint64_t token() const {
    auto v = table.get(key, now);
    return v ? v->token : 0;
  }
  // A write to the fenced resource with `token`: accepted or refused as stale.
  bool write(std::uint64_t token, std::string value) {
    return store.put(resource, key, std::move(value), baton::fence{token}).accepted;
  }
  std::string stored() const {
    auto it = store.get(key);
    return it ? it->value : "";
  }
  std::uint64_t fence() const {
    auto f = store.fences();
    auto it = f.find(resource);
    return it == f.end() ? 0 : it->second;
  }
};

// The state every step asserts: owner and current token at the server.
#define EXPECT_OWNER(w, who, tok)   \
  do {                              \
    BOOST_TEST((w).owner() == who); \
    BOOST_TEST((w).token() == tok); \
  } while (0)

std::string field(const http_reply& r, const char* name) {
  return std::string(r.json.at(name).as_string());
}

// A request whose reply the proxy swallows and answers with a reset: the client sees an error, never a reply.
// Sent as raw bytes on a connection of its own, because http_client resends once on a reused connection.
void send_and_lose_reply(fault_proxy& proxy, std::string_view target, std::string_view body) {
  const auto dropped = proxy.responses_dropped();
  proxy.drop_responses(1, drop_style::reset);
  std::string request = "POST " + std::string(target) +
                        " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
  BOOST_CHECK_THROW(http_client::raw(proxy.port(), request, 10s), boost::system::system_error);
  BOOST_TEST(proxy.responses_dropped() == dropped + 1);
}

}  // namespace

// (1) Two clients acquire at once.
// A and B send an acquire for the same key at the same server instant. batond decides them one after the
// other under one mutex: A is granted token 1; B is refused and told that A holds it with 1. The refusal
// took no token, so B may retry as often as it likes: each retry is refused the same way while A holds the
// lease. Only A has a token to write with. Recovery: when A releases, B's next retry is granted 2; A's late
// write with 1 is refused once B has written with 2.
// The same race then runs for real: two threads released together send their acquires to one batond, twenty
// times on twenty keys. Each time exactly one wins, the other is told the winner and its token, and its
// retry is refused again. Because refusals take no token, the winners' tokens are exactly 1, 2, ..., 20.
BOOST_AUTO_TEST_CASE(s01_two_clients_acquire_at_once_exactly_one_wins_the_other_retries_safely) {
  {
    temp_dir dir;
    batond_process server(dir.path());
    http_client a(server.port(), 10s), b(server.port(), 10s);
    for (int round = 1; round <= 20; ++round) {
      const std::string target = "/v1/locks/race-" + std::to_string(round) + "/acquire";
      http_reply ra, rb;
      std::latch start(2);
      std::thread ta([&] {
        start.arrive_and_wait();
        ra = a.post(target, acquire_body("A", 60000));
      });
      std::thread tb([&] {
        start.arrive_and_wait();
        rb = b.post(target, acquire_body("B", 60000));
      });
      ta.join();
      tb.join();
      BOOST_TEST_CONTEXT("round " << round) {
        BOOST_REQUIRE((ra.status == 200) != (rb.status == 200));
        const http_reply& won = ra.status == 200 ? ra : rb;
        const http_reply& lost = ra.status == 200 ? rb : ra;
        const std::string winner = ra.status == 200 ? "A" : "B";
        const std::string loser = ra.status == 200 ? "B" : "A";
        BOOST_TEST(token_of(won) == static_cast<std::uint64_t>(round));
        BOOST_TEST(lost.status == 409);
        BOOST_TEST(field(lost, "owner") == winner);
        BOOST_TEST(token_of(lost) == token_of(won));
        auto retry = (loser == "A" ? a : b).post(target, acquire_body(loser, 60000));
        BOOST_TEST(retry.status == 409);
        BOOST_TEST(token_of(retry) == token_of(won));
      }
    }
  }

  world w;
  auto a = w.table.acquire(key, "A", 10s, w.now);
  auto b = w.table.acquire(key, "B", 10s, w.now);
  BOOST_REQUIRE(std::holds_alternative<srv::acquire_granted>(a));
  BOOST_TEST(std::get<srv::acquire_granted>(a).token == 1u);
  BOOST_REQUIRE(std::holds_alternative<srv::acquire_refused>(b));
  BOOST_TEST(std::get<srv::acquire_refused>(b).holder.owner == "A");
  BOOST_TEST(std::get<srv::acquire_refused>(b).holder.token == 1u);
  EXPECT_OWNER(w, "A", 1u);
  BOOST_TEST(w.write(1, "by A"));

  // B retries: refused each time, no token consumed, nothing changes.
  for (int i = 0; i < 3; ++i) {
    w.now += 1s;
    BOOST_TEST(w.acquire("B", 10s) == 0u);
    EXPECT_OWNER(w, "A", 1u);
  }
  BOOST_TEST(w.table.last_token() == 1u);

  // Recovery: A releases, B's retry wins with the next token, and fences A out.
  BOOST_TEST((w.release("A", 1) == srv::release_outcome::released));
  EXPECT_OWNER(w, "", 0u);
  BOOST_TEST(w.acquire("B", 10s) == 2u);
  EXPECT_OWNER(w, "B", 2u);
  BOOST_TEST(w.write(2, "by B"));
  BOOST_TEST(!w.write(1, "late A"));
  BOOST_TEST(w.stored() == "by B");
  BOOST_TEST(w.fence() == 2u);
}

// (2) An owner dies without releasing.
// A acquires with a 10 s TTL and dies (kill -9: no release, no renew). Until the server's clock reaches the
// lease's expiry, A is the owner and 1 is current: B is refused, and B's retries are safe (refused, no token
// taken). Had A only paused, its own deadline (send time + TTL − margin) would have ended its lease before
// the server's expiry. At the expiry instant — which already counts as free — B's retry is granted 2. Token 1
// can no longer renew or release, and a write A queued before dying, delivered late, is refused once B wrote
// with
// 2. Recovery: the TTL alone; nobody has to notice the death.
BOOST_AUTO_TEST_CASE(s02_owner_dies_without_release_lock_frees_at_server_expiry_and_next_token_fences_it) {
  world w;
  const time_point sent = w.now - 5ms;  // A's acquire took 5 ms to arrive
  BOOST_TEST(w.acquire("A", 10s) == 1u);
  lease_fsm a(lease_timing(10s, 3s, 1s), sent, 1);
  BOOST_TEST(w.write(1, "by A"));
  const time_point expiry = w.now + 10s;
  // A's local deadline comes first: a paused A would have given up before anyone else can be granted.
  BOOST_TEST((a.deadline() < expiry));

  // A dies at t0 + 1 s. B polls until the lease expires.
  w.now = expiry - 1ms;
  BOOST_TEST(w.acquire("B", 10s) == 0u);
  EXPECT_OWNER(w, "A", 1u);
  BOOST_TEST(w.table.last_token() == 1u);

  w.now = expiry;
  EXPECT_OWNER(w, "", 0u);
  BOOST_TEST(w.acquire("B", 10s) == 2u);
  EXPECT_OWNER(w, "B", 2u);

  // The dead owner's token is powerless: no renew, no release, and its late write is fenced out.
  BOOST_TEST(w.renew("A", 1, 10s) == "owner_mismatch");
  BOOST_TEST((w.release("A", 1) == srv::release_outcome::not_owner));
  EXPECT_OWNER(w, "B", 2u);
  BOOST_TEST(w.write(2, "by B"));
  BOOST_TEST(!w.write(1, "queued by A before it died"));
  BOOST_TEST(w.stored() == "by B");
}

// (3) Renew comes after expiry.
// A holds token 1 (TTL 9 s, renew every 3 s, margin 0.9 s) and is paused from t0 + 1 s to t0 + 9.5 s, past
// both its local deadline and the server's expiry. On waking, the SDK's first step is a poll, which declares
// the lease lost: the holder stops before sending anything. A renew that is sent anyway is refused as
// `expired`; the server does not revive an expired lease, so retrying the renew is safe and refused again.
// While A's lease is lost, the resource still accepts 1 until a larger token writes, so it is the SDK's
// deadline that keeps A from writing. Recovery: A acquires again, as a new lease with a new token (2),
// whose first write fences 1 out.
// Second story: a renew sent just before the deadline and confirmed just after it. The server did extend the
// lease, but the SDK keeps it lost (a late "renewed" does not revive) and releases it in the background,
// so the key is free at once instead of after a TTL.
BOOST_AUTO_TEST_CASE(s03_renew_after_expiry_is_refused_and_a_late_confirmation_does_not_revive) {
  {
    world w;
    BOOST_TEST(w.acquire("A", 9s) == 1u);
    lease_fsm a(lease_timing(9s, 3s, 900ms), w.now, 1);
    BOOST_TEST(w.write(1, "by A"));
    BOOST_TEST((a.poll(w.now + 1s) == lease_fsm::action::wait));

    w.now = t0 + 9500ms;  // A wakes from its pause
    BOOST_TEST((a.poll(w.now) == lease_fsm::action::declare_lost));
    BOOST_TEST((a.state() == lease_state::lost));
    EXPECT_OWNER(w, "", 0u);
    BOOST_TEST(w.renew("A", 1, 9s) == "not_held");  // an expired lease is answered as an absent one
    BOOST_TEST(w.renew("A", 1, 9s) == "not_held");  // the retry: same answer, still not revived
    EXPECT_OWNER(w, "", 0u);
    a.on_renew_refused("not_held");  // a refusal after the loss changes nothing
    BOOST_TEST((a.state() == lease_state::lost));

    // Recovery: a new acquisition, a new token.
    BOOST_TEST(w.acquire("A", 9s) == 2u);
    EXPECT_OWNER(w, "A", 2u);
    BOOST_TEST(w.write(2, "by A's new lease"));
    BOOST_TEST(!w.write(1, "old lease"));
  }
  {
    world w;
    BOOST_TEST(w.acquire("A", 9s) == 1u);
    lease_fsm a(lease_timing(9s, 3s, 900ms), w.now, 1);
    const time_point deadline = a.deadline();  // t0 + 8.1 s
    // The renew is sent 100 ms before the deadline (its earlier tries failed) and the server extends.
    const time_point sent = deadline - 100ms;
    w.now = sent + 10ms;
    BOOST_TEST(w.renew("A", 1, 9s) == "renewed");
    // Its answer arrives 200 ms after the deadline: the SDK had already declared the loss at the deadline.
    BOOST_TEST((a.poll(deadline) == lease_fsm::action::declare_lost));
    BOOST_TEST((a.on_renew_ok(sent, deadline + 200ms) == lease_fsm::renew_outcome::too_late));
    BOOST_TEST((a.state() == lease_state::lost));
    BOOST_TEST((a.deadline() == deadline));
    // The server still holds it for A; the background release frees it; a retried release is harmless.
    w.now = deadline + 200ms;
    EXPECT_OWNER(w, "A", 1u);
    BOOST_TEST((w.release("A", 1) == srv::release_outcome::released));
    BOOST_TEST((w.release("A", 1) == srv::release_outcome::already_free));
    EXPECT_OWNER(w, "", 0u);
    BOOST_TEST(w.acquire("B", 9s) == 2u);
    BOOST_TEST(w.write(2, "by B"));
    BOOST_TEST(!w.write(1, "by A after its loss"));
  }
}

// (4) An acquire reply is lost.
// A's acquire reaches the server, which grants token 1 to A; the reply is lost (here: swallowed by the fault
// proxy, the connection reset). A does not know it holds the key; B is refused. A retries with the same owner
// string: the server treats it as the same holder and supersedes the grant with token 2. Token 1, which
// nobody ever saw, can neither renew nor release. The retry is therefore safe, and it is what recovers: a
// retry under a fresh owner would be refused (held by A's own lost grant) until the TTL. Writes with 2 are
// accepted.
BOOST_AUTO_TEST_CASE(s04_lost_acquire_reply_retry_with_same_owner_is_safe) {
  temp_dir dir;
  batond_process server(dir.path());
  fault_proxy proxy(server.port());
  auto direct = server.client();
  world w;  // the fenced resource; the server is the real one

  send_and_lose_reply(proxy, "/v1/locks/report/acquire", acquire_body("A", 60000));
  auto held = direct.get("/v1/locks/report");  // the lost request was applied
  BOOST_REQUIRE(held.status == 200);
  BOOST_TEST(field(held, "owner") == "A");
  BOOST_TEST(token_of(held) == 1u);
  auto b = direct.post("/v1/locks/report/acquire", acquire_body("B", 60000));
  BOOST_TEST(b.status == 409);
  BOOST_TEST(field(b, "owner") == "A");

  // A retry under another owner name would not recover: A's own lost grant blocks it for a TTL.
  BOOST_TEST(direct.post("/v1/locks/report/acquire", acquire_body("A-fresh", 60000)).status == 409);

  // The retry with the same owner supersedes.
  http_client retry(proxy.port(), 10s);
  auto r = retry.post("/v1/locks/report/acquire", acquire_body("A", 60000));
  BOOST_REQUIRE(r.status == 200);
  BOOST_TEST(token_of(r) == 2u);
  held = direct.get("/v1/locks/report");
  BOOST_TEST(field(held, "owner") == "A");
  BOOST_TEST(token_of(held) == 2u);

  // The lost token is dead: no renew, no release; the current one works.
  auto old_renew = direct.post("/v1/locks/report/renew", renew_body("A", 1, 60000));
  BOOST_TEST(old_renew.status == 409);
  BOOST_TEST(field(old_renew, "reason") == "token_mismatch");
  BOOST_TEST(direct.post("/v1/locks/report/release", release_body("A", 1)).status == 409);
  BOOST_TEST(token_of(direct.get("/v1/locks/report")) == 2u);
  BOOST_TEST(direct.post("/v1/locks/report/renew", renew_body("A", 2, 60000)).status == 200);
  BOOST_TEST(w.write(2, "by A"));
  BOOST_TEST(!w.write(1, "with the lost token"));

  // The same story on the pure table, where the replaced token is reported.
  auto g1 = w.table.acquire(key, "A", 10s, w.now);
  auto g2 = w.table.acquire(key, "A", 10s, w.now);
  BOOST_TEST(std::get<srv::acquire_granted>(g2).replaced_token == std::get<srv::acquire_granted>(g1).token);
  BOOST_TEST(std::get<srv::acquire_granted>(g2).token > std::get<srv::acquire_granted>(g1).token);
}

// (5) A release reply is lost.
// A holds token 1 and releases; the server frees the key but the reply is lost. A retries the release: the
// key is already free, and the answer says so (200, outcome already_free), so the retry is safe. If B took
// the key in between (token 2), A's retried release is refused (not_owner) and B keeps the key: a retried
// release can never free someone else's lease. A stops writing when it releases; its late write with 1 is
// refused once B writes with 2. Recovery: the retry itself.
BOOST_AUTO_TEST_CASE(s05_lost_release_reply_retry_is_safe_and_never_frees_the_next_holder) {
  temp_dir dir;
  batond_process server(dir.path());
  fault_proxy proxy(server.port());
  auto direct = server.client();
  world w;

  auto a = direct.post("/v1/locks/report/acquire", acquire_body("A", 60000));
  BOOST_REQUIRE(a.status == 200);
  BOOST_TEST(token_of(a) == 1u);
  BOOST_TEST(w.write(1, "by A"));

  send_and_lose_reply(proxy, "/v1/locks/report/release", release_body("A", 1));
  BOOST_TEST(direct.get("/v1/locks/report").status == 404);  // applied: the key is free

  http_client retry(proxy.port(), 10s);
  auto again = retry.post("/v1/locks/report/release", release_body("A", 1));
  BOOST_TEST(again.status == 200);
  BOOST_TEST(field(again, "outcome") == "already_free");
  BOOST_TEST(direct.get("/v1/locks/report").status == 404);

  // B takes the key; another copy of A's retry arrives late and changes nothing.
  auto b = direct.post("/v1/locks/report/acquire", acquire_body("B", 60000));
  BOOST_REQUIRE(b.status == 200);
  BOOST_TEST(token_of(b) == 2u);
  auto late = retry.post("/v1/locks/report/release", release_body("A", 1));
  BOOST_TEST(late.status == 409);
  BOOST_TEST(field(late, "error") == "not_owner");
  auto held = direct.get("/v1/locks/report");
  BOOST_TEST(field(held, "owner") == "B");
  BOOST_TEST(token_of(held) == 2u);
  BOOST_TEST(w.write(2, "by B"));
  BOOST_TEST(!w.write(1, "late A"));
  BOOST_TEST(w.stored() == "by B");
}

// (6) A stale owner writes after a new token exists.
// A holds token 1 and writes. A is frozen (GC pause, VM freeze) past its lease; B is granted 2. The resource
// knows only the tokens it has seen: a write of A's that lands before B's first write is still accepted
// (ordered before all of B's writes, never after one). Once B has written with 2, every write with 1 is
// refused with the newer token in the answer, and retrying it is refused the same way; B keeps writing with
// 2 (equal tokens are accepted). A learns of the loss from its SDK at its first poll and from the 409.
// Recovery: A must acquire again to write again, with a larger token (3).
BOOST_AUTO_TEST_CASE(s06_stale_owner_write_after_new_token_is_refused_by_the_fence) {
  world w;
  BOOST_TEST(w.acquire("A", 10s) == 1u);
  lease_fsm a(lease_timing(10s, 3s, 1s), w.now, 1);
  BOOST_TEST(w.write(1, "A-1"));

  w.now = t0 + 10s;  // A is frozen; its lease expires on the server's clock
  BOOST_TEST(w.acquire("B", 10s) == 2u);
  EXPECT_OWNER(w, "B", 2u);
  BOOST_TEST(w.write(1, "A-2 (before B's first write)"));  // not yet fenced: 2 was never seen
  BOOST_TEST(w.write(2, "B-1"));
  BOOST_TEST(w.fence() == 2u);

  auto stale = w.store.put(resource, key, "A-3", baton::fence{1});
  BOOST_TEST(!stale.accepted);
  BOOST_TEST(stale.highest_token == 2u);
  BOOST_TEST(!w.write(1, "A-3 retried"));
  BOOST_TEST(w.write(2, "B-2"));
  BOOST_TEST(w.stored() == "B-2");
  EXPECT_OWNER(w, "B", 2u);

  // A wakes: its SDK declares the loss at once.
  BOOST_TEST((a.poll(w.now + 1s) == lease_fsm::action::declare_lost));
  BOOST_TEST(w.renew("A", 1, 10s) == "owner_mismatch");

  // Recovery: a new acquisition once B is done.
  BOOST_TEST((w.release("B", 2) == srv::release_outcome::released));
  BOOST_TEST(w.acquire("A", 10s) == 3u);
  BOOST_TEST(w.write(3, "A-4 with a new lease"));
  BOOST_TEST(!w.write(2, "B late"));
}

// (7) A stale owner releases or renews after a new token exists.
// A's lease (token 1) expired and B holds 2. A's renew is refused (owner_mismatch) and A's release is refused
// (not_owner): neither touches B's lease, and repeating them changes nothing. The same holds for a token the
// owner itself superseded: B re-acquires (a retry after a lost reply) and gets 3; B's renew and release with
// 2 are refused (token_mismatch, not_owner) and 3 stays current. A refused renew ends the stale lease in the
// SDK at once. Recovery: nothing to recover — the stale request is a no-op; the holder of the current token
// renews and releases normally.
BOOST_AUTO_TEST_CASE(s07_stale_owner_release_or_renew_after_new_token_changes_nothing) {
  world w;
  BOOST_TEST(w.acquire("A", 10s) == 1u);
  lease_fsm a(lease_timing(10s, 3s, 1s), w.now, 1);
  w.now = t0 + 10s;
  BOOST_TEST(w.acquire("B", 10s) == 2u);

  for (int i = 0; i < 2; ++i) {  // the second round is the retry
    BOOST_TEST(w.renew("A", 1, 10s) == "owner_mismatch");
    BOOST_TEST((w.release("A", 1) == srv::release_outcome::not_owner));
    EXPECT_OWNER(w, "B", 2u);
  }
  a.on_renew_refused("owner_mismatch");
  BOOST_TEST((a.state() == lease_state::lost));
  BOOST_TEST(w.write(2, "by B"));
  BOOST_TEST(!w.write(1, "by A"));

  // B's own superseded token.
  BOOST_TEST(w.acquire("B", 10s) == 3u);
  for (int i = 0; i < 2; ++i) {
    BOOST_TEST(w.renew("B", 2, 10s) == "token_mismatch");
    BOOST_TEST((w.release("B", 2) == srv::release_outcome::not_owner));
    EXPECT_OWNER(w, "B", 3u);
  }
  BOOST_TEST(w.write(3, "by B, token 3"));
  BOOST_TEST(!w.write(2, "by B, token 2"));
  BOOST_TEST(w.renew("B", 3, 10s) == "renewed");
  BOOST_TEST((w.release("B", 3) == srv::release_outcome::released));
  EXPECT_OWNER(w, "", 0u);
}

// (8) The lock service restarts.
// A holds token 1 with a 60 s TTL and writes; another key was acquired and released. batond is killed (-9)
// and started again on the same data directory. While it is down, A's renews fail without an answer; the SDK
// retries them with backoff, always before its deadline, and A stays the owner. After the restart A's lease
// is restored for its full TTL counted from the restart — longer than A itself still counts on — so nobody
// can take the key early: B is refused, A renews with 1. The acknowledged release is still a release. Every
// new token is larger than every token issued before the crash. Recovery: restart + replay of the log.
BOOST_AUTO_TEST_CASE(s08_lock_service_restart_restores_leases_and_never_reissues_a_token) {
  temp_dir dir;
  world w;
  const auto sent = std::chrono::steady_clock::now();
  auto server = std::make_unique<batond_process>(dir.path());
  {
    auto c = server->client();
    auto a = c.post("/v1/locks/report/acquire", acquire_body("A", 60000));
    BOOST_REQUIRE(a.status == 200);
    BOOST_TEST(token_of(a) == 1u);
    auto o = c.post("/v1/locks/other/acquire", acquire_body("O", 60000));
    BOOST_REQUIRE(o.status == 200);
    BOOST_TEST(c.post("/v1/locks/other/release", release_body("O", token_of(o))).status == 200);
  }
  lease_fsm a(lease_timing(60s, 20s, 6s), sent, 1);
  BOOST_TEST(w.write(1, "by A"));

  // A reaches the server through a proxy, whose port stays the test's own while batond is down.
  fault_proxy to_old(server->port());
  server->kill9();
  server.reset();
  // Down: a renew gets no answer. The SDK keeps the lease and retries before its deadline.
  BOOST_CHECK_THROW(http_client(to_old.port(), 5s).post("/v1/locks/report/renew", renew_body("A", 1, 60000)),
                    boost::system::system_error);
  const auto failed_at = std::chrono::steady_clock::now();
  a.on_renew_failed(failed_at);
  BOOST_TEST((a.state() == lease_state::active));
  BOOST_TEST((a.next_renew() < a.deadline()));

  batond_process restarted(dir.path());
  auto c = restarted.client();
  auto held = c.get("/v1/locks/report");
  BOOST_REQUIRE(held.status == 200);
  BOOST_TEST(field(held, "owner") == "A");
  BOOST_TEST(token_of(held) == 1u);
  // The server keeps it longer than A counts on it (A's deadline is measured before the server's remaining).
  const auto client_remaining =
      std::chrono::duration_cast<milliseconds>(a.deadline() - std::chrono::steady_clock::now()).count();
  BOOST_TEST(held.json.at("ttl_remaining_ms").as_int64() > client_remaining);

  auto b = c.post("/v1/locks/report/acquire", acquire_body("B", 60000));
  BOOST_TEST(b.status == 409);
  BOOST_TEST(token_of(b) == 1u);
  BOOST_TEST(c.post("/v1/locks/report/renew", renew_body("A", 1, 60000)).status == 200);
  BOOST_TEST(c.get("/v1/locks/other").status == 404);  // the acknowledged release survived the crash
  auto fresh = c.post("/v1/locks/fresh/acquire", acquire_body("F", 60000));
  BOOST_REQUIRE(fresh.status == 200);
  BOOST_TEST(token_of(fresh) > 2u);  // tokens 1 and 2 were issued before the crash
  BOOST_TEST(w.write(1, "by A after the restart"));
}

// (9) The token counter recovers from a failure.
// (a) A crash in the middle of a group commit leaves a torn record at the end of the log. Recovery cuts it
// off; the record was never acknowledged (answers wait for the fsync that covers them), but a damaged last
// batch reads the same, so the counter passes any token the cut bytes could have held rather than issue it
// again. Every acknowledged token stays below the next one; the
// held lease is restored with its token; the resource's fence (the largest acknowledged token) admits the
// next holder.
// (b) A real batond compacting every 4 KiB (snapshot + log) is killed with -9 while four clients acquire in
// a loop (each superseding its own lease, so every grant is a group-committed record). After the restart,
// for every key the held token is at least the last one acknowledged, no acknowledged grant was lost, and
// the next token is above every acknowledged one. Recovery: snapshot + log replay, counter = maximum seen.
BOOST_AUTO_TEST_CASE(s09_token_counter_recovers_from_torn_tail_and_from_kill9_during_group_commits) {
  namespace fs = std::filesystem;
  {
    temp_dir dir;
    world w;
    {
      srv::lock_table table;
      srv::journal j(srv::journal_options{dir.path()});
      j.open(table, t0);
      j.start();
      for (const char* owner : {"A", "B"}) {
        auto g = std::get<srv::acquire_granted>(table.acquire(key, owner, 10s, t0));
        j.append(srv::record_type::acquire, g.token, 10000, key, owner);
        if (std::string_view(owner) == "B") break;
        table.release(key, owner, g.token, t0);
        j.append(srv::record_type::release, g.token, 0, key);
      }
      j.stop();  // tokens 1 and 2 are durable, and therefore acknowledged
    }
    BOOST_TEST(w.write(2, "by B"));
    std::string torn;
    srv::encode_record(srv::wal_record{srv::record_type::acquire, 3, 10000, "other", "C"}, torn);
    {
      std::ofstream f(dir.path() / "wal-0000000000000000.log", std::ios::binary | std::ios::app);
      f.write(torn.data(), static_cast<std::streamsize>(torn.size() - 3));
    }
    srv::journal j(srv::journal_options{dir.path()});
    const time_point restart = t0 + 3600s;
    auto stats = j.open(w.table, restart);
    w.now = restart;
    BOOST_TEST(stats.torn_bytes == torn.size() - 3);
    // The counter passes every token the cut bytes could have held: a damaged last batch reads the same
    // as a torn one, so they may have been acknowledged.
    BOOST_TEST(stats.last_token > 3u);
    EXPECT_OWNER(w, "B", 2u);
    BOOST_TEST(w.acquire("C", 10s) == 0u);
    w.now = restart + 10s;
    const auto c_token = w.acquire("C", 10s);
    BOOST_TEST(c_token == stats.last_token + 1);
    BOOST_TEST(w.write(c_token, "by C"));
    BOOST_TEST(!w.write(2, "late B"));
  }

  temp_dir dir;
  constexpr int workers = 4;
  std::mutex mu;
  std::map<std::string, std::uint64_t> acknowledged;  // key -> last acknowledged token
  std::uint64_t max_acknowledged = 0;
  {
    batond_process server(dir.path(), {"--compact-bytes", "4096"});
    std::atomic<int> acks{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < workers; ++i)
      threads.emplace_back([&, i] {
        const std::string k = "k" + std::to_string(i);
        try {
          http_client c(server.port(), 10s);
          for (;;) {
            auto r = c.post("/v1/locks/" + k + "/acquire", acquire_body("w" + std::to_string(i), 600000));
            if (r.status != 200) continue;
            std::lock_guard lock(mu);
            acknowledged[k] = token_of(r);
            max_acknowledged = std::max(max_acknowledged, token_of(r));
            ++acks;
          }
        } catch (const std::exception&) {
          // the server was killed under us: that is the point
        }
      });
    // Crash once several compactions happened (each ~4 KiB is about a hundred records); bounded.
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (acks.load() < 400 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(5ms);
    server.kill9();
    for (auto& t : threads)
      t.join();
    BOOST_TEST(acks.load() >= 400);
  }
  BOOST_TEST(fs::exists(dir.path() / "snapshot"));

  batond_process server(dir.path());
  auto c = server.client();
  BOOST_TEST(acknowledged.size() == static_cast<std::size_t>(workers));
  for (const auto& [k, token] : acknowledged) {
    auto held = c.get("/v1/locks/" + k);
    BOOST_REQUIRE_MESSAGE(held.status == 200, k);
    // A grant after the last acknowledged one may have reached the disk without its answer: then it is the
    // one restored, with a larger token. Never a smaller one.
    BOOST_TEST(token_of(held) >= token);
    BOOST_TEST(field(held, "owner") == "w" + k.substr(1));
  }
  auto fresh = c.post("/v1/locks/fresh/acquire", acquire_body("F", 60000));
  BOOST_REQUIRE(fresh.status == 200);
  BOOST_TEST(token_of(fresh) > max_acknowledged);
  // A resource that saw the largest token acknowledged before the crash admits the first grant after the
  // restart (batond has one counter for all keys, so this holds whichever key guards the resource), and from
  // then on refuses the pre-crash token.
  world w;
  BOOST_TEST(w.write(max_acknowledged, "with the last pre-crash token"));
  BOOST_TEST(w.write(token_of(fresh), "with the first token after the restart"));
  BOOST_TEST(!w.write(max_acknowledged, "with the pre-crash token again"));
}

// (10) Requests arrive delayed and out of order.
// Every request carries the owner and token it is about, and the server checks them against the current
// state when the request arrives, so a delayed request can only act on the lease it names:
//  - a release of token 1 delayed past the TTL, arriving after B was granted 2: not_owner, B keeps the key;
//  - a renew of token 1 delayed past A's deadline: A's SDK declared the loss at its deadline; the server
//    refuses it; nothing is revived;
//  - two renews of one live lease whose answers come back in reverse order: the SDK's deadline only moves
//    forward (counted from each send time) and stays before the server's expiry;
//  - a copy of an old acquire, delivered after its lease was released: it grants a new token to an owner
//    string nobody is using. It costs liveness (the key is held one TTL), never safety: nobody writes with
//    that token, and the next grant after it is larger again. Delivered while its acquisition still holds
//    the key, the copy supersedes that lease: the holder's next renew is refused and its SDK stops;
//  - a write with 1 delayed past B's write with 2: refused.
// Recovery: nothing to repair; the TTL frees the ghost grant.
BOOST_AUTO_TEST_CASE(s10_delayed_and_out_of_order_requests_cannot_undo_newer_state) {
  world w;
  // A holds 1 (TTL 10 s, SDK margin 1 s); it renews at s1 = t0 + 3 s and, when that answer is late, again at
  // s2 = t0 + 4 s. The first is held up in the network: the server applies the second first, then the first.
  BOOST_TEST(w.acquire("A", 10s) == 1u);
  lease_fsm a(lease_timing(10s, 3s, 1s), w.now, 1);
  BOOST_TEST(w.write(1, "A-1"));
  const time_point s1 = t0 + 3s, s2 = t0 + 4s;
  w.now = s2 + 5ms;
  BOOST_TEST(w.renew("A", 1, 10s) == "renewed");
  w.now = s1 + 1500ms;  // the first renew arrives 1.5 s after it was sent
  BOOST_TEST(w.renew("A", 1, 10s) == "renewed");
  const time_point server_expiry = w.now + 10s;
  BOOST_TEST((a.on_renew_ok(s2, s2 + 10ms) == lease_fsm::renew_outcome::renewed));
  const time_point after_second = a.deadline();
  BOOST_TEST((after_second == s2 + 9s));
  BOOST_TEST((a.on_renew_ok(s1, s1 + 1600ms) == lease_fsm::renew_outcome::renewed));
  BOOST_TEST((a.deadline() == after_second));  // the older answer does not move it back
  BOOST_TEST((a.deadline() < server_expiry));
  EXPECT_OWNER(w, "A", 1u);

  // A's next renew, sent at t0 + 7 s, is held up in the network; nothing answers before A's deadline.
  const time_point delayed_renew_sent = t0 + 7s;
  BOOST_TEST((a.poll(delayed_renew_sent) == lease_fsm::action::renew));
  BOOST_TEST((a.poll(a.deadline()) == lease_fsm::action::declare_lost));
  w.now = server_expiry;  // the server expires it after A gave up
  EXPECT_OWNER(w, "", 0u);
  BOOST_TEST(w.acquire("B", 10s) == 2u);
  BOOST_TEST(w.write(2, "B-1"));

  // The delayed requests of A arrive now.
  BOOST_TEST(w.renew("A", 1, 10s) == "owner_mismatch");
  BOOST_TEST((w.release("A", 1) == srv::release_outcome::not_owner));
  BOOST_TEST(!w.write(1, "A-2, delayed"));
  EXPECT_OWNER(w, "B", 2u);
  BOOST_TEST(w.stored() == "B-1");

  // B releases; a duplicate of A's first acquire, delivered late, grants a ghost lease.
  BOOST_TEST((w.release("B", 2) == srv::release_outcome::released));
  BOOST_TEST(w.acquire("A", 10s) == 3u);
  EXPECT_OWNER(w, "A", 3u);
  BOOST_TEST(w.acquire("C", 10s) == 0u);  // held by the ghost for one TTL
  w.now += 10s;
  EXPECT_OWNER(w, "", 0u);
  BOOST_TEST(w.acquire("C", 10s) == 4u);
  BOOST_TEST(w.write(4, "C-1"));
  BOOST_TEST(!w.write(2, "B-3"));
  BOOST_TEST(!w.write(3, "ghost"));

  // A late copy of C's acquire arrives while C still holds 4: it supersedes C's lease with 5. C's next renew
  // is refused, its SDK stops, and the key is held by a lease nobody uses until its TTL ends.
  lease_fsm c(lease_timing(10s, 3s, 1s), w.now, 1);
  const time_point copy_arrives = w.now + 1s;
  w.now = copy_arrives;
  BOOST_TEST(w.acquire("C", 10s) == 5u);
  EXPECT_OWNER(w, "C", 5u);
  w.now = copy_arrives + 2s;
  BOOST_TEST(w.renew("C", 4, 10s) == "token_mismatch");
  c.on_renew_refused("token_mismatch");
  BOOST_TEST((c.state() == lease_state::lost));
  BOOST_TEST(w.acquire("D", 10s) == 0u);
  w.now = copy_arrives + 10s;
  BOOST_TEST(w.acquire("D", 10s) == 6u);
  BOOST_TEST(w.write(6, "D-1"));
  BOOST_TEST(!w.write(4, "C late"));
}
