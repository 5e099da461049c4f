// SPDX-License-Identifier: Apache-2.0
#include "history.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace baton::chaos {
namespace json = boost::json;

namespace {

std::int64_t get_int(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  if (!v) return 0;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->as_uint64());
  return 0;
}

bool get_bool(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  return v && v->is_bool() && v->as_bool();
}

double get_double(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  return v && v->is_number() ? v->to_number<double>() : 0.0;
}

std::string get_string(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

event to_event(json::object o) {
  event e;
  e.t = get_int(o, "t");
  e.src = get_string(o, "src");
  e.ev = get_string(o, "ev");
  e.key = get_string(o, "key");
  e.token = static_cast<std::uint64_t>(get_int(o, "token"));
  e.sent = get_int(o, "sent");
  e.ttl_ms = get_int(o, "ttl_ms");
  e.holder_token = static_cast<std::uint64_t>(get_int(o, "holder_token"));
  e.accepted = get_bool(o, "accepted");
  e.outcome = get_string(o, "outcome");
  e.kind = get_string(o, "kind");
  e.raw = std::move(o);
  return e;
}

std::string token_text(const event& e) {
  return e.key + "/" + std::to_string(e.token);
}

// A lease as the server must have seen it: certainly valid on [from, until) by the server's clock.
struct lease_span {
  std::string key;
  std::uint64_t token = 0;
  std::int64_t from = 0;
  std::int64_t until = 0;
  std::size_t grant = 0;  // index of acquire_granted
  std::size_t end = 0;    // index of the event that bounds `until`
  std::size_t renew = 0;  // index of the renew that extended it furthest (0: none)
  bool released = false;  // its release was requested: no later renew extends it
};

using lease_id = std::tuple<std::string, std::string, std::uint64_t>;

// Property 7: a key of N permits never has more than N holders. Each slot (`key#slot`) is a lock to the
// other checks, which find two holders of one slot; this counts the holders of all of a key's slots at
// once, over the same certain-validity spans. A sweep over the spans' ends, an end before a start at the
// same instant. A key's count may change while it is idle: the holders valid at once never outnumber the
// smallest count any of them was granted under.
// An excess that etcd's early revocation explains (`revoked(earlier, later)`, as property 3 uses it: a
// holder valid at once with the newest one had been revoked by an etcd leader that stood still) is reported
// as etcd_revoked_live_lease, not as too_many_holders.
template <class Revoked>
void check_permit_count(const std::vector<event>& events, const std::map<lease_id, lease_span>& spans,
                        check_result& r, const Revoked& revoked) {
  struct edge {
    std::int64_t t;
    int delta;  // -1 (an end) sorts before +1 (a start)
    std::int64_t permits;
    const lease_span* span;
    bool operator<(const edge& o) const { return std::tie(t, delta) < std::tie(o.t, o.delta); }
  };
  std::map<std::string, std::vector<edge>> by_base;
  for (const auto& [id, s] : spans) {
    const auto& g = events[s.grant];
    if (s.until <= s.from || !g.raw.contains("permits")) continue;
    const auto permits = get_int(g.raw, "permits");
    auto& edges = by_base[get_string(g.raw, "base")];
    edges.push_back({s.from, +1, permits, &s});
    edges.push_back({s.until, -1, permits, &s});
  }
  for (auto& [base, edges] : by_base) {
    std::stable_sort(edges.begin(), edges.end());
    std::multiset<std::int64_t> counts;
    std::map<std::size_t, const lease_span*> live;  // by grant index
    for (const auto& e : edges) {
      if (e.delta > 0) {
        counts.insert(e.permits);
        live.emplace(e.span->grant, e.span);
      } else {
        counts.erase(counts.find(e.permits));
        live.erase(e.span->grant);
      }
      r.most_permit_holders = std::max(r.most_permit_holders, live.size());
      if (!counts.empty() && static_cast<std::int64_t>(counts.size()) > *counts.begin()) {
        std::vector<std::size_t> evidence;
        bool etcd_revoked = false;
        for (const auto& [grant, s] : live) {
          evidence.push_back(grant);
          etcd_revoked = etcd_revoked || (s != e.span && revoked(*s, *e.span));
        }
        r.violations.push_back(
            {etcd_revoked ? "etcd_revoked_live_lease" : "too_many_holders",
             base + " had " + std::to_string(counts.size()) +
                 " holders valid at once by the server's clock, " + "granted under counts " +
                 std::to_string(*counts.begin()) + " to " + std::to_string(*counts.rbegin()) +
                 (etcd_revoked ? " (one was told its key was gone after an etcd leader stood still: etcd "
                                 "revoked it early)"
                               : ""),
             std::move(evidence)});
        break;  // one report per key: the evidence would repeat
      }
    }
  }
}

}  // namespace

std::vector<event> parse_events(std::istream& in, const std::string& name) {
  std::vector<event> out;
  std::string line, bad;
  std::size_t number = 0, bad_number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!bad.empty())
      throw std::invalid_argument(name + ":" + std::to_string(bad_number) + ": not a JSON object: " + bad);
    boost::system::error_code ec;
    auto v = json::parse(line, ec);
    if (ec || !v.is_object() || !v.as_object().contains("t") || !v.as_object().contains("ev")) {
      bad = line.substr(0, 120);
      bad_number = number;
      continue;
    }
    out.push_back(to_event(std::move(v.as_object())));
  }
  return out;
}

std::size_t check_result::faults_total() const {
  std::size_t n = 0;
  for (const auto& [kind, count] : faults)
    n += count;
  return n;
}

check_result check_history(std::vector<event>& events) {
  std::stable_sort(events.begin(), events.end(), [](const event& a, const event& b) { return a.t < b.t; });
  check_result r;
  auto report = [&](std::string kind, std::string message, std::vector<std::size_t> evidence) {
    r.violations.push_back({std::move(kind), std::move(message), std::move(evidence)});
  };

  std::vector<std::int64_t> kills;
  // (src, key, token) identifies one acquisition: owner strings are unique per acquisition.
  std::map<lease_id, lease_span> spans;
  std::map<lease_id, std::size_t> lost_at;
  std::map<std::pair<std::string, std::uint64_t>, std::size_t> release_acked;  // (key, token) → released
  std::map<std::string, std::uint64_t> store_highest;
  std::map<std::string, std::size_t> store_highest_at;
  std::map<std::string, std::vector<std::size_t>> grants_by_key;
  std::map<std::uint64_t, std::size_t> grant_of_token;
  // When an etcd leader stood still (an etcd_disk_stall until its stall_end, a pause_server of the member
  // that was leader), and the leases whose holder the server told that their key was gone or taken: a renew
  // refused, a key watch that saw the key deleted or written, a release answered not_owner or already_free.
  std::vector<std::pair<std::int64_t, std::int64_t>> stalls;
  std::set<lease_id> told_gone;

  for (std::size_t i = 0; i < events.size(); ++i) {
    const event& e = events[i];
    const lease_id id{e.src, e.key, e.token};
    if (e.ev == "acquire_req" || e.ev == "write_start" || e.ev == "release_req") ++r.ops;
    if (e.ev == "fault") ++r.faults[e.kind.empty() ? "unknown" : e.kind];
    if (e.ev == "fault" && e.kind == "etcd_disk_stall" && !e.raw.contains("skipped"))
      stalls.emplace_back(e.t, INT64_MAX);
    if (e.ev == "stall_end" && !stalls.empty()) stalls.back().second = e.t;
    if (e.ev == "fault" && e.kind == "pause_server" && get_bool(e.raw, "leader"))
      stalls.emplace_back(e.t, e.t + static_cast<std::int64_t>(get_double(e.raw, "seconds") * 1e6));
    if (e.ev == "lost" || (e.ev == "released" && (e.outcome == "not_owner" || e.outcome == "already_free"))) {
      const std::string reason = get_string(e.raw, "reason");
      if (e.ev == "released" || reason.find("not_held") != std::string::npos ||
          reason.find("_mismatch") != std::string::npos)
        told_gone.insert(id);
    }
    if (e.ev == "server_kill") kills.push_back(e.t);

    if (e.ev == "store_write") ++(e.accepted ? r.writes_accepted : r.writes_rejected);
    if (e.ev == "lost") ++r.losses;

    if (e.ev == "acquire_granted") {
      ++r.leases;
      if (e.raw.contains("permits")) {
        ++r.permits_granted;
        // Property 7, its second half: a permit's slot is one of its count's.
        const auto slot = get_int(e.raw, "slot"), permits = get_int(e.raw, "permits");
        if (slot < 0 || slot >= permits)
          report("slot_beyond_count",
                 token_text(e) + " was granted slot " + std::to_string(slot) + " of a key of " +
                     std::to_string(permits) + " permits",
                 {i});
      }
      // Property 1, part 2: no token is granted twice, to any key.
      auto [it, fresh] = grant_of_token.emplace(e.token, i);
      if (!fresh)
        report("token_granted_twice", "token " + std::to_string(e.token) + " was granted twice",
               {it->second, i});
      grants_by_key[e.key].push_back(i);
      spans[id] = lease_span{e.key, e.token, e.t, e.sent + e.ttl_ms * 1000, i, i, 0};
    } else if (e.ev == "renewed") {
      if (auto it = spans.find(id); it != spans.end()) {
        const auto& g = events[it->second.grant];
        // Only renews before the lease was released can extend it; a release ends it for good. A renew
        // names its TTL when it is not the grant's (a client raising its lease's TTL).
        if (!it->second.released) {
          std::int64_t until = e.sent + (e.ttl_ms > 0 ? e.ttl_ms : g.ttl_ms) * 1000;
          if (until > it->second.until) {
            it->second.until = until;
            it->second.end = it->second.renew = i;
          }
        }
      }
    } else if (e.ev == "release_req") {
      if (auto it = spans.find(id); it != spans.end()) {
        it->second.released = true;
        if (e.t < it->second.until) {
          it->second.until = e.t;
          it->second.end = i;
        }
      }
    } else if (e.ev == "released") {
      if (e.outcome == "released" || e.outcome == "already_free")
        release_acked.emplace(std::pair{e.key, e.token}, i);
    } else if (e.ev == "acquire_refused") {
      // Property 5, releases: a holder named after its release was acknowledged came back from the dead.
      auto it = release_acked.find({e.key, e.holder_token});
      if (e.holder_token != 0 && it != release_acked.end() && events[it->second].t < e.sent)
        report("lost_release",
               "the server named " + e.key + "/" + std::to_string(e.holder_token) +
                   " as holder after its release was acknowledged (" + events[it->second].outcome + ")",
               {it->second, i});
    } else if (e.ev == "lost") {
      lost_at.emplace(id, i);
    } else if (e.ev == "write_start") {
      // Property 4: the SDK said the lease was gone, and the worker still started a write under it.
      if (auto it = lost_at.find(id); it != lost_at.end())
        report("write_after_loss",
               e.src + " started a write with " + token_text(e) + " after its SDK reported the lease lost",
               {it->second, i});
    } else if (e.ev == "server_exit") {
      // Property 6: batond's answer to a storage fault, as the runner saw it. `status` is the exit status
      // (-1: still running when the runner gave up waiting), `expected` what the contract says.
      const auto status = get_int(e.raw, "status");
      const auto expected = get_int(e.raw, "expected");
      const auto healthz_ok = get_int(e.raw, "healthz_ok");
      const bool damaged = get_string(e.raw, "cause") == "bitflip";
      const bool log_changed = get_bool(e.raw, "log_changed");
      if (status != expected || healthz_ok > 0 || log_changed) {
        std::string what = status == -1 ? std::string(damaged ? "started on it" : "kept running")
                                        : "exited with status " + std::to_string(status);
        if (healthz_ok > 0) what += ", /healthz answered 200 " + std::to_string(healthz_ok) + " times after";
        if (log_changed) what += ", and changed the damaged log";
        report(damaged ? "damaged_log_accepted" : "wedged_on_storage_failure",
               "after " + get_string(e.raw, "cause") + " batond " + what + " (expected exit status " +
                   std::to_string(expected) + ")",
               {i});
      }
    } else if (e.ev == "store_write" && !e.accepted) {
      // Property 2, its other half: the store refuses only what is stale, a token below one it accepted.
      auto highest = store_highest.find(e.key);
      if (highest == store_highest.end() || e.token >= highest->second)
        report("fresh_write_rejected",
               "the store refused " + token_text(e) + " although the highest token it had accepted was " +
                   (highest == store_highest.end() ? std::string("none") : std::to_string(highest->second)),
               highest == store_highest.end() ? std::vector<std::size_t>{i}
                                              : std::vector<std::size_t>{store_highest_at[e.key], i});
    } else if (e.ev == "store_write" && e.accepted) {
      // Property 2: per resource, accepted tokens never go down.
      auto& highest = store_highest[e.key];
      if (e.token < highest)
        report(
            "stale_write_accepted",
            "the store accepted " + token_text(e) + " after it had accepted token " + std::to_string(highest),
            {store_highest_at[e.key], i});
      if (e.token >= highest) {
        highest = e.token;
        store_highest_at[e.key] = i;
      }
    }
  }

  auto kill_between = [&](std::int64_t a, std::int64_t b) {
    auto it = std::upper_bound(kills.begin(), kills.end(), a);
    return it != kills.end() && *it < b;
  };

  // Property 1, part 1: per key, a grant certainly decided after another (its request was sent after the
  // other's reply arrived) carries a larger token.
  for (auto& [key, idx] : grants_by_key) {
    std::vector<std::size_t> by_recv = idx, by_sent = idx;
    std::sort(by_sent.begin(), by_sent.end(),
              [&](auto a, auto b) { return events[a].sent < events[b].sent; });
    std::size_t p = 0, best = SIZE_MAX;
    for (auto cur : by_sent) {
      while (p < by_recv.size() && events[by_recv[p]].t < events[cur].sent) {
        if (best == SIZE_MAX || events[by_recv[p]].token > events[best].token) best = by_recv[p];
        ++p;
      }
      if (best != SIZE_MAX && events[cur].token < events[best].token)
        report("token_not_increasing",
               "token " + std::to_string(events[cur].token) + " of " + key + " was granted after token " +
                   std::to_string(events[best].token) +
                   (kill_between(events[best].t, events[cur].sent) ? " (a server restart lies between them)"
                                                                   : ""),
               {best, cur});
    }
  }

  // An overlap etcd's lease defect explains: the later lease was granted while an etcd leader stood still or
  // within a TTL of the earlier one after that, and the earlier one's holder was told its key was gone or
  // taken. etcd 3.4 before 3.4.31 revokes such leases (etcd issues 12528, 15247); the holder's key watch
  // usually reports it before the next grant, not always (docs/reliability.md).
  auto revoked_by_stall = [&](const lease_span& earlier, const lease_span& later) {
    const auto& g = events[earlier.grant];
    const std::int64_t ttl_us = g.ttl_ms * 1000;
    return told_gone.count({g.src, earlier.key, earlier.token}) &&
           std::any_of(stalls.begin(), stalls.end(), [&](const auto& w) {
             return later.from >= w.first && (w.second == INT64_MAX || later.from <= w.second + ttl_us);
           });
  };

  // Property 3 (and 5 for acquires): per key, the certain-validity spans of two leases never overlap. An
  // overlap across a server crash means the crash lost an acknowledged acquire.
  std::map<std::string, std::vector<const lease_span*>> by_key;
  for (const auto& [id, s] : spans)
    if (s.until > s.from) by_key[s.key].push_back(&s);
  for (auto& [key, list] : by_key) {
    std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->from < b->from; });
    const lease_span* longest = nullptr;
    for (auto* s : list) {
      if (longest && s->from < longest->until && s->token != longest->token) {
        // Across a crash, an overlap the grant alone explains is a lost acquire; one that only a renew
        // explains is a renew acknowledged before its TTL was durable: overlapping leases.
        const auto& g = events[longest->grant];
        const bool crash = kill_between(longest->from, s->from);
        const bool acquire_lost = crash && s->from < std::min(longest->until, g.sent + g.ttl_ms * 1000);
        const bool revoked = !acquire_lost && revoked_by_stall(*longest, *s);
        std::vector<std::size_t> evidence{longest->grant};
        if (longest->renew != 0 && longest->renew != longest->end) evidence.push_back(longest->renew);
        evidence.insert(evidence.end(), {longest->end, s->grant});
        report(
            acquire_lost ? "lost_acquire"
            : revoked    ? "etcd_revoked_live_lease"
                         : "overlapping_leases",
            key + "/" + std::to_string(s->token) + " was granted while " + key + "/" +
                std::to_string(longest->token) + " was still valid by the server's clock" +
                (acquire_lost ? " (its acquire was acknowledged before a server crash)"
                 : crash      ? " (the renew that extended it was acknowledged before a server crash)"
                 : revoked ? " (granted while an etcd leader stood still or just after, and its holder was "
                             "told the key was gone: etcd revoked it early)"
                           : ""),
            std::move(evidence));
      }
      if (!longest || s->until > longest->until) longest = s;
    }
  }
  check_permit_count(events, spans, r, revoked_by_stall);
  return r;
}

std::string describe(const violation& v, const std::vector<event>& events) {
  std::ostringstream o;
  o << "VIOLATION " << v.kind << ": " << v.message << "\n";
  std::set<std::size_t> shown;
  std::set<std::string> keys;
  for (auto i : v.events)
    keys.insert(events[i].key);
  // The evidence, and up to three events of the same keys (or of the runner) on either side of each.
  for (auto i : v.events) {
    int before = 0;
    for (std::size_t j = i; j-- > 0 && before < 3;)
      if (keys.count(events[j].key) || events[j].src == "runner") shown.insert(j), ++before;
    shown.insert(i);
    int after = 0;
    for (std::size_t j = i + 1; j < events.size() && after < 3; ++j)
      if (keys.count(events[j].key) || events[j].src == "runner") shown.insert(j), ++after;
  }
  for (auto j : shown) {
    bool evidence = std::find(v.events.begin(), v.events.end(), j) != v.events.end();
    o << (evidence ? "  > " : "    ") << json::serialize(events[j].raw) << "\n";
  }
  return o.str();
}

std::string workload_line(const check_result& r) {
  return "leases=" + std::to_string(r.leases) + " lost=" + std::to_string(r.losses) +
         " writes_accepted=" + std::to_string(r.writes_accepted) +
         " writes_rejected=" + std::to_string(r.writes_rejected) +
         (r.permits_granted == 0 ? std::string()
                                 : " permits_granted=" + std::to_string(r.permits_granted) +
                                       " most_holders_at_once=" + std::to_string(r.most_permit_holders));
}

std::string summary_line(const check_result& r, const std::string& seed) {
  std::ostringstream o;
  o << "ops=" << r.ops << " faults=" << r.faults_total() << " (";
  bool first = true;
  for (const auto& [kind, n] : r.faults) {
    o << (first ? "" : " ") << kind << "=" << n;
    first = false;
  }
  o << ") violations=" << r.violations.size() << " seed=" << seed;
  return o.str();
}

}  // namespace baton::chaos
