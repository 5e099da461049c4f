// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE history_checker
#include <boost/test/unit_test.hpp>

#include "history.hpp"

#include <algorithm>
#include <sstream>

using namespace baton::chaos;

namespace {

// Times in these histories are in ms for readability; events store µs.
constexpr std::int64_t ms = 1000;

std::vector<event> parse(const std::string& text) {
  std::istringstream in(text);
  return parse_events(in, "test");
}

std::string line(std::int64_t t_ms, const std::string& src, const std::string& ev,
                 const std::string& more = "") {
  return R"({"t":)" + std::to_string(t_ms * ms) + R"(,"src":")" + src + R"(","ev":")" + ev + "\"" +
         (more.empty() ? "" : "," + more) + "}\n";
}

std::string grant(std::int64_t sent, std::int64_t recv, const std::string& src, const std::string& key,
                  std::uint64_t token, std::int64_t ttl_ms = 1000) {
  return line(sent, src, "acquire_req", R"("key":")" + key + "\"") +
         line(recv, src, "acquire_granted",
              R"("key":")" + key + R"(","token":)" + std::to_string(token) + R"(,"sent":)" +
                  std::to_string(sent * ms) + R"(,"ttl_ms":)" + std::to_string(ttl_ms));
}

std::string release(std::int64_t sent, std::int64_t recv, const std::string& src, const std::string& key,
                    std::uint64_t token, const std::string& outcome = "released") {
  const std::string k = R"("key":")" + key + R"(","token":)" + std::to_string(token);
  return line(sent, src, "release_req", k) +
         line(recv, src, "released",
              k + R"(,"outcome":")" + outcome + R"(","sent":)" + std::to_string(sent * ms));
}

std::string store(std::int64_t t, const std::string& key, std::uint64_t token, bool accepted) {
  return line(t, "store", "store_write",
              R"("key":")" + key + R"(","token":)" + std::to_string(token) + R"(,"accepted":)" +
                  (accepted ? "true" : "false"));
}

check_result check(const std::string& text) {
  auto events = parse(text);
  return check_history(events);
}

std::size_t count(const check_result& r, const std::string& kind) {
  std::size_t n = 0;
  for (const auto& v : r.violations)
    n += v.kind == kind;
  return n;
}

// w1's renew of k/5 sent at 300 ms with a TTL of 10 s (larger than the grant's).
const std::string raised =
    line(301, "w1", "renewed", R"("key":"k","token":5,"ttl_ms":10000,"sent":)" + std::to_string(300 * ms));

// Two workers taking turns on one key, with stale writes rejected: the history of a correct system.
const std::string clean = grant(0, 2, "w1", "k", 5) + line(3, "w1", "write_start", R"("key":"k","token":5)") +
                          store(4, "k", 5, true) + release(10, 12, "w1", "k", 5) +
                          grant(11, 14, "w2", "k", 6) + store(15, "k", 6, true) + store(16, "k", 5, false) +
                          line(20, "runner", "fault", R"("kind":"kill_server")") +
                          line(21, "runner", "server_kill") + line(22, "runner", "server_start") +
                          release(30, 31, "w2", "k", 6) + grant(40, 41, "w1", "k", 9);

}  // namespace

BOOST_AUTO_TEST_CASE(a_correct_history_has_no_violation_and_is_counted) {
  auto r = check(clean);
  BOOST_TEST(r.violations.empty());
  BOOST_TEST(r.ops == 6u);  // 3 acquires, 1 write, 2 releases
  BOOST_TEST(r.faults_total() == 1u);
  BOOST_TEST(summary_line(r, "42") == "ops=6 faults=1 (kill_server=1) violations=0 seed=42");
  BOOST_TEST(workload_line(r) == "leases=3 lost=0 writes_accepted=2 writes_rejected=1");
}

BOOST_AUTO_TEST_CASE(a_smaller_token_granted_after_a_larger_one_is_reported) {
  auto r = check(grant(0, 2, "w1", "k", 5) + release(3, 4, "w1", "k", 5) + grant(5, 6, "w2", "k", 3));
  BOOST_TEST(count(r, "token_not_increasing") == 1u);
}

BOOST_AUTO_TEST_CASE(concurrent_grants_of_unknown_order_are_not_judged_by_token_order) {
  // The two requests overlap in time: the server may have decided token 3's grant first.
  auto r = check(grant(0, 10, "w1", "k", 5, 1) + grant(1, 11, "w2", "k", 3, 1));
  BOOST_TEST(count(r, "token_not_increasing") == 0u);
}

BOOST_AUTO_TEST_CASE(one_token_granted_twice_is_reported_even_on_different_keys) {
  auto r = check(grant(0, 1, "w1", "a", 7) + grant(5, 6, "w2", "b", 7));
  BOOST_TEST(count(r, "token_granted_twice") == 1u);
}

BOOST_AUTO_TEST_CASE(a_store_accepting_a_lower_token_after_a_higher_one_is_reported) {
  BOOST_TEST(count(check(store(1, "k", 6, true) + store(2, "k", 5, true)), "stale_write_accepted") == 1u);
  BOOST_TEST(count(check(store(1, "k", 6, true) + store(2, "k", 5, false)), "stale_write_accepted") == 0u);
  // Equal tokens (chunks of one lease) and other resources are fine.
  BOOST_TEST(
      check(store(1, "k", 6, true) + store(2, "k", 6, true) + store(3, "j", 2, true)).violations.empty());
}

// The fence's other half: a refusal is right only for a token below one the store accepted.
BOOST_AUTO_TEST_CASE(a_store_refusing_a_token_that_is_not_stale_is_reported) {
  BOOST_TEST(count(check(store(1, "k", 6, true) + store(2, "k", 6, false)), "fresh_write_rejected") == 1u);
  BOOST_TEST(count(check(store(1, "k", 6, true) + store(2, "k", 7, false)), "fresh_write_rejected") == 1u);
  BOOST_TEST(count(check(store(1, "j", 6, true) + store(2, "k", 3, false)), "fresh_write_rejected") == 1u);
  auto fine = check(store(1, "k", 6, true) + store(2, "k", 5, false));
  BOOST_TEST(fine.violations.empty());
  BOOST_TEST(fine.writes_rejected == 1u);
}

BOOST_AUTO_TEST_CASE(a_grant_while_another_lease_is_certainly_valid_is_reported) {
  // w1's lease runs at least until 0 + 1000 ms; w2 gets the key at 500 ms without a release.
  auto r = check(grant(0, 2, "w1", "k", 5) + grant(498, 500, "w2", "k", 6));
  BOOST_TEST(count(r, "overlapping_leases") == 1u);
  BOOST_TEST(count(r, "lost_acquire") == 0u);
}

BOOST_AUTO_TEST_CASE(a_grant_after_the_lower_bound_of_expiry_is_not_judged) {
  // At 1200 ms w1's lease may have expired (its renew is unknown): nothing certain.
  BOOST_TEST(check(grant(0, 2, "w1", "k", 5) + grant(1199, 1200, "w2", "k", 6)).violations.empty());
}

BOOST_AUTO_TEST_CASE(a_confirmed_renew_extends_the_certain_lease) {
  auto renewed = line(701, "w1", "renewed", R"("key":"k","token":5,"sent":)" + std::to_string(700 * ms));
  auto r = check(grant(0, 2, "w1", "k", 5) + renewed + grant(1199, 1200, "w2", "k", 6));
  BOOST_TEST(count(r, "overlapping_leases") == 1u);
}

BOOST_AUTO_TEST_CASE(a_release_ends_the_lease_when_it_is_sent) {
  BOOST_TEST(
      check(grant(0, 2, "w1", "k", 5) + release(100, 130, "w1", "k", 5) + grant(110, 120, "w2", "k", 6))
          .violations.empty());
}

BOOST_AUTO_TEST_CASE(an_overlap_across_a_server_crash_is_a_lost_acquire) {
  auto r = check(grant(0, 2, "w1", "k", 5) + line(100, "runner", "server_kill") +
                 line(150, "runner", "server_start") + grant(198, 200, "w2", "k", 6));
  BOOST_TEST(count(r, "lost_acquire") == 1u);
  BOOST_TEST(count(r, "overlapping_leases") == 0u);
}

BOOST_AUTO_TEST_CASE(a_renew_with_its_own_ttl_extends_the_certain_lease_by_that_ttl) {
  // Granted for 1 s, renewed at 300 ms for 10 s: w2's grant at 5 s overlaps; at 11 s it does not.
  BOOST_TEST(count(check(grant(0, 2, "w1", "k", 5) + raised + grant(4999, 5000, "w2", "k", 6)),
                   "overlapping_leases") == 1u);
  BOOST_TEST(
      check(grant(0, 2, "w1", "k", 5) + raised + grant(10999, 11000, "w2", "k", 6)).violations.empty());
}

BOOST_AUTO_TEST_CASE(an_overlap_across_a_crash_that_only_a_raised_renew_explains_is_overlapping_leases) {
  // The acquire's own second ended before the restart; the renew acknowledged for 10 s did not survive.
  auto r = check(grant(0, 2, "w1", "k", 5) + raised + line(1500, "runner", "server_kill") +
                 line(1600, "runner", "server_start") + grant(2699, 2700, "w2", "k", 6));
  BOOST_TEST(count(r, "overlapping_leases") == 1u);
  BOOST_TEST(count(r, "lost_acquire") == 0u);
  BOOST_TEST(r.violations.at(0).message.find("renew") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_lease_superseded_by_its_owners_own_later_grant_still_counts_to_its_end) {
  // w1's late duplicate acquire superseded k/5 (renewed to 10 s) at 500 ms: batond keeps the key held for
  // the 10 s k/5's holder counts on (docs/design.md, "No request shortens a lease"), so w2's grant at 1.6 s
  // overlaps it whatever happened to k/5's token meanwhile.
  BOOST_TEST(count(check(grant(0, 2, "w1", "k", 5) + raised + grant(1600, 1602, "w2", "k", 7)),
                   "overlapping_leases") == 1u);
}

BOOST_AUTO_TEST_CASE(
    an_overlap_after_an_etcd_leader_stood_still_whose_holder_was_told_the_key_was_gone_is_named) {
  // w1 holds k/5 (TTL 2 s, renewed at 900 ms: owed until 2.9 s); the leader's disk stalls from 100 to 1000
  // ms; w2 gets the key at 1.2 s and w1's watch sees the delete at 1.25 s. A renew refused not_held, or a
  // release answered not_owner, says the same.
  const std::string holder =
      grant(0, 2, "w1", "k", 5, 2000) +
      line(901, "w1", "renewed", R"("key":"k","token":5,"sent":)" + std::to_string(900 * ms));
  const std::string stall = line(100, "runner", "fault", R"("kind":"etcd_disk_stall","member":"m0")") +
                            line(1000, "runner", "stall_end", R"("member":"m0")");
  const std::string later = grant(1190, 1200, "w2", "k", 6, 2000);
  const std::string watch_loss = line(
      1250, "w1", "lost",
      R"j("key":"k","token":5,"reason":"server shows the lease is gone: not_held: the key was deleted (seen by the key watch)")j");
  auto r = check(holder + stall + later + watch_loss);
  BOOST_TEST(count(r, "etcd_revoked_live_lease") == 1u);
  BOOST_TEST(count(r, "overlapping_leases") == 0u);
  BOOST_TEST(count(check(holder + stall + later + release(1300, 1310, "w1", "k", 5, "not_owner")),
                   "etcd_revoked_live_lease") == 1u);
  // Without the stall, or without the server's word that the key was gone, it is an overlap like any other.
  BOOST_TEST(count(check(holder + later + watch_loss), "overlapping_leases") == 1u);
  const std::string deadline =
      line(1250, "w1", "lost", R"("key":"k","token":5,"reason":"deadline passed without a confirmed renew")");
  BOOST_TEST(count(check(holder + stall + later + deadline), "overlapping_leases") == 1u);
  // A grant more than a TTL after the stall ended is not explained by it (k/5 renewed to 10 s here).
  const std::string long_holder = grant(0, 2, "w1", "k", 5, 2000) + raised;
  BOOST_TEST(count(check(long_holder + stall + grant(3090, 3100, "w2", "k", 6, 2000) + watch_loss),
                   "overlapping_leases") == 1u);
  BOOST_TEST(count(check(long_holder + stall + grant(2990, 3000, "w2", "k", 6, 2000) + watch_loss),
                   "etcd_revoked_live_lease") == 1u);
  // A leader paused for 0.9 s is the same stall; a follower paused is not.
  const auto pause = [](bool leader) {
    return line(100, "runner", "fault",
                R"("kind":"pause_server","seconds":0.9,"member":"m1","leader":)" +
                    std::string(leader ? "true" : "false"));
  };
  const std::string mismatch =
      line(1250, "w1", "lost", R"("key":"k","token":5,"reason":"server refused the renew: owner_mismatch")");
  BOOST_TEST(count(check(holder + pause(true) + later + mismatch), "etcd_revoked_live_lease") == 1u);
  BOOST_TEST(count(check(holder + pause(false) + later + mismatch), "overlapping_leases") == 1u);
}

BOOST_AUTO_TEST_CASE(a_storage_fault_batond_did_not_stop_on_is_reported) {
  // The runner's server_exit facts, and the violation each must give ("": none).
  const std::pair<std::string, std::string> cases[] = {
      {R"("cause":"fsync_eio","status":74,"expected":74,"healthz_ok":0)", ""},
      {R"("cause":"fsync_eio","status":-1,"expected":74,"healthz_ok":12)", "wedged_on_storage_failure"},
      // Exiting is not enough: /healthz must not call a failed server healthy meanwhile.
      {R"("cause":"disk_enospc","status":74,"expected":74,"healthz_ok":1)", "wedged_on_storage_failure"},
      {R"("cause":"bitflip","status":65,"expected":65,"log_changed":false)", ""},
      {R"("cause":"bitflip","status":-1,"expected":65,"log_changed":true)", "damaged_log_accepted"},
      {R"("cause":"bitflip","status":65,"expected":65,"log_changed":true)", "damaged_log_accepted"},
  };
  for (const auto& [fields, kind] : cases) {
    auto r = check(line(100, "runner", "server_exit", fields));
    BOOST_TEST(r.violations.size() == (kind.empty() ? 0u : 1u), fields);
    if (!kind.empty()) BOOST_TEST(count(r, kind) == 1u, fields);
  }
}

BOOST_AUTO_TEST_CASE(a_write_started_after_the_sdk_reported_loss_is_reported) {
  const std::string lost = line(600, "w1", "lost", R"("key":"k","token":5,"reason":"deadline")");
  const std::string write = line(700, "w1", "write_start", R"("key":"k","token":5)");
  BOOST_TEST(count(check(grant(0, 2, "w1", "k", 5) + lost + write), "write_after_loss") == 1u);
  // Before the loss is fine, and so is another worker's or another token's write.
  BOOST_TEST(check(grant(0, 2, "w1", "k", 5) + line(500, "w1", "write_start", R"("key":"k","token":5)") +
                   lost + line(700, "w2", "write_start", R"("key":"k","token":5)"))
                 .violations.empty());
}

BOOST_AUTO_TEST_CASE(a_holder_named_after_its_acknowledged_release_is_a_lost_release) {
  auto refused = [](std::int64_t sent) {
    return line(sent + 1, "w2", "acquire_refused",
                R"("key":"k","holder_token":5,"sent":)" + std::to_string(sent * ms));
  };
  BOOST_TEST(count(check(grant(0, 2, "w1", "k", 5) + release(10, 12, "w1", "k", 5) + refused(20)),
                   "lost_release") == 1u);
  // A refusal whose request left before the release was acknowledged may predate the release.
  BOOST_TEST(
      check(grant(0, 2, "w1", "k", 5) + refused(11) + release(10, 12, "w1", "k", 5)).violations.empty());
}

BOOST_AUTO_TEST_CASE(each_violation_is_shown_with_its_evidence) {
  auto events = parse(grant(0, 2, "w1", "k", 5) + grant(498, 500, "w2", "k", 6));
  auto r = check_history(events);
  BOOST_REQUIRE(r.violations.size() == 1u);
  auto text = describe(r.violations[0], events);
  BOOST_TEST(text.find("VIOLATION overlapping_leases") == 0u);
  BOOST_TEST(text.find("  > {\"t\":2000") != std::string::npos);
  BOOST_TEST(text.find("  > {\"t\":500000") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_malformed_line_is_an_error_unless_it_is_the_torn_last_line) {
  BOOST_CHECK_THROW(parse("{\"t\":1,\"ev\":\"x\"}\nnot json\n{\"t\":2,\"ev\":\"x\"}\n"),
                    std::invalid_argument);
  BOOST_TEST(parse("{\"t\":1,\"ev\":\"x\"}\n\n{\"t\":2,\"ev\":\"x\"}\n{\"t\":3,\"e").size() == 2u);
}

namespace {

// A permit of `base` (count `permits`) in `slot`, recorded as the resource base#slot.
std::string permit_grant(std::int64_t sent, std::int64_t recv, const std::string& src,
                         const std::string& base, std::uint32_t slot, std::uint64_t token,
                         std::uint32_t permits = 2) {
  const std::string key = base + "#" + std::to_string(slot);
  return line(sent, src, "acquire_req", R"("key":")" + base + "\"") +
         line(recv, src, "acquire_granted",
              R"("key":")" + key + R"(","token":)" + std::to_string(token) + R"(,"sent":)" +
                  std::to_string(sent * ms) + R"(,"ttl_ms":1000,"base":")" + base + R"(","permits":)" +
                  std::to_string(permits) + R"(,"slot":)" + std::to_string(slot));
}

}  // namespace

BOOST_AUTO_TEST_CASE(permits_up_to_the_count_at_once_are_no_violation) {
  // Two holders of s (2 permits) overlap; a third comes after one of them released, in the freed slot.
  auto r = check(permit_grant(0, 2, "w1", "s", 0, 5) + permit_grant(1, 3, "w2", "s", 1, 6) +
                 release(100, 101, "w1", "s#0", 5) + permit_grant(102, 104, "w3", "s", 0, 7) +
                 store(105, "s#0", 7, true) + store(106, "s#1", 6, true) + store(107, "s#0", 5, false));
  BOOST_TEST(r.violations.empty());
  BOOST_TEST(r.permits_granted == 3u);
  BOOST_TEST(r.most_permit_holders == 2u);
  BOOST_TEST(workload_line(r) ==
             "leases=3 lost=0 writes_accepted=2 writes_rejected=1 permits_granted=3 most_holders_at_once=2");
}

BOOST_AUTO_TEST_CASE(more_holders_than_permits_at_once_is_too_many_holders) {
  // Three permits of a key of 2, in three distinct slots: no one slot shows two holders.
  auto events = parse(permit_grant(0, 2, "w1", "s", 0, 5) + permit_grant(1, 3, "w2", "s", 1, 6) +
                      permit_grant(4, 6, "w3", "s", 2, 7));
  auto r = check_history(events);
  BOOST_TEST(count(r, "too_many_holders") == 1u);
  BOOST_TEST(count(r, "overlapping_leases") == 0u);
  BOOST_TEST(r.most_permit_holders == 3u);
  // Slot 2 of a count of 2 is itself out of range.
  BOOST_TEST(count(r, "slot_beyond_count") == 1u);
  const auto& v = *std::find_if(r.violations.begin(), r.violations.end(),
                                [](const violation& v) { return v.kind == "too_many_holders"; });
  BOOST_TEST(v.events.size() == 3u);  // the three grants
  BOOST_TEST(describe(v, events).find("VIOLATION too_many_holders: s had 3 holders") == 0u);
}

BOOST_AUTO_TEST_CASE(a_holder_counts_until_its_release_request_or_its_ttl) {
  // w1's permit ends by its release request at 50 ms, w2's by its TTL (sent at 1 ms, 1 s): a third holder
  // granted after both is within the count; one granted (receipt) before w2's TTL ran out is not.
  const std::string two = permit_grant(0, 2, "w1", "s", 0, 5) + permit_grant(1, 3, "w2", "s", 1, 6) +
                          line(50, "w1", "release_req", R"("key":"s#0","token":5)");
  BOOST_TEST(check(two + permit_grant(1002, 1003, "w3", "s", 0, 7)).violations.empty());
  auto early = check(two + line(900, "w1", "renewed", R"("key":"s#0","token":5,"sent":800000)") +
                     permit_grant(990, 995, "w3", "s", 0, 7));
  // w1's renew came after its release request: it cannot extend a released lease, so only w2 and w3 overlap.
  BOOST_TEST(count(early, "too_many_holders") == 0u);
  auto before_ttl = check(permit_grant(0, 2, "w1", "s", 0, 5) + permit_grant(1, 3, "w2", "s", 1, 6) +
                          permit_grant(990, 995, "w3", "s", 0, 7, 2));
  BOOST_TEST(count(before_ttl, "too_many_holders") == 1u);
}

BOOST_AUTO_TEST_CASE(holders_granted_under_different_counts_never_outnumber_the_smallest) {
  // s held under a count of 3 by two holders, then (after a change while idle that the server got wrong)
  // a third granted under a count of 2 while both are valid: 3 holders where one was promised at most 2.
  auto r = check(permit_grant(0, 2, "w1", "s", 0, 5, 3) + permit_grant(1, 3, "w2", "s", 1, 6, 3) +
                 permit_grant(4, 6, "w3", "s", 1, 7, 2));
  BOOST_TEST(count(r, "too_many_holders") == 1u);
  // The same three under a count of 3 throughout are fine.
  BOOST_TEST(check(permit_grant(0, 2, "w1", "s", 0, 5, 3) + permit_grant(1, 3, "w2", "s", 1, 6, 3) +
                   permit_grant(4, 6, "w3", "s", 2, 7, 3))
                 .violations.empty());
}

BOOST_AUTO_TEST_CASE(too_many_holders_after_an_etcd_leader_stood_still_is_named_as_its_revocation) {
  // w1 (slot 0) and w2 (slot 1) hold s of 2 permits; the leader's disk stalls from 100 ms; w3 is granted
  // slot 0 at 600 ms and w1's key watch then sees its key deleted: etcd revoked w1's lease early. The count
  // excess is that defect of etcd's, named as property 3 names the overlap of slot 0.
  const std::string two = permit_grant(0, 2, "w1", "s", 0, 5) + permit_grant(1, 3, "w2", "s", 1, 6);
  const std::string third = permit_grant(590, 600, "w3", "s", 0, 7);
  const std::string stall = line(100, "runner", "fault", R"("kind":"etcd_disk_stall","member":"m0")") +
                            line(900, "runner", "stall_end", R"("member":"m0")");
  const std::string watch_loss =
      line(700, "w1", "lost", R"j("key":"s#0","token":5,"reason":"not_held: the key was deleted")j");
  auto r = check(two + stall + third + watch_loss);
  BOOST_TEST(count(r, "etcd_revoked_live_lease") == 2u);  // slot 0's overlap, and the count
  BOOST_TEST(count(r, "too_many_holders") == 0u);
  auto without_stall = check(two + third + watch_loss);
  BOOST_TEST(count(without_stall, "too_many_holders") == 1u);
  BOOST_TEST(count(without_stall, "overlapping_leases") == 1u);
}

BOOST_AUTO_TEST_CASE(a_renew_recorded_after_the_release_request_does_not_extend_the_permit) {
  // w1's TTL ran out at 1 s; it asked for the release at 1.1 s; a renew recorded after that cannot have
  // extended it, so w3's grant at 1.2 s is within the count.
  auto r = check(permit_grant(0, 2, "w1", "s", 0, 5) + permit_grant(1000, 1003, "w2", "s", 1, 6) +
                 line(1100, "w1", "release_req", R"("key":"s#0","token":5)") +
                 line(1150, "w1", "renewed", R"("key":"s#0","token":5,"sent":1140000)") +
                 permit_grant(1190, 1200, "w3", "s", 0, 7));
  BOOST_TEST(r.violations.empty());
}
