// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE lock_service
#include <boost/test/unit_test.hpp>

// The lock service over a real journal whose writer has not started yet: nothing appended becomes durable
// until the test starts it. That is a stalled disk with no timing involved, so "not answered" is exact.

#include "journal.hpp"
#include "lock_service.hpp"
#include "temp_dir.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <filesystem>
#include <list>
#include <optional>
#include <thread>

using namespace baton::server;
using baton::test::temp_dir;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

// Starts `op` on the io_context and keeps its result once it completes.
template <class T>
struct pending {
  std::optional<T> result;
  std::exception_ptr error;
  bool done = false;
};

template <class T>
std::shared_ptr<pending<T>> start(asio::io_context& ioc, asio::awaitable<T> op) {
  auto p = std::make_shared<pending<T>>();
  asio::co_spawn(ioc, std::move(op), [p](std::exception_ptr e, T v) {
    p->done = true;
    p->error = e;
    if (!e) p->result = std::move(v);
  });
  return p;
}

// Runs ready handlers (and whatever completes within `d`).
void settle(asio::io_context& ioc, std::chrono::milliseconds d = 100ms) {
  ioc.restart();
  ioc.run_for(d);
}

template <class T>
void wait_done(asio::io_context& ioc, const std::shared_ptr<pending<T>>& p) {
  for (int i = 0; i < 500 && !p->done; ++i)
    settle(ioc, 20ms);  // bounded: 10 s
  BOOST_REQUIRE(p->done);
}

struct fixture {
  temp_dir dir;
  server_metrics metrics;
  journal log{journal_options{dir.path()}, &metrics};
  lock_service service{log, metrics};
  asio::io_context ioc;

  // A lease already durable (as after a restart): `a` holds k with token 1 for 1 s.
  fixture() {
    log.open(service.table(), clock::now());
    service.table().restore("k", "a", 1, 1000ms, clock::now());
  }
};

}  // namespace

// Defect: renew R1 raised the TTL and waits for its extend record; its retry R2 with the same TTL saw no
// increase and was answered at once. A crash then restored the lease with the old, short TTL while its
// holder had been told 60 s.
BOOST_FIXTURE_TEST_CASE(a_same_ttl_retry_waits_for_the_earlier_renews_extend_record, fixture) {
  auto r1 = start(ioc, service.renew("k", "a", 1, 60'000ms));
  settle(ioc);
  BOOST_TEST(!r1->done);
  auto r2 = start(ioc, service.renew("k", "a", 1, 60'000ms));
  settle(ioc);
  BOOST_TEST(!r2->done);  // answering now would report a state a crash could roll back

  log.start();
  wait_done(ioc, r1);
  wait_done(ioc, r2);
  BOOST_TEST(std::holds_alternative<renew_ok>(*r2->result));
  BOOST_TEST(log.durable() >= 1u);
}

// With nothing about the lease pending, a renew that does not raise the TTL is answered from memory, even
// while the disk is stalled for another key.
BOOST_FIXTURE_TEST_CASE(a_renew_with_nothing_pending_for_its_lease_is_answered_from_memory, fixture) {
  service.table().restore("other", "b", 2, 1000ms, clock::now());
  auto other = start(ioc, service.renew("other", "b", 2, 60'000ms));  // pending extend for another key
  auto r = start(ioc, service.renew("k", "a", 1, 1000ms));
  settle(ioc);
  BOOST_TEST(r->done);
  BOOST_TEST(std::holds_alternative<renew_ok>(*r->result));
  BOOST_TEST(!other->done);
  log.start();
  wait_done(ioc, other);
}

// A refusal is an answer too: "not held" after a release that is not durable yet would be rolled back by a
// crash (the lease comes back).
BOOST_FIXTURE_TEST_CASE(a_renew_refusal_waits_for_the_release_it_reports, fixture) {
  auto rel = start(ioc, service.release("k", "a", 1));
  settle(ioc);
  BOOST_TEST(!rel->done);
  auto renew = start(ioc, service.renew("k", "a", 1, 1000ms));
  settle(ioc);
  BOOST_TEST(!renew->done);
  log.start();
  wait_done(ioc, rel);
  wait_done(ioc, renew);
  BOOST_TEST((std::get<renew_refused>(*renew->result).reason == lost_reason::not_held));
}

// A same-owner re-acquire whose record is pending: the new lease's renew waits for that acquire.
BOOST_FIXTURE_TEST_CASE(a_renew_of_a_lease_whose_grant_is_pending_waits_for_the_grant, fixture) {
  auto again = start(ioc, service.acquire("k", "a", 1000ms));
  settle(ioc);
  BOOST_TEST(!again->done);
  std::uint64_t token = service.table().last_token();
  BOOST_TEST(token == 2u);
  auto renew = start(ioc, service.renew("k", "a", token, 1000ms));
  settle(ioc);
  BOOST_TEST(!renew->done);
  log.start();
  wait_done(ioc, again);
  wait_done(ioc, renew);
  BOOST_TEST(std::holds_alternative<renew_ok>(*renew->result));
}

// A failed journal answers every route with storage_unavailable and reports itself unhealthy.
BOOST_FIXTURE_TEST_CASE(a_stopped_journal_fails_pending_answers_instead_of_acknowledging, fixture) {
  auto r1 = start(ioc, service.renew("k", "a", 1, 60'000ms));
  settle(ioc);
  log.stop();  // the writer never ran: the extend can never become durable
  wait_done(ioc, r1);
  BOOST_REQUIRE(r1->error);
  BOOST_CHECK_THROW(std::rethrow_exception(r1->error), storage_unavailable);
}

// The sweep works in steps of a few thousand buckets, so its caller can let requests run in between; a
// pass over a large table takes many steps, and together they expire every lease exactly once.
BOOST_FIXTURE_TEST_CASE(the_expiry_sweep_takes_a_large_table_in_several_steps, fixture) {
  // A minute ago, not an hour: steady_clock counts from boot, and a machine up for less than an hour would
  // put an hour ago before the clock's epoch.
  const auto past = clock::now() - 1min;
  // The fixture's lease, for an hour instead of its second: filling and sweeping 50,000 leases can take
  // longer than a second on a loaded machine.
  service.table().restore("k", "a", 1, 1h, clock::now());
  for (int i = 0; i < 50'000; ++i)
    service.table().restore("old-" + std::to_string(i), "a", 100 + i, 1ms, past);
  std::size_t expired = 0, steps = 0;
  for (bool done = false; !done; ++steps) {
    auto step = service.sweep_step();
    expired += step.expired;
    done = step.pass_done;
    BOOST_REQUIRE(steps < 10'000);
  }
  BOOST_TEST(steps > 1u);
  BOOST_TEST(expired == 50'000u);
  BOOST_TEST(service.table().size() == 1u);  // the fixture's own lease is still valid
}

// http_server's sweep loop waits for each step's expire records before the next, so a million leases falling
// due at once never queue more than a step's records ahead of a request's own.
BOOST_FIXTURE_TEST_CASE(a_sweep_step_names_its_last_record_and_the_sweep_can_wait_for_it, fixture) {
  const auto past = clock::now() - 1min;
  for (int i = 0; i < 300; ++i)
    service.table().restore("old-" + std::to_string(i), "a", 100 + i, 1ms, past);
  auto step = service.sweep_step();
  BOOST_TEST(step.expired == lock_service::sweep_step_leases);
  BOOST_TEST(!step.pass_done);
  BOOST_TEST(step.last_lsn == log.last_appended());
  auto waited = start(ioc, [](lock_service& s, std::uint64_t lsn) -> asio::awaitable<bool> {
    co_await s.wait_logged(lsn);
    co_return true;
  }(service, step.last_lsn));
  settle(ioc, 20ms);
  BOOST_TEST(!waited->done);  // the writer has not run: the records are not durable yet
  BOOST_REQUIRE(log.flush());
  wait_done(ioc, waited);
  auto rest = service.sweep_step();
  BOOST_TEST(rest.expired == 300u - lock_service::sweep_step_leases);
  BOOST_TEST(rest.pass_done);
  BOOST_TEST(service.sweep_step().last_lsn == 0u);  // nothing left: nothing to wait for
}

namespace {
// A lock service over a real journal in `dir`, running until it goes (a clean stop: what a restart reads).
struct service_on_disk {
  server_metrics metrics;
  journal log;
  lock_service service{log, metrics};
  asio::io_context ioc;

  explicit service_on_disk(const std::filesystem::path& dir, std::uint64_t compact_bytes = 64ull << 20)
      : log{journal_options{dir, compact_bytes}, &metrics} {
    log.open(service.table(), clock::now());
    log.start();
  }
  ~service_on_disk() { log.stop(); }

  // Runs `op` to its end and returns what it answered.
  template <class T>
  T run(asio::awaitable<T> op) {
    auto p = start(ioc, std::move(op));
    wait_done(ioc, p);
    if (p->error) std::rethrow_exception(p->error);
    return std::move(*p->result);
  }
};

// Acquires and releases another key ("churn") until the log of `dir` is cut and compacted: the snapshot then
// holds the table as it is.
void compact_by_churn(const std::filesystem::path& dir) {
  service_on_disk s(dir, /*compact_bytes=*/512);
  for (int i = 0; i < 40; ++i) {
    auto g = std::get<acquire_granted>(s.run(s.service.acquire("churn", "c", 60'000ms)));
    s.run(s.service.release("churn", "c", g.token));
  }
}

// The lock table a restart recovers from `dir`, read at `now`.
lock_table restored(const std::filesystem::path& dir, clock::time_point now) {
  server_metrics metrics;
  journal log{journal_options{dir}, &metrics};
  lock_table table;
  log.open(table, now);
  return table;
}
}  // namespace

// The value goes into the log with the grant: a restart restores it, and a re-acquire's record replaces it.
BOOST_AUTO_TEST_CASE(a_granted_value_is_logged_and_restored_after_a_restart) {
  temp_dir dir;
  {
    service_on_disk s(dir.path());
    s.run(s.service.acquire("leader", "a", 60'000ms, {}, std::nullopt, "10.0.0.1:80"));
    s.run(s.service.acquire("leader", "a", 60'000ms, {}, std::nullopt, "10.0.0.1:81"));
    s.run(s.service.acquire("plain", "b", 60'000ms));
    BOOST_TEST(s.run(s.service.get("leader"))->value == "10.0.0.1:81");
  }
  const auto now = clock::now();
  auto table = restored(dir.path(), now);
  BOOST_TEST(table.get("leader", now)->value == "10.0.0.1:81");
  BOOST_TEST(table.get("plain", now)->value.empty());
}

// The grant that supersedes the same owner's unexpired lease is logged with the longer TTL that lease had
// (a late copy of an acquire sent before a raising renew): restored after a restart for that long.
BOOST_AUTO_TEST_CASE(a_superseding_grant_is_logged_with_the_longer_ttl_of_the_lease_it_replaced) {
  temp_dir dir;
  {
    service_on_disk s(dir.path());
    s.run(s.service.acquire("k", "a", 1000ms));
    BOOST_TEST(std::holds_alternative<renew_ok>(s.run(s.service.renew("k", "a", 1, 60'000ms))));
    BOOST_TEST(std::get<acquire_granted>(s.run(s.service.acquire("k", "a", 1000ms))).token == 2u);
  }
  const auto now = clock::now();
  auto held = restored(dir.path(), now).get("k", now);
  BOOST_REQUIRE(held.has_value());
  BOOST_TEST(held->token == 2u);
  BOOST_TEST(held->remaining.count() == 60'000);
}

namespace {
renew_batch_entry entry(std::string key, std::string owner, std::uint64_t token,
                        std::chrono::milliseconds ttl) {
  return renew_batch_entry{std::move(key), std::move(owner), token, ttl};
}

// renew_batch() reads its entries until it completes (as renew() reads its key): they must outlive it.
const std::vector<renew_batch_entry>& keep(std::vector<renew_batch_entry> entries) {
  static std::list<std::vector<renew_batch_entry>> kept;
  return kept.emplace_back(std::move(entries));
}
}  // namespace

// Each entry gets the answer a single renew would give, in order; one batch is one answered request.
BOOST_FIXTURE_TEST_CASE(a_batch_answers_each_entry_as_a_single_renew_would, fixture) {
  log.start();
  const auto now = clock::now();
  service.table().restore("b", "bob", 2, 1000ms, now);
  service.table().restore("gone", "a", 3, 1ms, now - 1s);                           // expired, not yet swept
  auto batch = start(ioc, service.renew_batch(keep({entry("k", "a", 1, 1000ms),     // ok
                                                    entry("b", "a", 2, 1000ms),     // another owner
                                                    entry("free", "a", 1, 1000ms),  // never held
                                                    entry("gone", "a", 3, 1000ms),  // its own, expired
                                                    entry("b", "bob", 1, 1000ms)})));  // an older token
  wait_done(ioc, batch);
  BOOST_REQUIRE(!batch->error);
  const auto& r = *batch->result;
  BOOST_REQUIRE(r.size() == 5u);
  BOOST_TEST(std::holds_alternative<renew_ok>(r[0]));
  BOOST_TEST((std::get<renew_refused>(r[1]).reason == lost_reason::owner_mismatch));
  BOOST_TEST((std::get<renew_refused>(r[2]).reason == lost_reason::not_held));
  BOOST_TEST((std::get<renew_refused>(r[3]).reason == lost_reason::not_held));
  BOOST_TEST((std::get<renew_refused>(r[4]).reason == lost_reason::token_mismatch));
  BOOST_TEST(metrics.renew_ok.load() == 1u);
  BOOST_TEST(metrics.renew_lost.load() == 4u);
  BOOST_TEST(metrics.renew_batches.load() == 1u);
  // The expiry the answer showed was logged, as a single renew logs it.
  BOOST_TEST(!service.table().contains("gone"));
  // The successful entry moved its lease: it is held well past the 1 s the fixture gave it.
  BOOST_TEST(service.table().get("k", clock::now())->token == 1u);
}

// The whole answer waits for the highest record any entry rests on: here an entry's TTL raise, so the
// entries renewed from memory are held back with it, and none is answered before the extend is durable.
BOOST_FIXTURE_TEST_CASE(a_batch_entry_whose_ttl_raise_is_pending_keeps_the_whole_answer_waiting, fixture) {
  service.table().restore("m", "a", 2, 60'000ms, clock::now());  // durable; same TTL: memory only
  auto batch =
      start(ioc, service.renew_batch(keep({entry("m", "a", 2, 60'000ms), entry("k", "a", 1, 60'000ms)})));
  settle(ioc);
  BOOST_TEST(!batch->done);
  log.start();
  wait_done(ioc, batch);
  BOOST_TEST(std::holds_alternative<renew_ok>((*batch->result)[0]));
  BOOST_TEST(std::holds_alternative<renew_ok>((*batch->result)[1]));
  BOOST_TEST(log.durable() >= 1u);
}

// An earlier single renew's extend still in flight: a batch that renews the same lease with the same TTL
// waits for it, exactly as a single retry does.
BOOST_FIXTURE_TEST_CASE(a_batch_waits_for_an_earlier_renews_extend_of_one_of_its_leases, fixture) {
  auto single = start(ioc, service.renew("k", "a", 1, 60'000ms));
  settle(ioc);
  BOOST_TEST(!single->done);
  auto batch = start(ioc, service.renew_batch(keep({entry("k", "a", 1, 60'000ms)})));
  settle(ioc);
  BOOST_TEST(!batch->done);
  log.start();
  wait_done(ioc, single);
  wait_done(ioc, batch);
  BOOST_TEST(std::holds_alternative<renew_ok>((*batch->result)[0]));
}

// A refusal in a batch waits for the release it reports, like a single renew's refusal.
BOOST_FIXTURE_TEST_CASE(a_batch_refusal_waits_for_the_release_it_reports, fixture) {
  auto rel = start(ioc, service.release("k", "a", 1));
  settle(ioc);
  auto batch = start(ioc, service.renew_batch(keep({entry("k", "a", 1, 1000ms)})));
  settle(ioc);
  BOOST_TEST(!batch->done);
  log.start();
  wait_done(ioc, rel);
  wait_done(ioc, batch);
  BOOST_TEST((std::get<renew_refused>((*batch->result)[0]).reason == lost_reason::not_held));
}

// Nothing pending about any lease of the batch: answered from memory while the disk is stalled.
BOOST_FIXTURE_TEST_CASE(a_batch_with_nothing_pending_for_its_leases_is_answered_from_memory, fixture) {
  service.table().restore("m", "a", 2, 1000ms, clock::now());
  auto batch = start(ioc, service.renew_batch(keep({entry("k", "a", 1, 1000ms), entry("m", "a", 2, 500ms)})));
  settle(ioc);
  BOOST_TEST(batch->done);
  BOOST_TEST(std::holds_alternative<renew_ok>((*batch->result)[0]));
  BOOST_TEST(std::holds_alternative<renew_ok>((*batch->result)[1]));
}

// A failed journal leaves every entry's outcome unknown: the batch fails as one renew does.
BOOST_FIXTURE_TEST_CASE(a_batch_on_a_stopped_journal_fails_instead_of_acknowledging, fixture) {
  auto batch = start(ioc, service.renew_batch(keep({entry("k", "a", 1, 60'000ms)})));
  settle(ioc);
  log.stop();
  wait_done(ioc, batch);
  BOOST_REQUIRE(batch->error);
  BOOST_CHECK_THROW(std::rethrow_exception(batch->error), storage_unavailable);
  BOOST_TEST(metrics.renew_batches.load() == 0u);
}

// A proclaim is answered only once its record is durable: a crash before then could restore the old value
// after the holder was told the new one is published.
BOOST_FIXTURE_TEST_CASE(a_proclaim_waits_for_its_record_and_wakes_a_value_watcher_only, fixture) {
  auto token_watcher = start(ioc, service.wait("k", 1, 60'000ms));
  auto value_watcher = start(ioc, service.wait("k", 1, 60'000ms, std::string()));
  settle(ioc);
  BOOST_TEST(!token_watcher->done);
  BOOST_TEST(!value_watcher->done);
  auto p = start(ioc, service.proclaim("k", "a", 1, "10.0.0.9:80"));
  settle(ioc);
  BOOST_TEST(!p->done);  // its record is not durable yet (the journal's writer has not started)
  BOOST_TEST(!value_watcher->done);
  log.start();
  wait_done(ioc, p);
  BOOST_TEST(std::holds_alternative<proclaim_ok>(*p->result));
  wait_done(ioc, value_watcher);
  BOOST_REQUIRE(value_watcher->result->has_value());
  BOOST_TEST((*value_watcher->result)->value == "10.0.0.9:80");
  BOOST_TEST((*value_watcher->result)->token == 1u);
  settle(ioc);
  BOOST_TEST(!token_watcher->done);  // the holder did not change: a token watch sleeps on
  BOOST_TEST(metrics.proclaim_ok.load() == 1u);
  service.wake_all();
  wait_done(ioc, token_watcher);
}

// The new value is in the log: a restart restores it with the lease's token and longest TTL, from the log
// and from a snapshot written by compaction; a refused proclaim changes nothing.
BOOST_AUTO_TEST_CASE(a_proclaimed_value_is_restored_after_a_restart_and_through_compaction) {
  temp_dir dir;
  {
    service_on_disk s(dir.path());
    s.run(s.service.acquire("leader", "a", 1000ms, {}, std::nullopt, "10.0.0.1:80"));
    BOOST_TEST(std::holds_alternative<renew_ok>(s.run(s.service.renew("leader", "a", 1, 60'000ms))));
    BOOST_TEST(
        std::holds_alternative<proclaim_ok>(s.run(s.service.proclaim("leader", "a", 1, "10.0.0.2:80"))));
    BOOST_TEST((std::get<renew_refused>(s.run(s.service.proclaim("leader", "a", 7, "stale"))).reason ==
                lost_reason::token_mismatch));
    s.run(s.service.acquire("cleared", "b", 60'000ms, {}, std::nullopt, "x"));
    BOOST_TEST(std::holds_alternative<proclaim_ok>(s.run(s.service.proclaim("cleared", "b", 2, ""))));
  }
  auto check = [](const lock_table& table, clock::time_point now) {
    auto held = table.get("leader", now);
    BOOST_REQUIRE(held.has_value());
    BOOST_TEST(held->value == "10.0.0.2:80");
    BOOST_TEST(held->token == 1u);
    BOOST_TEST(held->remaining.count() == 60'000);
    BOOST_TEST(table.get("cleared", now)->value.empty());
    BOOST_TEST(table.last_token() == 2u);
  };

  const auto now = clock::now();
  check(restored(dir.path(), now), now);
  compact_by_churn(dir.path());
  BOOST_TEST(std::filesystem::exists(dir.path() / "snapshot"));
  const auto later = clock::now();
  auto table = restored(dir.path(), later);
  auto held = table.get("leader", later);
  BOOST_REQUIRE(held.has_value());
  BOOST_TEST(held->value == "10.0.0.2:80");
  BOOST_TEST(held->token == 1u);
  BOOST_TEST(table.get("cleared", later)->value.empty());
}

// A record write is answered only once its record is durable, and a read waits for every write it could
// show: a crash before then could take back a record a client was told of.
BOOST_FIXTURE_TEST_CASE(a_record_write_and_a_read_of_it_wait_for_its_record, fixture) {
  auto w = start(ioc, service.write_record("k", "a", 1, "{\"slot\":3}"));
  settle(ioc);
  BOOST_TEST(!w->done);  // its record is not durable yet (the journal's writer has not started)
  auto r = start(ioc, service.read_record("k"));
  settle(ioc);
  BOOST_TEST(!r->done);
  log.start();
  wait_done(ioc, w);
  wait_done(ioc, r);
  BOOST_TEST(std::get<record_written>(*w->result).version == 1u);
  BOOST_REQUIRE(r->result->has_value());
  BOOST_TEST((*r->result)->value == "{\"slot\":3}");
  // The lease is untouched: no renew, no new value.
  BOOST_TEST(service.table().get("k", clock::now())->value.empty());
  BOOST_TEST(metrics.record_written.load() == 1u);
  BOOST_TEST(metrics.record_found.load() == 1u);
}

// A failed journal leaves a record write's outcome unknown: it fails, never acknowledged.
BOOST_FIXTURE_TEST_CASE(a_record_write_on_a_stopped_journal_fails_instead_of_acknowledging, fixture) {
  auto w = start(ioc, service.write_record("k", "a", 1, "v"));
  settle(ioc);
  log.stop();
  wait_done(ioc, w);
  BOOST_REQUIRE(w->error);
  BOOST_CHECK_THROW(std::rethrow_exception(w->error), storage_unavailable);
  BOOST_TEST(metrics.record_written.load() == 0u);
}

// Refusals (the lease's, the limit's) change nothing and are counted; the record outlives its lease's
// release and a restart, from the log and from a snapshot.
BOOST_AUTO_TEST_CASE(a_record_is_refused_by_the_lease_and_the_limit_and_survives_restarts) {
  temp_dir dir;
  {
    service_on_disk s(dir.path());
    s.service.set_record_limit(1);
    s.run(s.service.acquire("jobs", "a", 60'000ms));
    s.run(s.service.acquire("other", "b", 60'000ms));
    BOOST_TEST(std::get<record_written>(s.run(s.service.write_record("jobs", "a", 1, "v1"))).version == 1u);
    BOOST_TEST((std::get<renew_refused>(s.run(s.service.write_record("jobs", "a", 7, "bad"))).reason ==
                lost_reason::token_mismatch));
    BOOST_TEST((std::get<renew_refused>(s.run(s.service.write_record("jobs", "z", 1, "bad"))).reason ==
                lost_reason::owner_mismatch));
    BOOST_TEST(std::get<record_limit_reached>(s.run(s.service.write_record("other", "b", 2, "x"))).limit ==
               1u);
    BOOST_TEST(std::get<record_written>(s.run(s.service.write_record("jobs", "a", 1, "v2"))).version == 2u);
    s.run(s.service.release("jobs", "a", 1));
    BOOST_TEST((std::get<renew_refused>(s.run(s.service.write_record("jobs", "a", 1, "late"))).reason ==
                lost_reason::not_held));
    BOOST_TEST(s.metrics.record_lost.load() == 3u);
    BOOST_TEST(s.metrics.record_too_many.load() == 1u);
    BOOST_TEST(!s.run(s.service.read_record("other")).has_value());
    BOOST_TEST(s.metrics.record_missing.load() == 1u);
  }
  auto check = [](const lock_table& table) {
    const auto* r = table.find_record("jobs");
    BOOST_REQUIRE(r != nullptr);
    BOOST_TEST(r->value == "v2");
    BOOST_TEST(r->version == 2u);
    BOOST_TEST(r->token == 1u);
    BOOST_TEST(table.find_record("other") == nullptr);
  };
  check(restored(dir.path(), clock::now()));
  compact_by_churn(dir.path());
  BOOST_TEST(std::filesystem::exists(dir.path() / "snapshot"));
  check(restored(dir.path(), clock::now()));
}

// ---- queued acquires (feature acquire_queue)
// ----------------------------------------------------------------

namespace {

// The service's clock for the queue cases: an hour ahead of steady_clock, moved by hand. The waiters' timers
// are steady timers set to instants on this clock, an hour away in real time: they never fire during a case,
// so every wake-up a case sees comes from a release, an expiry noticed by a request, or a cancellation.
clock::time_point manual_now_value;
clock::time_point manual_now() {
  return manual_now_value;
}

struct queue_fixture {
  temp_dir dir;
  server_metrics metrics;
  journal log{journal_options{dir.path()}, &metrics};
  lock_service service{log, metrics, &manual_now};
  asio::io_context ioc;

  // `a` holds q with token 1 for a minute. The log's writer has not started (a stalled disk): nothing
  // appended is durable until start(); running_queue_fixture starts it.
  queue_fixture() {
    manual_now_value = clock::now() + 1h;
    log.open(service.table(), manual_now_value);
    service.table().restore("q", "a", 1, 60'000ms, manual_now_value);
  }
  // Every request still waiting is answered (or failed by the stopped log) while the service and the
  // io_context both live: a queued request's timer belongs to the io_context, its place to the service.
  ~queue_fixture() {
    service.wake_all();
    settle(ioc, 50ms);
    log.stop();
    settle(ioc, 50ms);
  }

  std::shared_ptr<pending<std::optional<queued_answer>>> enqueue(const std::string& owner,
                                                                 std::chrono::milliseconds wait = 30'000ms) {
    auto p = start(ioc, service.acquire_queued("q", owner, 10'000ms, wait));
    settle(ioc, 20ms);
    return p;
  }
  std::uint64_t release(const std::string& owner, std::uint64_t token) {
    auto r = start(ioc, service.release("q", owner, token));
    wait_done(ioc, r);
    BOOST_REQUIRE(!r->error);
    return r->result->removed_token;
  }
  // The token a finished queued acquire was granted (0 when it was refused).
  static std::uint64_t granted(const std::shared_ptr<pending<std::optional<queued_answer>>>& p) {
    BOOST_REQUIRE(p->done);
    BOOST_REQUIRE(!p->error);
    BOOST_REQUIRE(p->result->has_value());
    const auto* g = std::get_if<acquire_granted>(&(*p->result)->result);
    return g ? g->token : 0;
  }
};

struct running_queue_fixture : queue_fixture {
  running_queue_fixture() { log.start(); }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(queued_acquires_are_granted_in_arrival_order_one_per_release, running_queue_fixture) {
  auto b = enqueue("b"), c = enqueue("c"), d = enqueue("d");
  BOOST_TEST(!b->done);
  BOOST_TEST(!c->done);
  BOOST_TEST(metrics.queued.load() == 3);
  manual_now_value += 250ms;
  release("a", 1);
  wait_done(ioc, b);
  const auto tb = granted(b);
  BOOST_TEST(tb == 2u);
  BOOST_TEST((*b->result)->queued.count() == 250);  // the TTL runs from the grant, 250 ms after arrival
  settle(ioc, 20ms);
  BOOST_TEST(!c->done);  // one grant per release: the others were not woken to race for it
  BOOST_TEST(service.table().get("q", manual_now_value)->owner == "b");
  // An acquire that does not wait does not jump the queue.
  auto e = start(ioc, service.acquire("q", "e", 10'000ms));
  wait_done(ioc, e);
  BOOST_TEST(std::holds_alternative<acquire_refused>(*e->result));
  release("b", tb);
  wait_done(ioc, c);
  BOOST_TEST(granted(c) == 3u);
  BOOST_TEST(!d->done);
  release("c", 3);
  wait_done(ioc, d);
  BOOST_TEST(granted(d) == 4u);
  BOOST_TEST(metrics.queued.load() == 0);
}

BOOST_FIXTURE_TEST_CASE(a_holder_past_its_ttl_is_handed_to_the_queue_before_an_acquire_can_take_it,
                        running_queue_fixture) {
  auto b = enqueue("b");
  manual_now_value += 61s;  // a's lease has expired; nothing has looked at the key since
  auto e = start(ioc, service.acquire("q", "e", 10'000ms));
  wait_done(ioc, e);
  BOOST_TEST(std::holds_alternative<acquire_refused>(*e->result));
  BOOST_TEST(std::get<acquire_refused>(*e->result).holder.owner == "b");
  wait_done(ioc, b);
  BOOST_TEST(granted(b) == 2u);
}

BOOST_FIXTURE_TEST_CASE(a_queued_grant_is_answered_only_once_its_record_is_durable, queue_fixture) {
  auto b = enqueue("b");
  auto r = start(ioc, service.release("q", "a", 1));
  settle(ioc, 50ms);
  BOOST_TEST(service.table().get("q", manual_now_value)->owner == "b");  // granted in the table...
  BOOST_TEST(!b->done);  // ...but not answered while a crash could still take it back
  BOOST_TEST(!r->done);
  log.start();
  wait_done(ioc, r);
  wait_done(ioc, b);
  BOOST_TEST(granted(b) == 2u);
  BOOST_TEST(log.durable() >= 2u);
}

BOOST_AUTO_TEST_CASE(a_queued_acquire_whose_wait_passes_is_answered_with_the_holder) {
  // Real time: the wait's own timer ends it.
  temp_dir dir;
  server_metrics metrics;
  journal log{journal_options{dir.path()}, &metrics};
  lock_service service{log, metrics};
  asio::io_context ioc;
  log.open(service.table(), clock::now());
  service.table().restore("q", "a", 1, 60'000ms, clock::now());
  log.start();
  auto b = start(ioc, service.acquire_queued("q", "b", 10'000ms, 200ms));
  wait_done(ioc, b);
  BOOST_REQUIRE(!b->error);
  BOOST_REQUIRE(b->result->has_value());
  const auto* refused = std::get_if<acquire_refused>(&(*b->result)->result);
  BOOST_REQUIRE(refused);
  BOOST_TEST(refused->holder.owner == "a");
  BOOST_TEST(metrics.queue_wait_passed.load() == 1u);
  BOOST_TEST(metrics.queued.load() == 0);
  log.stop();
}

BOOST_FIXTURE_TEST_CASE(a_waiter_that_leaves_gives_up_its_place_and_a_grant_made_as_it_left,
                        running_queue_fixture) {
  asio::cancellation_signal b_gone, c_gone;
  auto queued = [&](const std::string& owner, asio::cancellation_signal& gone) {
    auto p = std::make_shared<pending<std::optional<queued_answer>>>();
    asio::co_spawn(ioc, service.acquire_queued("q", owner, 10'000ms, 30'000ms),
                   asio::bind_cancellation_slot(gone.slot(), [p](std::exception_ptr e, auto v) {
                     p->done = true;
                     p->error = e;
                     if (!e) p->result = std::move(v);
                   }));
    settle(ioc, 20ms);
    return p;
  };
  auto b = queued("b", b_gone);
  auto c = queued("c", c_gone);
  auto d = enqueue("d");
  // c's connection closes while it waits: its place is gone.
  c_gone.emit(asio::cancellation_type::terminal);
  settle(ioc, 20ms);
  BOOST_TEST(c->done);
  BOOST_TEST(!c->result->has_value());  // no answer: nobody is left to hear one
  // a releases, the key is granted to b, and b's connection closes before b could be answered: the grant is
  // given back at once and goes to d, instead of b holding a lock nobody knows of for its TTL.
  auto r = start(ioc, service.release("q", "a", 1));
  b_gone.emit(asio::cancellation_type::terminal);
  wait_done(ioc, r);
  wait_done(ioc, b);
  BOOST_TEST(!b->result->has_value());
  wait_done(ioc, d);
  BOOST_TEST(granted(d) == 3u);  // token 2 was b's grant, given back
  BOOST_TEST(service.table().get("q", manual_now_value)->owner == "d");
  BOOST_TEST(metrics.queue_left.load() == 2u);
  BOOST_TEST(metrics.queued.load() == 0);
}

BOOST_FIXTURE_TEST_CASE(a_retry_by_an_owner_in_the_queue_takes_its_place, running_queue_fixture) {
  auto b1 = enqueue("b"), c = enqueue("c");
  auto b2 = enqueue("b");  // b's request again (its first connection lost, say)
  wait_done(ioc, b1);
  BOOST_TEST(granted(b1) == 0u);  // answered with the holder
  release("a", 1);
  wait_done(ioc, b2);
  BOOST_TEST(granted(b2) == 2u);  // b's place, ahead of c
  BOOST_TEST(!c->done);
}

BOOST_FIXTURE_TEST_CASE(the_holder_and_a_free_key_are_granted_at_once_and_waiters_are_limited,
                        running_queue_fixture) {
  auto again = enqueue("a");  // the holder's own queued acquire supersedes its lease
  wait_done(ioc, again);
  BOOST_TEST(granted(again) == 2u);
  BOOST_TEST((*again->result)->queued.count() == 0);
  auto free_key = start(ioc, service.acquire_queued("free", "b", 10'000ms, 30'000ms));
  wait_done(ioc, free_key);
  BOOST_TEST(granted(free_key) == 3u);
  service.set_waiter_limits(1, 10);
  auto b = enqueue("b");
  auto c = enqueue("c");
  BOOST_TEST(!b->done);
  BOOST_REQUIRE(c->done);
  BOOST_CHECK_THROW(std::rethrow_exception(c->error), waiters_exhausted);
  service.wake_all();  // shutdown: b is answered with the holder
  wait_done(ioc, b);
  BOOST_TEST(granted(b) == 0u);
}

// An operator's break (docs/design.md, "Breaking a lease"): answered only once its record is durable, the
// key's queue and long-polls are served as at a release, the listing counts the queue, and a restart keeps
// the key free with the token counter past the broken token.
BOOST_AUTO_TEST_CASE(a_break_is_durable_before_its_answer_and_hands_the_key_to_its_queue) {
  temp_dir dir;
  std::uint64_t next_token = 0;
  {
    server_metrics metrics;
    journal log{journal_options{dir.path()}, &metrics};
    lock_service service{log, metrics};
    asio::io_context ioc;
    log.open(service.table(), clock::now());
    service.table().restore("q", "a", 7, 60'000ms, clock::now());
    auto queued = start(ioc, service.acquire_queued("q", "b", 10'000ms, 20'000ms));
    auto poll = start(ioc, service.wait("q", 7, 20'000ms));
    settle(ioc);
    auto page = start(ioc, service.list("", "", 10));
    settle(ioc);
    BOOST_REQUIRE(page->done);
    BOOST_REQUIRE(page->result->leases.size() == 1u);
    BOOST_TEST(page->result->leases[0].waiters == 1u);

    auto stale = start(ioc, service.break_lease("q", 6, "ops"));
    auto broke = start(ioc, service.break_lease("q", 7, "ops"));
    settle(ioc);
    BOOST_TEST(!broke->done);  // its record is not durable yet: the log is not running
    BOOST_TEST(!queued->done);
    log.start();
    wait_done(ioc, stale);
    wait_done(ioc, broke);
    BOOST_TEST(std::get<break_token_mismatch>(*stale->result).holder.token == 7u);
    BOOST_REQUIRE(std::holds_alternative<lease_broken>(*broke->result));
    BOOST_TEST(std::get<lease_broken>(*broke->result).lease.owner == "a");
    wait_done(ioc, queued);
    wait_done(ioc, poll);
    BOOST_REQUIRE(queued->result && *queued->result);
    next_token = std::get<acquire_granted>((*queued->result)->result).token;
    BOOST_TEST(next_token > 7u);
    BOOST_TEST(metrics.break_broken.load() == 1u);
    BOOST_TEST(metrics.break_token_mismatch.load() == 1u);
    auto released = start(ioc, service.release("q", "b", next_token));
    wait_done(ioc, released);
    auto free = start(ioc, service.break_lease("q", std::nullopt, "ops"));
    wait_done(ioc, free);
    BOOST_TEST(std::holds_alternative<break_not_held>(*free->result));
    BOOST_TEST(metrics.break_not_held.load() == 1u);
    log.stop();
  }
  const auto now = clock::now();
  auto table = restored(dir.path(), now);
  BOOST_TEST(!table.get("q", now).has_value());
  BOOST_TEST(table.last_token() >= next_token);
}

// ---- lock-delay (docs/design.md, "Lock-delay") ----

namespace {
std::chrono::milliseconds delay_remaining(const acquire_result& r) {
  const auto* refused = std::get_if<acquire_refused>(&r);
  return refused ? refused->lock_delay_remaining : std::chrono::milliseconds{-1};
}
}  // namespace

// A queued acquire waits out the delay after an expiry (a holder that stalled), and the queue is granted in
// order when the sweep ends it; an acquire that does not wait is refused for the delay meanwhile.
BOOST_FIXTURE_TEST_CASE(queued_acquires_wait_out_a_lock_delay_and_are_granted_in_order,
                        running_queue_fixture) {
  release("a", 1);
  auto g = start(ioc, service.acquire("q", "a", 1000ms, {}, std::nullopt, {}, 500ms));
  wait_done(ioc, g);
  const auto token = std::get<acquire_granted>(*g->result).token;
  auto b = enqueue("b"), c = enqueue("c");
  manual_now_value += 1000ms;  // a's lease expires: the next request on the key logs it, the delay begins
  auto e = start(ioc, service.acquire("q", "e", 1000ms));
  wait_done(ioc, e);
  BOOST_TEST(delay_remaining(*e->result).count() == 500);
  settle(ioc, 20ms);
  BOOST_TEST(!b->done);
  BOOST_TEST(metrics.acquire_lock_delay.load() == 1u);
  auto page = start(ioc, service.list("", "", 10));
  wait_done(ioc, page);
  BOOST_REQUIRE(page->result->leases.size() == 1u);
  BOOST_TEST(page->result->leases[0].lock_delay_remaining.count() == 500);
  BOOST_TEST(page->result->leases[0].waiters == 2u);
  manual_now_value += 499ms;
  service.sweep_step();
  settle(ioc, 20ms);
  BOOST_TEST(!b->done);
  manual_now_value += 1ms;
  service.sweep_step();  // the delay is over: logged, and the key goes to the head of the queue
  wait_done(ioc, b);
  BOOST_TEST(granted(b) > token);
  BOOST_TEST((*b->result)->queued.count() == 1500);
  settle(ioc, 20ms);
  BOOST_TEST(!c->done);
}

// The delay ends and, before the sweep or a waiter's timer looks, a plain acquire arrives: it finds the key
// handed to the queue's head, not free.
BOOST_FIXTURE_TEST_CASE(a_plain_acquire_at_the_end_of_a_lock_delay_does_not_jump_the_queue,
                        running_queue_fixture) {
  release("a", 1);
  auto g = start(ioc, service.acquire("q", "a", 1000ms, {}, std::nullopt, {}, 500ms));
  wait_done(ioc, g);
  auto b = enqueue("b");
  manual_now_value += 1000ms;
  auto e = start(ioc, service.acquire("q", "e", 1000ms));  // expires a's lease: the delay begins
  wait_done(ioc, e);
  BOOST_TEST(delay_remaining(*e->result).count() == 500);
  manual_now_value += 500ms;  // over; no sweep has run
  auto late = start(ioc, service.acquire("q", "e", 1000ms));
  wait_done(ioc, late);
  const auto* refused = std::get_if<acquire_refused>(&*late->result);
  BOOST_REQUIRE(refused);
  BOOST_TEST(refused->holder.owner == "b");
  wait_done(ioc, b);
  BOOST_TEST(granted(b) > 0u);
}

// A grant's lock-delay is durable before its answer; a restart after the expiry (or a break) keeps the key
// unavailable for the whole delay from the restart; once the end is logged, a restart finds it free. The
// same through a compaction's snapshot.
BOOST_AUTO_TEST_CASE(a_lock_delay_survives_a_restart_and_a_compaction_and_its_end_is_logged) {
  temp_dir dir;
  {
    // The service's clock is the real one: two 100 ms leases have expired after a sleep of 110 ms (a sleep
    // is never shorter), and a read of each logs its expiry.
    service_on_disk s(dir.path());
    s.run(s.service.acquire("expired", "a", 100ms, {}, std::nullopt, {}, 60'000ms));
    s.run(s.service.acquire("broken", "a", 60'000ms, {}, std::nullopt, {}, 60'000ms));
    s.run(s.service.acquire("ended", "a", 100ms, {}, std::nullopt, {}, 100ms));
    s.run(s.service.acquire("held", "a", 60'000ms, {}, std::nullopt, {}, 30'000ms));
    BOOST_TEST(std::holds_alternative<lease_broken>(s.run(s.service.break_lease("broken", std::nullopt))));
    std::this_thread::sleep_for(110ms);
    BOOST_TEST(!s.run(s.service.get("expired")).has_value());
    BOOST_TEST(!s.run(s.service.get("ended")).has_value());
    BOOST_TEST(delay_remaining(s.run(s.service.acquire("expired", "b", 1000ms))).count() > 0);
    std::this_thread::sleep_for(110ms);
    s.service.sweep_step();  // "ended"'s delay is over: its end is logged
    BOOST_TEST(!s.service.table().delayed("ended", clock::now()).has_value());
  }
  auto check = [](const lock_table& table, clock::time_point now) {
    BOOST_TEST((table.delayed("expired", now)->until == now + 60'000ms));  // in full from the restart
    BOOST_TEST((table.delayed("broken", now)->until == now + 60'000ms));
    BOOST_TEST(!table.delayed("ended", now).has_value());
    BOOST_TEST(table.get("held", now)->lock_delay.count() == 30'000);
    BOOST_TEST(table.last_token() == 4u);
  };
  const auto now = clock::now();
  check(restored(dir.path(), now), now);
  compact_by_churn(dir.path());  // everything goes into a snapshot, and the logs it covers go
  BOOST_TEST(std::filesystem::exists(dir.path() / "snapshot"));
  const auto later = clock::now();
  auto table = restored(dir.path(), later);
  BOOST_TEST((table.delayed("expired", later)->until == later + 60'000ms));
  BOOST_TEST((table.delayed("broken", later)->until == later + 60'000ms));
  BOOST_TEST(!table.delayed("ended", later).has_value());
  BOOST_TEST(table.get("held", later)->lock_delay.count() == 30'000);
}

// The grant's answer waits for its lock_delay record, not only its acquire record.
BOOST_FIXTURE_TEST_CASE(a_grant_with_a_lock_delay_is_answered_once_its_delay_is_durable, fixture) {
  auto g = start(ioc, service.acquire("d", "a", 1000ms, {}, std::nullopt, {}, 500ms));
  settle(ioc);
  BOOST_TEST(!g->done);
  BOOST_TEST(log.last_appended() == 2u);  // the acquire and its lock_delay record
  log.start();
  wait_done(ioc, g);
  BOOST_TEST(log.durable() >= 2u);
  BOOST_TEST(std::get<acquire_granted>(*g->result).lock_delay.count() == 500);
  log.stop();
}

// Defect: a break of a lease with a lock-delay logged a release and then a lock_delay record, two appends
// the writer could take into two batches; a crash after the first left the key free at once, while the
// broken holder may still be writing. The break is now one record (an expire, which replayed begins the
// lease's delay), so nothing can separate the end of the lease from its delay.
BOOST_AUTO_TEST_CASE(a_break_of_a_lease_with_a_lock_delay_is_one_record_that_keeps_the_delay) {
  temp_dir dir;
  {
    service_on_disk s(dir.path());
    s.run(s.service.acquire("k", "a", 60'000ms, {}, std::nullopt, {}, 30'000ms));
    const auto before = s.log.last_appended();
    BOOST_TEST(std::holds_alternative<lease_broken>(s.run(s.service.break_lease("k", std::nullopt))));
    BOOST_TEST(s.log.last_appended() == before + 1);
  }
  const auto now = clock::now();
  auto table = restored(dir.path(), now);
  BOOST_TEST(!table.get("k", now).has_value());
  BOOST_REQUIRE(table.delayed("k", now).has_value());
  BOOST_TEST((table.delayed("k", now)->until == now + 30'000ms));
}

// Defect: an acquire that met a lease past its expiry, not yet swept, was refused for the lease's lock-delay
// at once, before the expiry was logged. The refusal says the lease ended; a crash then restored the lease
// as held. The expiry is now logged first and the refusal waits for it, as a 404 does.
BOOST_FIXTURE_TEST_CASE(a_refusal_for_a_lock_delay_waits_for_the_expiry_it_reveals, queue_fixture) {
  service.table().restore("d", "a", 7, 1000ms, manual_now_value);
  service.table().restore_lock_delay("d", 7, 500ms, manual_now_value);  // durable, as after a restart
  manual_now_value += 1000ms;
  auto e = start(ioc, service.acquire("d", "b", 1000ms));
  settle(ioc);
  BOOST_TEST(!e->done);                   // the log is stalled...
  BOOST_TEST(log.last_appended() == 1u);  // ...with the expire record in it
  log.start();
  wait_done(ioc, e);
  BOOST_TEST(delay_remaining(*e->result).count() == 500);
}

// A key in lock-delay is refused 409 for the delay whatever the lock limit says (a 503 would send the client
// to retry for nothing), and counts against the limit while it lasts; the gauge shows it.
BOOST_FIXTURE_TEST_CASE(keys_in_lock_delay_are_refused_before_the_lock_limit_and_count_against_it,
                        running_queue_fixture) {
  auto g = start(ioc, service.acquire("d", "a", 1000ms, {}, std::nullopt, {}, 500ms));
  wait_done(ioc, g);
  manual_now_value += 1000ms;
  auto read = start(ioc, service.get("d"));  // d's lease has expired: logged, its delay begins; q is held
  wait_done(ioc, read);
  BOOST_TEST(metrics.lock_delays.load() == 1);
  service.set_lock_limit(1);
  auto refused = start(ioc, service.acquire("d", "b", 1000ms));
  wait_done(ioc, refused);
  BOOST_REQUIRE(!refused->error);
  BOOST_TEST(delay_remaining(*refused->result).count() == 500);
  service.set_lock_limit(2);
  auto other = start(ioc, service.acquire("x", "b", 1000ms));
  wait_done(ioc, other);
  BOOST_CHECK_THROW(std::rethrow_exception(other->error), locks_exhausted);  // q, and d in its delay
  manual_now_value += 500ms;
  service.sweep_step();
  BOOST_TEST(metrics.lock_delays.load() == 0);
  auto now_free = start(ioc, service.acquire("x", "b", 1000ms));
  wait_done(ioc, now_free);
  BOOST_TEST(std::holds_alternative<acquire_granted>(*now_free->result));
}

// A client that predates lock-delay waits by long-polling the holder's token, then acquires. Answered at once
// when the lease expired into its delay, it would be refused and poll again, two requests a turn for the
// whole delay. The long-poll on the ended lease's token sleeps through the delay instead; one on any other
// token answers at once.
BOOST_FIXTURE_TEST_CASE(a_long_poll_on_the_ended_leases_token_sleeps_through_its_lock_delay,
                        running_queue_fixture) {
  release("a", 1);
  auto g = start(ioc, service.acquire("q", "a", 1000ms, {}, std::nullopt, {}, 500ms));
  wait_done(ioc, g);
  const auto token = std::get<acquire_granted>(*g->result).token;
  manual_now_value += 1000ms;
  auto standby = start(ioc, service.wait("q", token, 30'000ms));
  auto other = start(ioc, service.wait("q", token + 100, 30'000ms));
  settle(ioc, 50ms);
  BOOST_TEST(!standby->done);
  wait_done(ioc, other);
  BOOST_TEST(!other->result->has_value());
  manual_now_value += 499ms;
  service.sweep_step();
  settle(ioc, 50ms);
  BOOST_TEST(!standby->done);
  manual_now_value += 1ms;
  service.sweep_step();  // the delay is over: the sleeping long-poll is answered, the key is free
  wait_done(ioc, standby);
  BOOST_TEST(!standby->result->has_value());
  auto b = start(ioc, service.acquire("q", "b", 1000ms));
  wait_done(ioc, b);
  BOOST_TEST(std::holds_alternative<acquire_granted>(*b->result));
}

// ---- Counting semaphores (docs/protocol.md, "semaphores") ----

namespace {
std::uint64_t token_of(const acquire_result& r) {
  BOOST_REQUIRE(std::holds_alternative<acquire_granted>(r));
  return std::get<acquire_granted>(r).token;
}

// The newest log file of `dir`.
std::filesystem::path newest_wal(const std::filesystem::path& dir) {
  std::filesystem::path out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if (name.starts_with("wal-") && name.ends_with(".log") && (out.empty() || e.path() > out)) out = e.path();
  }
  BOOST_REQUIRE(!out.empty());
  return out;
}
}  // namespace

// Every permit is logged under its own table key: a restart, and a compaction's snapshot, restore each one
// with its token, its TTL and the key's count; the counter never goes back.
BOOST_AUTO_TEST_CASE(permits_survive_a_restart_and_a_compaction_with_their_tokens_and_count) {
  temp_dir dir;
  std::uint64_t b = 0, c = 0, d = 0;
  {
    service_on_disk s(dir.path());
    const auto a = token_of(s.run(s.service.acquire("k", "a", 60'000ms, {}, std::nullopt, {}, 0ms, 3)));
    b = token_of(s.run(s.service.acquire("k", "b", 1000ms, {}, std::nullopt, "vb", 0ms, 3)));
    c = token_of(s.run(s.service.acquire("k", "c", 60'000ms, {}, std::nullopt, {}, 0ms, 3)));
    BOOST_TEST(std::holds_alternative<renew_ok>(s.run(s.service.renew("k", "b", b, 120'000ms))));
    BOOST_TEST((s.run(s.service.release("k", "a", a)).outcome == release_outcome::released));
    d = token_of(s.run(s.service.acquire("k", "d", 60'000ms, {}, std::nullopt, {}, 0ms, 3)));
    BOOST_TEST(std::holds_alternative<acquire_refused>(
        s.run(s.service.acquire("k", "e", 60'000ms, {}, std::nullopt, {}, 0ms, 3))));
  }
  auto check = [&](const lock_table& table, clock::time_point now) {
    auto v = table.get("k", now);
    BOOST_REQUIRE(v.has_value());
    BOOST_TEST(v->permits == 3u);
    BOOST_REQUIRE(v->holders.size() == 3u);
    BOOST_TEST(v->holders[0].token == d);  // slot 0, freed by a's release
    BOOST_TEST(v->holders[0].owner == "d");
    BOOST_TEST(v->holders[1].token == b);
    BOOST_TEST(v->holders[1].value == "vb");
    BOOST_TEST(v->holders[1].remaining.count() == 120'000);  // the renew's raised TTL
    BOOST_TEST(v->holders[2].token == c);
    BOOST_TEST(table.last_token() >= d);
  };
  const auto now = clock::now();
  check(restored(dir.path(), now), now);
  compact_by_churn(dir.path());
  BOOST_TEST(std::filesystem::exists(dir.path() / "snapshot"));
  const auto later = clock::now();
  check(restored(dir.path(), later), later);
}

// A power cut that tears the last batch (a grant never answered) loses that grant only: every answered
// permit comes back, and the counter passes the lost grant's token.
BOOST_AUTO_TEST_CASE(a_power_cut_keeps_every_answered_permit_and_the_token_never_goes_back) {
  temp_dir dir;
  std::uint64_t a = 0, b = 0, lost = 0;
  {
    service_on_disk s(dir.path());
    a = token_of(s.run(s.service.acquire("k", "a", 60'000ms, {}, std::nullopt, {}, 0ms, 2)));
    b = token_of(s.run(s.service.acquire("k", "b", 60'000ms, {}, std::nullopt, {}, 0ms, 2)));
    lost = token_of(s.run(s.service.acquire("k", "b", 60'000ms, {}, std::nullopt, {}, 0ms, 2)));
  }
  // The last batch (b's re-acquire) loses its last byte: as if its answer had never been sent.
  const auto wal = newest_wal(dir.path());
  std::filesystem::resize_file(wal, std::filesystem::file_size(wal) - 1);
  const auto now = clock::now();
  auto table = restored(dir.path(), now);
  auto v = table.get("k", now);
  BOOST_REQUIRE(v.has_value());
  BOOST_TEST(v->permits == 2u);
  BOOST_REQUIRE(v->holders.size() == 2u);
  BOOST_TEST(v->holders[0].token == a);
  BOOST_TEST(v->holders[1].token == b);    // the torn re-acquire's token is gone with it...
  BOOST_TEST(table.last_token() >= lost);  // ...and is never issued again
  auto next = std::get<acquire_granted>(table.acquire_permit(2, "k", "b", 1000ms, now));
  BOOST_TEST(next.token > lost);
  BOOST_TEST(next.slot == 1u);
}

// A queued acquire of a permit waits for a slot and takes the first one that frees; one of another count is
// refused at once while the queue waits; each permit is a lock for the server's limit.
BOOST_AUTO_TEST_CASE(a_queued_permit_is_granted_when_a_slot_frees_and_other_counts_are_refused) {
  temp_dir dir;
  service_on_disk s(dir.path());
  const auto a = token_of(s.run(s.service.acquire("k", "a", 60'000ms, {}, std::nullopt, {}, 0ms, 2)));
  token_of(s.run(s.service.acquire("k", "b", 60'000ms, {}, std::nullopt, {}, 0ms, 2)));
  auto c = start(s.ioc, s.service.acquire_queued("k", "c", 60'000ms, 30'000ms, {}, std::nullopt, {}, 0ms, 2));
  settle(s.ioc, 50ms);
  BOOST_TEST(!c->done);
  // Another count, queued or not, a plain acquire included: permits_mismatch at once.
  auto other =
      start(s.ioc, s.service.acquire_queued("k", "d", 60'000ms, 30'000ms, {}, std::nullopt, {}, 0ms, 3));
  wait_done(s.ioc, other);
  BOOST_REQUIRE(other->result->has_value());
  BOOST_TEST(std::get<acquire_mismatch>((*other->result)->result).permits == 2u);
  BOOST_TEST(std::get<acquire_mismatch>(s.run(s.service.acquire("k", "d", 60'000ms))).permits == 2u);
  BOOST_TEST(s.metrics.acquire_permits_mismatch.load() == 2u);
  // The same count that does not wait does not jump the queue.
  BOOST_TEST(std::holds_alternative<acquire_refused>(
      s.run(s.service.acquire("k", "e", 60'000ms, {}, std::nullopt, {}, 0ms, 2))));
  BOOST_TEST((s.run(s.service.release("k", "a", a)).outcome == release_outcome::released));
  wait_done(s.ioc, c);
  BOOST_REQUIRE(c->result->has_value());
  const auto& g = std::get<acquire_granted>((*c->result)->result);
  BOOST_TEST(g.slot == 0u);
  BOOST_TEST(g.token > a);
  // The limit counts permits: two held, a limit of 3 lets one more in, then refuses.
  s.service.set_lock_limit(3);
  token_of(s.run(s.service.acquire("s", "x", 60'000ms, {}, std::nullopt, {}, 0ms, 5)));
  BOOST_CHECK_THROW(s.run(s.service.acquire("s", "y", 60'000ms, {}, std::nullopt, {}, 0ms, 5)),
                    locks_exhausted);
  // A holder's re-acquire adds no lock.
  token_of(s.run(s.service.acquire("s", "x", 60'000ms, {}, std::nullopt, {}, 0ms, 5)));
  s.service.wake_all();
  settle(s.ioc, 50ms);
}

// A long-poll on a key of permits answers once no live permit has its token (0: once one is held), and not
// when another permit changes.
BOOST_AUTO_TEST_CASE(a_long_poll_on_a_key_of_permits_waits_while_its_token_is_a_live_permit) {
  temp_dir dir;
  service_on_disk s(dir.path());
  const auto a = token_of(s.run(s.service.acquire("k", "a", 60'000ms, {}, std::nullopt, {}, 0ms, 2)));
  const auto b = token_of(s.run(s.service.acquire("k", "b", 60'000ms, {}, std::nullopt, {}, 0ms, 2)));
  auto any = s.run(s.service.wait("k", 0, 30'000ms));
  BOOST_REQUIRE(any.has_value());
  BOOST_TEST(any->permits == 2u);
  BOOST_TEST(any->holders.size() == 2u);
  auto on_a = start(s.ioc, s.service.wait("k", a, 30'000ms));
  settle(s.ioc, 50ms);
  BOOST_TEST(!on_a->done);
  BOOST_TEST((s.run(s.service.release("k", "b", b)).outcome == release_outcome::released));
  settle(s.ioc, 50ms);
  BOOST_TEST(!on_a->done);  // a's permit is still live
  BOOST_TEST((s.run(s.service.release("k", "a", a)).outcome == release_outcome::released));
  wait_done(s.ioc, on_a);
  BOOST_TEST(!on_a->result->has_value());  // nothing held now
}

// Defect (a key with more holders than its count after a restart): a permit of count 3 with a lock-delay
// expired (logged), its slot's delay ended, and a grant of count 5 came before the sweep logged that end.
// Replayed, the old delay began again from the restart, the index kept count 3 and filed the 5-count lease
// under it, and 3-count acquires were granted beside 5-count holders. The grant now logs the end of every
// delay it ends (and retires a plain lease past its expiry, logged as expired), so a restart, and a
// compaction's snapshot, find the key with one count.
BOOST_AUTO_TEST_CASE(a_count_changed_at_the_end_of_a_lock_delay_is_the_only_count_after_a_restart) {
  temp_dir dir;
  std::uint64_t k5 = 0, p2 = 0;
  {
    // Real time: a sleep is never shorter, so after 110 ms a 100 ms lease has expired, and after 220 ms
    // its 100 ms delay is over. No sweep runs here: nothing but the grant can log the delay's end.
    service_on_disk s(dir.path());
    token_of(s.run(s.service.acquire("k", "a", 100ms, {}, std::nullopt, {}, 100ms, 3)));
    token_of(s.run(s.service.acquire("p", "a", 100ms, {}, std::nullopt, {}, 100ms)));
    std::this_thread::sleep_for(110ms);
    BOOST_TEST(!s.run(s.service.get("k")).has_value());  // logs the expiry: slot 0 of 3 enters its delay
    std::this_thread::sleep_for(110ms);
    k5 = token_of(s.run(s.service.acquire("k", "b", 60'000ms, {}, std::nullopt, {}, 0ms, 5)));
    p2 = token_of(s.run(s.service.acquire("p", "b", 60'000ms, {}, std::nullopt, {}, 0ms, 2)));
  }
  auto check = [&](lock_table& table, clock::time_point now) {
    BOOST_TEST(table.delay_count() == 0u);
    auto v = table.get("k", now);
    BOOST_REQUIRE(v.has_value());
    BOOST_TEST(v->permits == 5u);
    BOOST_REQUIRE(v->holders.size() == 1u);
    BOOST_TEST(v->holders[0].token == k5);
    BOOST_TEST(std::get<acquire_mismatch>(table.acquire_permit(3, "k", "c", 1000ms, now)).permits == 5u);
    std::size_t granted = 0;
    for (int i = 0; i < 8; ++i)
      granted += std::holds_alternative<acquire_granted>(
          table.acquire_permit(5, "k", "o" + std::to_string(i), 60'000ms, now));
    BOOST_TEST(granted == 4u);  // never more than 5 holders
    BOOST_TEST(table.get("k", now)->holders.size() == 5u);
    auto p = table.get("p", now);
    BOOST_REQUIRE(p.has_value());
    BOOST_TEST(p->permits == 2u);  // the plain lease past its expiry is not restored beside it
    BOOST_REQUIRE(p->holders.size() == 1u);
    BOOST_TEST(p->holders[0].token == p2);
    BOOST_TEST(std::get<acquire_mismatch>(table.acquire("p", "c", 1000ms, now)).permits == 2u);
  };
  const auto now = clock::now();
  auto table = restored(dir.path(), now);
  check(table, now);
  compact_by_churn(dir.path());
  BOOST_TEST(std::filesystem::exists(dir.path() / "snapshot"));
  const auto later = clock::now();
  auto compacted = restored(dir.path(), later);
  check(compacted, later);
}

// A batch may name one key twice with two tokens: two permits of a key of permits, each renewed by its token
// (docs/protocol.md, "Renew batch"); the refused one beside it is answered as a single renew would be.
BOOST_AUTO_TEST_CASE(a_batch_renews_two_permits_of_one_key) {
  temp_dir dir;
  service_on_disk s(dir.path());
  const auto a = token_of(s.run(s.service.acquire("k", "a", 1000ms, {}, std::nullopt, {}, 0ms, 3)));
  const auto b = token_of(s.run(s.service.acquire("k", "b", 1000ms, {}, std::nullopt, {}, 0ms, 3)));
  auto results = s.run(s.service.renew_batch(
      keep({entry("k", "a", a, 60'000ms), entry("k", "b", b, 90'000ms), entry("k", "b", a, 60'000ms)})));
  BOOST_REQUIRE(results.size() == 3u);
  BOOST_REQUIRE(std::holds_alternative<renew_ok>(results[0]));
  BOOST_REQUIRE(std::holds_alternative<renew_ok>(results[1]));
  BOOST_TEST(std::get<renew_ok>(results[0]).slot == 0u);
  BOOST_TEST(std::get<renew_ok>(results[1]).slot == 1u);
  BOOST_TEST(std::get<renew_ok>(results[1]).permits == 3u);
  BOOST_TEST((std::get<renew_refused>(results[2]).reason == lost_reason::owner_mismatch));  // a is a's
  auto v = s.run(s.service.get("k"));
  BOOST_REQUIRE(v.has_value());
  BOOST_REQUIRE(v->holders.size() == 2u);
  BOOST_TEST(v->holders[0].remaining.count() > 50'000);
  BOOST_TEST(v->holders[1].remaining.count() > 80'000);
}

// Defect: the rule above looked only at a plain key's delay, so a long-poll on the token of a permit whose
// slot was in lock-delay was answered at once, and a client that predates lock-delay spun (long-poll, refused
// acquire, long-poll) for the whole delay. It now sleeps until that slot's delay ends, whether other permits
// are held ("s") or none is ("t"); the sweep that ends the delay wakes it.
BOOST_FIXTURE_TEST_CASE(a_long_poll_on_a_permits_token_sleeps_through_its_slots_lock_delay,
                        running_queue_fixture) {
  auto acquire = [&](const std::string& key, const std::string& owner, std::chrono::milliseconds ttl,
                     std::chrono::milliseconds delay) {
    auto g = start(ioc, service.acquire(key, owner, ttl, {}, std::nullopt, {}, delay, 2));
    wait_done(ioc, g);
    return token_of(*g->result);
  };
  const auto s = acquire("s", "a", 1000ms, 500ms);
  acquire("s", "b", 60'000ms, 0ms);
  const auto t = acquire("t", "a", 1000ms, 500ms);
  manual_now_value += 1000ms;  // both permits of "a" expire: the long-polls log it, their slots' delays begin
  auto on_s = start(ioc, service.wait("s", s, 30'000ms));
  auto on_t = start(ioc, service.wait("t", t, 30'000ms));
  auto other = start(ioc, service.wait("s", s + 100, 30'000ms));
  settle(ioc, 50ms);
  wait_done(ioc, other);  // another token: answered at once, with b's permit
  BOOST_TEST((*other->result)->owner == "b");
  BOOST_TEST(!on_s->done);
  BOOST_TEST(!on_t->done);
  manual_now_value += 499ms;
  service.sweep_step();
  settle(ioc, 50ms);
  BOOST_TEST(!on_s->done);
  BOOST_TEST(!on_t->done);
  manual_now_value += 1ms;
  service.sweep_step();  // the delays are over: logged, and the sleeping long-polls are answered
  wait_done(ioc, on_s);
  wait_done(ioc, on_t);
  BOOST_REQUIRE(on_s->result->has_value());
  BOOST_TEST((*on_s->result)->owner == "b");
  BOOST_TEST(!on_t->result->has_value());  // nothing holds "t"
  auto g = start(ioc, service.acquire("t", "c", 1000ms, {}, std::nullopt, {}, 0ms, 2));
  wait_done(ioc, g);
  BOOST_TEST(std::get<acquire_granted>(*g->result).slot == 0u);
}

// A view shows only the first lock_table::max_holders_shown holders: a long-poll on the token of a permit
// beyond them still waits while it is live (the table is asked by token, not the view).
BOOST_AUTO_TEST_CASE(a_long_poll_on_a_permit_beyond_the_holders_shown_waits_while_it_is_live) {
  temp_dir dir;
  service_on_disk s(dir.path());
  const std::uint32_t n = lock_table::max_holders_shown + 1;
  std::uint64_t last = 0;
  for (std::uint32_t i = 0; i < n; ++i)
    last = token_of(
        s.run(s.service.acquire("k", "o" + std::to_string(i), 60'000ms, {}, std::nullopt, {}, 0ms, n)));
  auto on_last = start(s.ioc, s.service.wait("k", last, 30'000ms));
  settle(s.ioc, 50ms);
  BOOST_TEST(!on_last->done);
  BOOST_TEST((s.run(s.service.release("k", "o" + std::to_string(n - 1), last)).outcome ==
              release_outcome::released));
  wait_done(s.ioc, on_last);
  BOOST_REQUIRE(on_last->result->has_value());
  BOOST_TEST((*on_last->result)->holders_total == n - 1);
}
