// SPDX-License-Identifier: Apache-2.0
// A proclaimed value against power cuts (docs/design.md, "Proclaim: durable before the answer"): batond's
// lock service and journal over the simulated disk (sim_storage.hpp), driven by hand. An answered proclaim
// is never rolled back by a power cut, whatever part of the unsynced sectors the disk keeps; an unanswered
// one may or may not have taken effect, and either way the lease keeps its token.
#define BOOST_TEST_MODULE sim_proclaim
#include <boost/test/unit_test.hpp>

#include "sim_batond.hpp"

#include <cerrno>
#include <memory>
#include <optional>
#include <string>

using namespace baton;
using namespace std::chrono_literals;
using server::proclaim_ok;
using sim::batond;
using sim::fixed_now;

BOOST_AUTO_TEST_CASE(an_answered_proclaim_survives_every_power_cut_and_an_unanswered_one_keeps_the_token) {
  int kept_unanswered = 0, lost_unanswered = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      sim::rng r(seed);
      sim::sim_storage fs(r, "data");
      std::uint64_t token = 0;
      {
        batond b(fs);
        token = b.acquired("leader", "a", "old:80");
        auto p1 = b.start(b.service.proclaim("leader", "a", token, "answered:80"));
        BOOST_TEST(!p1->has_value());  // answered only once its record is on disk
        b.flush();
        BOOST_REQUIRE(p1->has_value());
        BOOST_TEST(std::holds_alternative<proclaim_ok>(**p1));
        // Written to the page cache, its fdatasync failed (503: the outcome unknown), then the power goes:
        // the disk may keep any part of it.
        auto p2 = b.start(b.service.proclaim("leader", "a", token, "unanswered:80"));
        fs.fail_next_sync(EIO);
        BOOST_TEST(!b.log.flush());
        b.ioc.restart();
        b.ioc.poll();
        BOOST_TEST(!p2->has_value());  // answered storage_unavailable, never 200
        fs.power_cut(/*keep_some=*/seed % 4 != 0);
      }
      batond after(fs);
      auto held = after.service.table().get("leader", fixed_now());
      BOOST_REQUIRE(held.has_value());
      BOOST_TEST(held->token == token);
      BOOST_TEST((held->value == "answered:80" || held->value == "unanswered:80"), held->value);
      (held->value == "unanswered:80" ? kept_unanswered : lost_unanswered)++;
      // Never below it (recovery may raise the counter past a torn batch, whatever that batch held).
      BOOST_TEST(after.service.table().last_token() >= token);
    }
  }
  // Both outcomes of the unanswered proclaim happen: the power cuts keep it and lose it.
  BOOST_TEST(lost_unanswered > 0);
  BOOST_TEST(kept_unanswered > 0);
}

// The lock's record (docs/design.md, "The lock's record"): an answered write survives every power cut,
// after its lease was released too; an unanswered one (its fdatasync failed) is kept by some cuts and lost
// by others, and recovery never refuses the directory for it (the guard batch written with it is no evidence
// that it was acknowledged).
BOOST_AUTO_TEST_CASE(an_answered_record_write_survives_every_power_cut_and_an_unanswered_one_may_not) {
  int kept_unanswered = 0, lost_unanswered = 0;
  const std::string answered(3000, 'a');  // several sectors, so a cut can keep some of them
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      sim::rng r(seed);
      sim::sim_storage fs(r, "data");
      std::uint64_t token = 0;
      {
        batond b(fs);
        token = b.acquired("agent", "a");
        auto w1 = b.start(b.service.write_record("agent", "a", token, answered));
        BOOST_TEST(!w1->has_value());  // answered only once its record is on disk
        b.flush();
        BOOST_REQUIRE(w1->has_value());
        BOOST_TEST(std::get<server::record_written>(**w1).version == 1u);
        auto w2 = b.start(b.service.write_record("agent", "a", token, std::string(3000, 'u')));
        fs.fail_next_sync(EIO);
        BOOST_TEST(!b.log.flush());
        b.ioc.restart();
        b.ioc.poll();
        BOOST_TEST(!w2->has_value());  // answered storage_unavailable, never 200
        fs.power_cut(/*keep_some=*/seed % 4 != 0);
      }
      batond after(fs);  // opens without refusing: a torn record batch is a torn tail
      const auto* rec = after.service.table().find_record("agent");
      BOOST_REQUIRE(rec != nullptr);
      BOOST_TEST(rec->token == token);
      BOOST_TEST((rec->value == answered || rec->value == std::string(3000, 'u')));
      BOOST_TEST(rec->version == (rec->value == answered ? 1u : 2u));
      (rec->value == answered ? lost_unanswered : kept_unanswered)++;
    }
  }
  BOOST_TEST(lost_unanswered > 0);
  BOOST_TEST(kept_unanswered > 0);
}
