// SPDX-License-Identifier: Apache-2.0
// Every public operation, spelled as a user writes it: default arguments left out, `{}`,
// designated-initializer temporaries, long keys, owners and values, all inside co_await expressions. GCC 12
// (Debian 12's compiler) copies an aggregate temporary of a co_await expression byte for byte and destroys
// both copies; under AddressSanitizer any spelling that lets it hurt a member with a destructor aborts the
// program (docs/design.md, "Arguments that GCC 12's coroutines cannot hurt").
//
// Built twice: in the project's tree (test_sdk_spellings, run under the sanitizers by tests/run.sh), and by
// tests/package/run.sh against the installed SDK with -fsanitize=address,undefined. Exits 1 on a wrong
// result.
#include "baton/client.hpp"
#include "baton/election.hpp"
#include "baton/semaphore.hpp"
#include "baton/testing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <exception>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "spellings: FAILED: %s\n", what);
    ++failures;
  }
}

asio::awaitable<int> job(std::uint64_t token) {
  co_return token > 0 ? 1 : 0;
}

asio::awaitable<void> every_spelling(baton::client& c) {
  const std::string long_key(500, 'k');
  const std::string long_owner(250, 'o');
  const std::string long_value(1000, 'v');

  {  // acquire: no options, {}, designated temporaries, a wait timeout
    baton::lease a = co_await c.async_acquire("spell/a");
    check(a.active(), "acquire(key)");
    co_await a.async_release();
    baton::lease b = co_await c.async_acquire("spell/b", {});
    check(b.active(), "acquire(key, {})");
    co_await b.async_release();
    baton::lease d = co_await c.async_acquire("spell/d", {.ttl = 5s});
    check(d.active(), "acquire(key, {.ttl = 5s})");
    co_await d.async_release();
    baton::lease e =
        co_await c.async_acquire("spell/e", baton::lease_options{.ttl = 5s, .owner = long_owner});
    check(e.owner() == long_owner, "acquire(key, lease_options{.ttl, .owner})");
    co_await e.async_release();
    baton::lease f = co_await c.async_acquire(long_key, {.ttl = 5s, .value = long_value}, 1s);
    check(f.key() == long_key && f.value() == long_value, "acquire(long key, {.value}, wait_timeout)");
    co_await f.async_release();
    baton::lease g = co_await c.async_acquire(
        std::string(400, 'g'), {.ttl = 5s, .owner = std::string(200, 'w'), .value = std::string(900, 'x')});
    check(g.owner() == std::string(200, 'w') && g.value() == std::string(900, 'x'),
          "acquire(temporary strings in the options)");
    co_await g.async_release();
  }
  {  // try_acquire, get, the completion-token form
    auto r = co_await c.async_try_acquire("spell/t");
    check(r.acquired.has_value(), "try_acquire(key)");
    auto held = co_await c.async_try_acquire("spell/t", {.ttl = 5s, .owner = "someone-else"});
    check(!held.acquired && held.holder.token == r.acquired->token(),
          "try_acquire(key, {.owner}) while held");
    auto h = co_await c.async_get("spell/t");
    check(h.has_value() && h->token == r.acquired->token(), "get(key)");
    co_await r.acquired->async_release();
    baton::lease l = co_await c.async_acquire("spell/async", {.ttl = 5s}, asio::use_awaitable);
    check(l.active(), "async_acquire(key, {.ttl}, use_awaitable)");
    baton::lease b = co_await c.async_acquire("spell/async-bounded", {}, 1s, asio::use_awaitable);
    check(b.active(), "async_acquire(key, {}, wait_timeout, use_awaitable)");
    co_await b.async_release();
    check(co_await baton::with_lease(l, job(l.token())) == 1, "with_lease(l, job(token))");
    co_await l.async_release();
  }
  {  // list and break: temporary prefixes and keys, the shorter overloads
    baton::lease l = co_await c.async_acquire(long_key + "/listed", {.ttl = 5s});
    auto page = co_await c.async_list(long_key + "/");
    check(page.locks.size() == 1 && page.locks[0].holder.token == l.token(), "async_list(temporary prefix)");
    page = co_await c.async_list(std::string(long_key) + "/", std::string(), 1);
    check(page.locks.size() == 1 && page.next.empty(), "async_list(prefix, after, limit)");
    auto broken = co_await c.async_break(long_key + "/listed", l.token());
    check(broken.token == l.token(), "async_break(temporary key, token)");
    auto [ec, none] = co_await c.async_break(long_key + "/listed", asio::as_tuple(asio::use_awaitable));
    check(ec == baton::error::not_held, "async_break(key, as_tuple) of a free key");
  }
  {  // with_lock: by-reference captures as a temporary, a named lambda that owns a string
    int runs = 0;
    int got =
        co_await c.async_with_lock("spell/w", {.ttl = 5s}, [&](baton::lease& l) -> asio::awaitable<int> {
          ++runs;
          co_return l.active() ? 7 : 0;
        });
    check(got == 7 && runs == 1, "with_lock(key, {.ttl}, [&] temporary)");
    got = co_await c.async_with_lock("spell/w", {.ttl = 5s}, 1s,
                                     [&](baton::lease&) -> asio::awaitable<int> { co_return 8; });
    check(got == 8, "with_lock(key, {.ttl}, wait_timeout, [&] temporary)");
    const std::string tag(100, 't');
    auto named = [tag](baton::lease& l) -> asio::awaitable<std::string> {
      co_return tag + std::to_string(l.token() > 0);
    };
    check(co_await c.async_with_lock("spell/w", {}, named) == tag + "1",
          "with_lock(key, {}, named owning lambda)");
  }
  {  // semaphore: acquire with no options, {}, designated temporaries, a wait timeout, with_permit
    baton::semaphore pool(c, long_key + "/pool", 2);
    baton::lease a = co_await pool.async_acquire();
    baton::lease b = co_await pool.async_acquire({.ttl = 5s, .owner = long_owner}, 1s);
    check(a.slot() == 0 && b.slot() == 1 && b.permits() == 2, "semaphore acquire(), ({.ttl, .owner}, 1s)");
    baton::acquire_result full = co_await pool.async_try_acquire({});
    check(!full.acquired && full.holders.size() == 2, "semaphore try_acquire({}) when full");
    co_await b.async_release();
    int got = co_await pool.async_with_permit({.ttl = 5s}, [&](baton::lease& l) -> asio::awaitable<int> {
      co_return static_cast<int>(l.fence().slot) + 10;
    });
    check(got == 11, "semaphore with_permit({.ttl}, [&] temporary)");
    // A semaphore made in the co_await expression itself (a temporary with a constructor, and a string).
    baton::acquire_result again =
        co_await baton::semaphore(c, long_key + "/pool", 2).async_try_acquire({.ttl = 5s});
    check(again.acquired && again.acquired->slot() == 1,
          "baton::semaphore(c, key, n).async_try_acquire({.ttl})");
    co_await again.acquired->async_release();
    co_await a.async_release();
  }
  {  // election: campaign with and without options, leader, resign
    baton::election e(c, "spell/leader");
    baton::lease l = co_await e.async_campaign("addr-1");
    auto who = co_await e.async_leader();
    check(who && who->value == "addr-1" && who->token == l.token(), "campaign(value), leader()");
    co_await e.async_resign();
    baton::lease m = co_await e.async_campaign(long_value, {.ttl = 5s});
    check(m.value() == long_value, "campaign(long value, {.ttl})");
    co_await e.async_proclaim(std::string(800, 'p'));
    check(m.value() == std::string(800, 'p') && m.active(), "async_proclaim(long value)");
    check(co_await m.async_write_record(std::string(20'000, 'r')) == 1, "async_write_record(long temporary)");
    auto record = co_await c.async_read_record(long_key + "-no-record");
    check(!record.has_value(), "async_read_record(temporary key) of none");
    record = co_await c.async_read_record("spell/leader");
    check(record && record->value.size() == 20'000 && record->token == m.token(), "async_read_record(key)");
    baton::leader_stream leaders = e.observe();
    auto now = co_await leaders.async_next();
    check(now && now->token == m.token(), "observe().async_next()");
    co_await e.async_resign();
    check(!(co_await leaders.async_next()).has_value(), "observe().async_next() after resign");
  }
  {  // the server's message with any token: with_diagnostics(token) and with_diagnostics(diag, token)
    auto [e, l] = co_await c.async_acquire("spell/bad", {.owner = std::string(300, 'o')},
                                           baton::with_diagnostics(asio::as_tuple(asio::use_awaitable)));
    bool named = false;
    try {
      if (e) std::rethrow_exception(e);
    } catch (const baton::exception& x) {
      named = x.diagnostic().find("owner") != std::string::npos;
    }
    check(e && named && !l, "with_diagnostics(as_tuple(use_awaitable)): the exception, naming the field");
    baton::diagnostics diag;
    auto [ec, r] = co_await c.async_try_acquire(
        "spell/bad", {.ttl = 0s}, baton::with_diagnostics(diag, asio::as_tuple(asio::use_awaitable)));
    check(ec == baton::error::invalid_config && !diag.message().empty(),
          "with_diagnostics(diag, as_tuple(use_awaitable)): the code, and the message in diag");
    auto [ec2] = co_await c.async_shutdown(asio::as_tuple(asio::use_awaitable));
    check(!ec2, "async_shutdown(as_tuple(use_awaitable))");
    auto refused = co_await c.async_acquire("spell/after", asio::as_tuple(asio::use_awaitable));
    check(std::get<0>(refused) == baton::error::shut_down, "async_acquire(key, token) after shutdown");
  }
  {  // a bad option in a braced temporary: a clear error, nothing sent
    try {
      co_await c.async_acquire("spell/bad", {.owner = std::string(300, 'o')});
      check(false, "an owner of 300 bytes is refused");
    } catch (const baton::exception& e) {
      check(e.code() == baton::error::invalid_config &&
                std::string(e.what()).find("owner must be at most 256 bytes (got 300)") != std::string::npos,
            "an owner of 300 bytes is refused, naming the field and the length");
    }
  }
}

}  // namespace

int main() {
  asio::io_context ioc;
  auto server = std::make_shared<baton::testing::memory_backend>(ioc.get_executor());
  baton::client c(ioc.get_executor(), {.identity = "spellings"}, server);
  std::exception_ptr failure;
  asio::co_spawn(ioc, every_spelling(c), [&](std::exception_ptr e) { failure = e; });
  ioc.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "spellings: FAILED: %s\n", e.what());
      return 1;
    }
  }
  if (failures > 0) return 1;
  std::puts("spellings: every spelling ran");
  return 0;
}
