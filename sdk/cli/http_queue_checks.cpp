// SPDX-License-Identifier: Apache-2.0
// `baton conformance` over HTTP: queued acquire (docs/protocol.md, "queued acquire"), run when the server
// advertises acquire_queue. Each waiter waits on a connection and a thread of its own. One joins the queue
// only once the one before it is in (its request written, a moment for the server to take it in, and a GET
// showing the key unchanged), so the arrival order the checks judge is the order they made.

#include "http_checks.hpp"

#include <atomic>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

namespace baton::cli::http_conformance {
namespace {

constexpr std::int64_t queue_wait_ms = 5'000;  // what a failing check waits out at most
constexpr auto queue_bound = milliseconds(queue_wait_ms) + wake_give_up;
constexpr auto queue_settle = 50ms;  // from a waiter's request written to the next step
// How long a second waiter must stay unanswered after the first was granted the lock.
constexpr auto still_waiting = 300ms;

struct waiter {
  std::string owner;
  std::shared_ptr<connection> conn;
  std::future<reply> answer;
  std::optional<reply> got;  // its answer, once taken
};

// Sends `owner`'s queued acquire for `key`, which `held` (an acquire's 200) holds, and returns once it waits
// there; fails when it was answered instead.
waiter join_queue(const suite& s, connection& c, const std::string& key, const std::string& owner,
                  const reply& held, std::int64_t ttl_ms = 30'000) {
  waiter w{owner, std::make_shared<connection>(s.address()), {}, {}};
  auto h = w.conn->request(http::verb::get, "/healthz", {}, s.timeout());
  expect(h.status == 200, "GET /healthz before " + owner + " joins the queue: " + h.describe());
  auto written = std::make_shared<std::atomic<bool>>(false);
  w.answer = std::async(std::launch::async, [&s, conn = w.conn, key, owner, ttl_ms, written] {
    return s.acquire_queued(*conn, key, owner, ttl_ms, queue_wait_ms, queue_bound,
                            [written] { *written = true; });
  });
  while (!*written && w.answer.wait_for(1ms) != std::future_status::ready) {
  }
  std::this_thread::sleep_for(queue_settle);
  if (w.answer.wait_for(0s) == std::future_status::ready) {
    auto r = w.answer.get();
    throw check_failed("a queued acquire (wait_ms=" + std::to_string(queue_wait_ms) + ") by " + owner +
                       " of a key " + held.str("owner") +
                       " holds was answered instead of waiting: " + r.describe());
  }
  auto g = s.get(c, key);
  expect(g.status == 200 && g.num("token") == held.num("token"),
         "while " + owner + " waits in the queue, GET should name " + held.str("owner") + " with token " +
             std::to_string(held.token()) + ": " + g.describe());
  return w;
}

// Waiters joining the queue of `key`, which `held` holds, in this order.
std::vector<waiter> queue_up(const suite& s, connection& c, const std::string& key, const reply& held,
                             std::initializer_list<const char*> owners, std::int64_t ttl_ms = 30'000) {
  std::vector<waiter> ws;
  for (const auto* owner : owners)
    ws.push_back(join_queue(s, c, key, owner, held, ttl_ms));
  return ws;
}

// A release that must be answered 200.
void must_release(const suite& s, connection& c, const std::string& key, const std::string& owner,
                  std::int64_t token) {
  auto r = s.release(c, key, owner, token);
  expect(r.status == 200, owner + "'s release: expected 200, got " + r.describe());
}

// The waiters answered within `bound` (none when none was): once one is, those answered beside it too.
std::vector<waiter*> answered(std::span<waiter> ws, steady::duration bound) {
  const auto until = steady::now() + bound;
  for (;;) {
    std::vector<waiter*> out;
    for (auto& w : ws)
      if (!w.got && w.answer.valid() && w.answer.wait_for(0s) == std::future_status::ready) {
        w.got = w.answer.get();
        out.push_back(&w);
      }
    if (!out.empty() || steady::now() >= until) return out;
    std::this_thread::sleep_for(2ms);
  }
}

// The one waiter answered next; fails when several are at one hand-off (one is woken, the others wait).
waiter& answered_next(std::span<waiter> ws, const std::string& after) {
  auto out = answered(ws, queue_bound);
  expect(!out.empty(), "no waiter was answered within " + ms(queue_bound) + " after " + after);
  if (out.size() > 1) {
    std::string who;
    for (auto* w : out)
      who += (who.empty() ? "" : "; ") + w->owner + ": " + w->got->describe();
    throw check_failed(std::to_string(out.size()) + " waiters were answered after " + after +
                       " (one is granted the lock, the others keep waiting): " + who);
  }
  return *out.front();
}

// A waiter's grant: 200 as an acquire's, with an integer queued_ms within the time its request was out.
std::int64_t granted(const waiter& w, const std::string& after) {
  const auto& r = *w.got;
  expect(
      r.status == 200 && r.num("token").value_or(0) >= 1,
      w.owner + "'s queued acquire after " + after + ": expected 200 granting the lock, got " + r.describe());
  const auto queued = r.num("queued_ms");
  expect(queued.has_value(), w.owner + "'s grant has no integer queued_ms: " + r.describe());
  const auto out_for = std::chrono::ceil<milliseconds>(r.received - r.sent).count();
  expect(*queued >= 0 && *queued <= out_for, w.owner + "'s grant says queued_ms " + std::to_string(*queued) +
                                                 ", but its request was out for " + std::to_string(out_for) +
                                                 " ms: " + r.describe());
  return r.token();
}

void queue_order(const suite& s) {
  s.require_feature("acquire_queue");
  auto c = s.open();
  const auto key = s.key("queue-order");
  // A free key nobody waits for: an acquire, answered at once.
  auto held = s.acquire_queued(c, key, "holder", 30'000, queue_wait_ms, s.timeout());
  expect(held.status == 200 && held.num("queued_ms") == 0 && held.num("token").value_or(0) >= 1,
         "a queued acquire of a free key: expected 200 at once with queued_ms 0, got " + held.describe());
  auto ws = queue_up(s, c, key, held, {"waiter-1", "waiter-2", "waiter-3"});
  must_release(s, c, key, "holder", held.token());
  std::string order, after = "the holder's release";
  auto last = held.token();
  for (std::size_t i = 0; i < ws.size(); ++i) {
    auto& w = answered_next(ws, after);
    const auto token = granted(w, after);
    expect(token > last, w.owner + " was granted token " + std::to_string(token) + ", not larger than " +
                             std::to_string(last) + " before it");
    last = token;
    order += (order.empty() ? "" : ", ") + w.owner;
    after = w.owner + "'s release";
    must_release(s, c, key, w.owner, token);
  }
  expect(order == "waiter-1, waiter-2, waiter-3", "the lock went to " + order +
                                                      ", in that order; they joined the queue as waiter-1, "
                                                      "waiter-2, waiter-3 (first come, first served)");
}

void queue_one_answer_per_hand_off(const suite& s) {
  s.require_feature("acquire_queue");
  auto c = s.open();
  const auto key = s.key("queue-hand-off");
  auto held = s.must_acquire(c, key, "holder", 30'000);
  auto ws = queue_up(s, c, key, held, {"waiter-1", "waiter-2"});
  must_release(s, c, key, "holder", held.token());
  auto& first = answered_next(ws, "the holder's release");
  const auto token = granted(first, "the holder's release");
  auto& other = &first == &ws[0] ? ws[1] : ws[0];
  if (other.answer.wait_until(first.got->received + still_waiting) == std::future_status::ready) {
    auto r = other.answer.get();
    s.release(c, key, first.owner, token);
    throw check_failed(other.owner + " was answered " + ms(r.received - first.got->received) + " after " +
                       first.owner +
                       " was granted the lock, which it still held (one waiter is answered "
                       "per hand-off; the others keep waiting): " +
                       r.describe());
  }
  must_release(s, c, key, first.owner, token);
  const auto after = first.owner + "'s release";
  auto& second = answered_next(ws, after);
  const auto next = granted(second, after);
  s.release(c, key, second.owner, next);
  expect(next > token, second.owner + " was granted token " + std::to_string(next) + ", not larger than " +
                           std::to_string(token) + " before it");
}

// The queue's head takes the key in the step that frees it: a plain acquire sent at once after a release, or
// after the expiry of the lease the head then got, finds it held by the next waiter.
void queue_plain_acquire_waits_its_turn(const suite& s) {
  s.require_feature("acquire_queue");
  constexpr std::int64_t ttl = 500;
  auto c = s.open();
  const auto key = s.key("queue-no-jump");
  auto held = s.must_acquire(c, key, "holder", 30'000);
  auto ws = queue_up(s, c, key, held, {"waiter-1"}, ttl);
  ws.reserve(2);  // waiter-2 joins while `first` refers to waiter-1
  must_release(s, c, key, "holder", held.token());
  auto plain = s.acquire(c, key, "plain", 30'000);
  if (plain.status == 200) s.release(c, key, "plain", plain.token());  // then the waiter gets it
  suite::expect_error(plain, 409, "held", "a plain acquire sent once the holder's release was answered");
  auto& first = answered_next(ws, "the holder's release");
  const auto token = granted(first, "the holder's release");
  expect(plain.str("owner") == "waiter-1" && plain.num("token") == token,
         "a plain acquire sent once the holder's release was answered should be refused naming waiter-1, "
         "which the release handed the lock to with token " +
             std::to_string(token) + ": " + plain.describe());
  ws.push_back(join_queue(s, c, key, "waiter-2", *first.got));
  // The lease's TTL runs from the grant, which came before its answer.
  std::this_thread::sleep_until(first.got->received + milliseconds(ttl) + 5ms);
  auto late = s.acquire(c, key, "plain", 30'000);
  if (late.status == 200) s.release(c, key, "plain", late.token());
  suite::expect_error(late, 409, "held", "a plain acquire sent after waiter-1's lease had expired");
  auto& second = answered_next(ws, "the expiry of waiter-1's " + std::to_string(ttl) + " ms lease");
  const auto next = granted(second, "the expiry of waiter-1's lease");
  s.release(c, key, "waiter-2", next);
  expect(late.str("owner") == "waiter-2" && late.num("token") == next,
         "a plain acquire sent after waiter-1's " + std::to_string(ttl) +
             " ms lease had expired should be refused naming waiter-2, which the expiry handed the lock to "
             "with token " +
             std::to_string(next) + ": " + late.describe());
}

// A waiter whose client goes away leaves the queue: the next one gets the lock, and the one that left holds
// it at no time after (a server may grant it and give the grant back at once, never keep it).
void queue_closed_waiter_skipped(const suite& s) {
  s.require_feature("acquire_queue");
  auto c = s.open();
  const auto key = s.key("queue-closed");
  auto held = s.must_acquire(c, key, "holder", 30'000);
  auto ws = queue_up(s, c, key, held, {"departed", "next"});
  ws[0].conn->abandon();
  auto gone = ws[0].answer.get();
  ws[0].got = gone;
  expect(gone.status == 0,
         "departed's queued acquire was answered while the key was still held: " + gone.describe());
  std::this_thread::sleep_for(100ms);  // for the server to see the connection closed
  must_release(s, c, key, "holder", held.token());
  auto& next = answered_next(ws, "the holder's release");
  const auto token = granted(next, "the holder's release (departed, ahead of it, had closed its connection)");
  auto g = s.get(c, key);
  expect(g.status == 200 && g.str("owner") == "next" && g.num("token") == token,
         "GET after next was granted the lock should name next with token " + std::to_string(token) + ": " +
             g.describe());
  must_release(s, c, key, "next", token);
  auto after = s.get(c, key);
  suite::expect_error(
      after, 404, "not_held",
      "GET after next released the lock (nothing may be granted to departed, whose connection "
      "closed while it waited)");
}

// The wait passing is a refused acquire: 409 held naming the holder, no sooner than wait_ms, and the place
// is not kept.
void queue_wait_passes(const suite& s) {
  s.require_feature("acquire_queue");
  constexpr std::int64_t wait = 300;
  auto c = s.open();
  const auto key = s.key("queue-wait");
  auto held = s.must_acquire(c, key, "holder", 30'000);
  auto wc = s.open();
  auto r = s.acquire_queued(wc, key, "impatient", 30'000, wait, milliseconds(wait * 5));
  auto g = s.get(c, key);
  auto rel = s.release(c, key, "holder", held.token());
  auto after = s.get(c, key);
  const auto what = "a queued acquire with wait_ms=" + std::to_string(wait) + " of a key held throughout";
  expect(r.status != 0, what + " was not answered within " + ms(milliseconds(wait * 5)) +
                            " (5 times its wait): " + r.describe());
  suite::expect_error(r, 409, "held", what);
  expect(r.str("owner") == "holder" && r.num("token") == held.num("token"),
         what + ": the refusal does not name the holder with token " + std::to_string(held.token()) + ": " +
             r.describe());
  expect(r.received - r.sent >= milliseconds(wait) - expiry_tolerance,
         what + " was answered after " + ms(r.received - r.sent) + ", before its wait had passed");
  expect(g.status == 200 && g.num("token") == held.num("token"),
         "GET after the refusal should still name the holder: " + g.describe());
  expect(rel.status == 200, "the holder's release: expected 200, got " + rel.describe());
  suite::expect_error(after, 404, "not_held",
                      "GET after the holder's release (a request whose wait passed keeps no place)");
}

constexpr const char* no_queue =
    "these checks read the HTTP queued acquire's requests; on etcd the SDK waits in etcd's own Mutex line";

constexpr check group[] = {
    {"queued acquire: waiters are granted the lock in arrival order", queue_order, no_queue},
    {"queued acquire: one waiter is answered per hand-off", queue_one_answer_per_hand_off, no_queue},
    {"queued acquire: a plain acquire does not jump the queue", queue_plain_acquire_waits_its_turn, no_queue},
    {"queued acquire: a waiter whose connection closes is skipped", queue_closed_waiter_skipped, no_queue},
    {"queued acquire: the wait passing is answered 409 held", queue_wait_passes, no_queue},
};

}  // namespace

std::span<const check> queue_checks() {
  return group;
}

}  // namespace baton::cli::http_conformance
