// SPDX-License-Identifier: Apache-2.0
// `baton conformance` over HTTP, restart mode: leaves leases, a release, a batch raise, a proclaimed value
// and a record behind, runs --restart-command, and checks that the server came back with all of them and
// with tokens larger than any before.

#include "http_checks.hpp"

#include <thread>

namespace baton::cli::http_conformance {
namespace {

constexpr auto restart_close_bound = 5s;  // for the old server's connections to close after the command

}  // namespace

// Leaves a lease held and a lock released, restarts the server with the command, and waits for it to answer.
restart_state restart_server(const suite& s) {
  restart_state st;
  try {
    auto c = s.open();
    st.held_key = s.key("restart-held");
    st.held_owner = "survivor";
    // Long enough to outlast the command and the wait for the server's return (a restart restores it with its
    // full TTL, docs/protocol.md, Restart).
    st.held_token = s.must_acquire(c, st.held_key, st.held_owner, 300'000).token();
    st.released_key = s.key("restart-released");
    auto r = s.must_acquire(c, st.released_key, "leaver", 300'000);
    auto rel = s.release(c, st.released_key, "leaver", r.token());
    expect(rel.status == 200, "release before the restart: expected 200, got " + rel.describe());
    // An idle connection from before: a server that really went down closed it.
    auto witness = s.open();
    auto h = witness.request(http::verb::get, "/healthz", {}, s.timeout());
    expect(h.status == 200, "GET /healthz before the restart: " + h.describe());
    if (s.has_feature("renew_batch")) {
      // A 2 s lease raised to 300 s by a batch: restored with 2 s if the raise was not durable.
      suite::batch_raise b{s.key("restart-batch"), "batch-survivor", 0, {}};
      b.token = s.must_acquire(c, b.key, b.owner, 2'000).token();
      auto r = s.renew_batch(c, {{b.key, b.owner, b.token, 300'000}});
      try {
        auto one = result_reply(batch_results(r, 1, "batch renewal before the restart")[0]);
        expect(one.status == 200, "batch renewal before the restart: " + one.describe());
      } catch (const check_failed& e) {
        b.error = e.what();
      }
      s.batch_raised = std::move(b);
    }
    if (s.has_feature("proclaim")) {
      st.proclaimed_value = "proclaimed-before-restart:80";
      auto p = s.proclaim(c, st.held_key, st.held_owner, st.held_token, *st.proclaimed_value);
      expect(p.status == 200, "proclaim before the restart: expected 200, got " + p.describe());
    }
    if (s.has_feature("lock_record")) {
      st.record_value = "recorded-before-restart";
      written(s.write_record(c, st.held_key, st.held_owner, st.held_token, *st.record_value), st.held_token,
              1, "a record write before the restart");
    }
    st.max_token_before = s.max_token();
    if (auto failed = run_restart_command(*s.restart_command())) throw check_failed(*failed);
    // A signal sent by CMD may land a moment after CMD returned.
    for (const auto until = steady::now() + restart_close_bound;;) {
      if (witness.request(http::verb::get, "/healthz", {}, 2s).status == 0) break;
      expect(steady::now() < until,
             "the server was not restarted: a connection opened before --restart-command "
             "still answers " +
                 std::to_string(restart_close_bound / 1s) + " s after it");
      std::this_thread::sleep_for(100ms);
    }
    const auto until = steady::now() + restart_return_bound;
    for (auto probe = s.open();;) {
      auto back = probe.request(http::verb::get, "/healthz", {}, 1s);
      if (back.status == 200) break;
      expect(steady::now() < until, "the server did not answer GET /healthz within " +
                                        std::to_string(restart_return_bound / 1s) +
                                        " s after --restart-command: " + back.describe());
      std::this_thread::sleep_for(50ms);
    }
  } catch (const std::exception& e) {
    st.error = std::string("restart: ") + e.what();
  }
  return st;
}

namespace {

void restart_keeps_held_lease(const suite& s) {
  const auto& st = s.restarted();
  auto c = s.open();
  auto g = s.get(c, st.held_key);
  expect(g.status == 200 && g.str("owner") == st.held_owner && g.num("token") == st.held_token,
         "a lease held by " + st.held_owner + " with token " + std::to_string(st.held_token) +
             " before the restart: GET after it says " + g.describe());
  auto r = s.renew(c, st.held_key, st.held_owner, st.held_token, 300'000);
  expect(r.status == 200, "renew of that lease after the restart: expected 200, got " + r.describe());
}

void restart_keeps_proclaim(const suite& s) {
  const auto& st = s.restarted();
  s.require_feature("proclaim");
  expect(st.proclaimed_value.has_value(),
         "no value was proclaimed before the restart (GET /v1/capabilities did not name proclaim then)");
  auto c = s.open();
  auto g = s.get(c, st.held_key);
  expect(g.status == 200 && g.num("token") == st.held_token && g.str("value") == *st.proclaimed_value,
         "a value proclaimed before the restart (\"" + *st.proclaimed_value + "\", token " +
             std::to_string(st.held_token) + "): GET after it says " + g.describe());
}

void restart_keeps_record(const suite& s) {
  const auto& st = s.restarted();
  s.require_feature("lock_record");
  expect(st.record_value.has_value(),
         "no record was written before the restart (GET /v1/capabilities did not name lock_record then)");
  auto c = s.open();
  record_is(s.read_record(c, st.held_key), *st.record_value, st.held_token, 1, st.held_owner,
            "a record written before the restart, read after it");
}

void restart_keeps_batch_raise(const suite& s) {
  s.restarted();
  s.require_feature("renew_batch");
  expect(s.batch_raised.has_value(), "no lease was batch-renewed before the restart");
  const auto& b = *s.batch_raised;
  expect(b.error.empty(), b.error);
  auto c = s.open();
  auto g = s.get(c, b.key);
  s.release(c, b.key, b.owner, b.token);
  expect(g.status == 200 && g.num("token") == b.token && g.num("ttl_remaining_ms").value_or(0) > 60'000,
         "a 2 s lease a batch renewed for 300 s before the restart should be held with most of the 300 s "
         "after it (a server that answered before storing the raise restores 2 s): " +
             g.describe());
}

void restart_keeps_release(const suite& s) {
  const auto& st = s.restarted();
  auto c = s.open();
  suite::expect_error(s.get(c, st.released_key), 404, "not_held",
                      "GET after the restart of a lock released before it");
}

void restart_tokens_increase(const suite& s) {
  const auto& st = s.restarted();
  auto c = s.open();
  const auto before = std::to_string(st.max_token_before);
  auto fresh = s.must_acquire(c, s.key("restart-fresh"), "newcomer", 30'000);
  auto freed = s.must_acquire(c, st.released_key, "newcomer", 30'000);
  auto again = s.must_acquire(c, st.held_key, st.held_owner, 30'000);
  s.release(c, s.key("restart-fresh"), "newcomer", fresh.token());
  s.release(c, st.released_key, "newcomer", freed.token());
  s.release(c, st.held_key, st.held_owner, again.token());
  expect(fresh.token() > st.max_token_before, "an acquire of a new key after the restart got token " +
                                                  std::to_string(fresh.token()) + ", not larger than " +
                                                  before + " (issued before it)");
  expect(freed.token() > st.max_token_before,
         "an acquire of the lock released before the restart got token " + std::to_string(freed.token()) +
             ", not larger than " + before);
  expect(again.token() > st.max_token_before, "the holder's re-acquire after the restart got token " +
                                                  std::to_string(again.token()) + ", not larger than " +
                                                  before);
}

// Run after every other check, so that "every token before" covers the whole run.
constexpr check after_restart[] = {
    {check_name::restart_keeps_held_lease, restart_keeps_held_lease},
    {check_name::restart_keeps_release, restart_keeps_release},
    {"restart: a TTL raised by a batch renewal is kept", restart_keeps_batch_raise},
    {check_name::restart_keeps_proclaim, restart_keeps_proclaim},
    {check_name::restart_keeps_record, restart_keeps_record},
    {check_name::restart_tokens_increase, restart_tokens_increase},
};

}  // namespace

std::span<const check> restart_checks() {
  return after_restart;
}

}  // namespace baton::cli::http_conformance
