// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE expiry_index
#include <boost/test/unit_test.hpp>

#include <list>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "expiry_index.hpp"

using namespace baton::server;
using namespace std::chrono_literals;

namespace {
using time_point = std::chrono::steady_clock::time_point;
const time_point t0 = time_point{} + 1000s;

struct record;
using entry = std::pair<const std::string, record>;
struct record {
  time_point expires{};
  entry* expiry_prev = nullptr;
  entry* expiry_next = nullptr;
};

// Entries that do not move (as the nodes of the lock table's unordered_map), and the index over them.
struct fixture {
  std::list<entry> entries;
  expiry_index<entry> index;

  entry& add(std::string key, time_point expires) {
    auto& e = entries.emplace_back(std::move(key), record{expires});
    index.insert(e);
    return e;
  }
  void set(entry& e, time_point expires) {
    const auto was = e.second.expires;
    e.second.expires = expires;
    index.move(e, was);
  }
  // Takes every due entry, as the sweep does, and returns their keys.
  std::set<std::string> take_due(time_point now) {
    std::set<std::string> out;
    while (entry* e = index.first_due(now)) {
      out.insert(e->first);
      index.erase(*e);
    }
    return out;
  }
};
}  // namespace

BOOST_AUTO_TEST_CASE(a_slot_is_the_end_of_the_second_an_expiry_falls_in) {
  using index = expiry_index<entry>;
  BOOST_TEST(index::slot_of(t0) == 1000);
  BOOST_TEST(index::slot_of(t0 + 1ns) == 1001);
  BOOST_TEST(index::slot_of(t0 + 999ms) == 1001);
  BOOST_TEST(index::slot_of(t0 - 1ns) == 1000);
  BOOST_TEST(index::slot_of(time_point{} - 1500ms) == -1);
  BOOST_TEST(index::slot_of(time_point::max()) > 0);  // saturated deadlines do not overflow
}

BOOST_FIXTURE_TEST_CASE(an_entry_is_due_only_once_its_whole_second_has_passed, fixture) {
  add("a", t0 + 200ms);
  add("b", t0 + 1000ms);
  BOOST_TEST(index.first_due(t0 + 200ms) == nullptr);  // expired, but its second is still running
  BOOST_TEST(index.first_due(t0 + 999ms) == nullptr);
  BOOST_TEST(take_due(t0 + 1000ms) == (std::set<std::string>{"a", "b"}));
  BOOST_TEST(index.size() == 0u);
  BOOST_TEST(index.slots() == 0u);
}

BOOST_FIXTURE_TEST_CASE(no_entry_is_due_before_its_expiry, fixture) {
  // Expiries spread over ten seconds in steps of 37 ms: at every instant, exactly the entries whose expiry
  // lies in a second that has ended are due, and each of them has expired.
  for (int i = 0; i < 300; ++i)
    add(std::to_string(i), t0 + i * 37ms);
  std::set<std::string> taken;
  for (auto now = t0; now <= t0 + 13s; now += 13ms) {
    for (const auto& key : take_due(now)) {
      BOOST_TEST((t0 + std::stoi(key) * 37ms <= now));
      taken.insert(key);
    }
    // And nothing is left behind once its second has ended.
    for (const auto& e : entries)
      if (!taken.contains(e.first))
        BOOST_TEST((e.second.expires > std::chrono::floor<std::chrono::seconds>(now)));
  }
  BOOST_TEST(taken.size() == 300u);
}

BOOST_FIXTURE_TEST_CASE(a_renewed_entry_moves_to_its_new_second, fixture) {
  auto& a = add("a", t0 + 500ms);
  add("b", t0 + 600ms);
  set(a, t0 + 5500ms);
  BOOST_TEST(take_due(t0 + 1s) == (std::set<std::string>{"b"}));
  BOOST_TEST(take_due(t0 + 5s).empty());
  BOOST_TEST(take_due(t0 + 6s) == (std::set<std::string>{"a"}));
}

BOOST_FIXTURE_TEST_CASE(a_move_within_its_second_keeps_its_place, fixture) {
  auto& a = add("a", t0 + 100ms);
  set(a, t0 + 900ms);
  BOOST_TEST(index.size() == 1u);
  BOOST_TEST(index.current_slot(t0 + 900ms) == &a);
  BOOST_TEST(take_due(t0 + 1s) == (std::set<std::string>{"a"}));
}

BOOST_FIXTURE_TEST_CASE(an_erased_entry_is_never_due, fixture) {
  add("a", t0 + 100ms);
  auto& b = add("b", t0 + 200ms);
  auto& c = add("c", t0 + 300ms);
  index.erase(b);  // the middle of its slot's list
  index.erase(c);  // the head
  BOOST_TEST(take_due(t0 + 2s) == (std::set<std::string>{"a"}));
  auto& d = add("d", t0 + 100ms);
  index.erase(d);  // the only entry: the slot goes
  BOOST_TEST(index.slots() == 0u);
  BOOST_TEST(index.first_due(t0 + 1h) == nullptr);
}

BOOST_FIXTURE_TEST_CASE(due_entries_come_oldest_second_first, fixture) {
  add("late", t0 + 2500ms);
  add("early", t0 + 500ms);
  add("middle", t0 + 1500ms);
  std::vector<std::string> order;
  while (entry* e = index.first_due(t0 + 3s)) {
    order.push_back(e->first);
    index.erase(*e);
  }
  BOOST_TEST(order == (std::vector<std::string>{"early", "middle", "late"}));
}

BOOST_FIXTURE_TEST_CASE(a_saturated_deadline_is_never_due, fixture) {
  add("forever", time_point::max());
  BOOST_TEST(index.first_due(t0 + 24h * 365 * 100) == nullptr);
  BOOST_TEST(index.first_due(time_point::max() - 1s) == nullptr);
}
