// SPDX-License-Identifier: Apache-2.0
#include "group_state.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace baton::agent {
namespace json = boost::json;

namespace {

constexpr int format_version = 1;

template <class Duration>
std::optional<date::sys_time<Duration>> parse_time(std::string_view text) {
  std::istringstream in{std::string(text)};
  date::sys_time<Duration> t;
  in >> date::parse("%FT%TZ", t);
  if (in.fail()) return std::nullopt;
  return t;
}

std::optional<run_outcome> outcome_from(std::string_view text) {
  for (auto o : {run_outcome::succeeded, run_outcome::failed, run_outcome::timed_out, run_outcome::stopped,
                 run_outcome::spawn_failed, run_outcome::replaced, run_outcome::lost})
    if (to_string(o) == text) return o;
  return std::nullopt;
}

const json::string* string_at(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v ? v->if_string() : nullptr;
}

template <class Int>
std::optional<Int> number_at(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (!v || !(v->is_int64() || v->is_uint64())) return std::nullopt;
  boost::system::error_code ec;
  const auto n = v->to_number<Int>(ec);
  if (ec) return std::nullopt;
  return n;
}

bool is_failure(run_outcome o) {
  return o == run_outcome::failed || o == run_outcome::timed_out || o == run_outcome::spawn_failed;
}

json::object encode_object(const group_state& s) {
  json::object jobs;
  for (const auto& [name, j] : s.jobs) {
    json::object o;
    if (j.decided) o["decided"] = rfc3339(*j.decided);
    // Each job's newest run keeps its output; older ones only their outcome (the record stays small).
    json::array runs;
    for (const auto& r : j.runs) {
      auto o = run_json(r);
      if (!runs.empty()) o.erase("output");
      runs.push_back(std::move(o));
    }
    o["runs"] = std::move(runs);
    if (j.last_success) o["last_success"] = rfc3339_ms(*j.last_success);
    o["consecutive_failures"] = j.consecutive_failures;
    jobs[name] = std::move(o);
  }
  json::object out{
      {"version", format_version}, {"leader", s.leader}, {"token", s.token}, {"handover", s.handover}};
  if (s.suspended) {
    json::array names;
    for (const auto& n : *s.suspended)
      names.push_back(json::string(n));
    out["suspended"] = std::move(names);
  }
  out["jobs"] = std::move(jobs);
  return out;
}

}  // namespace

std::string rfc3339_ms(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::floor<std::chrono::milliseconds>(t);
  const auto s = std::chrono::floor<std::chrono::seconds>(ms);
  auto text = rfc3339(s);  // ...Z
  char frac[8];
  std::snprintf(frac, sizeof frac, ".%03d", static_cast<int>((ms - s).count()));
  text.insert(text.size() - 1, frac);
  return text;
}

json::object run_json(const run_record& r) {
  return {{"run_id", r.run_id},
          {"trigger", r.manual ? "manual" : "schedule"},
          {"attempt", r.attempt},
          {"slot", rfc3339(r.slot)},
          {"started_at", rfc3339_ms(r.started)},
          {"duration_ms", r.duration.count()},
          {"outcome", to_string(r.outcome)},
          {"status", r.status},
          {"detail", r.detail},
          {"token", r.token},
          {"key", r.lock_key},
          {"identity", r.identity},
          {"output", json::object{{"stdout", r.stdout_tail},
                                  {"stderr", r.stderr_tail},
                                  {"stdout_truncated", r.stdout_cut},
                                  {"stderr_truncated", r.stderr_cut}}}};
}

std::optional<run_record> run_from_json(const json::value& v) {
  const auto* o = v.if_object();
  if (!o) return std::nullopt;
  run_record r;
  const auto* id = string_at(*o, "run_id");
  const auto* trigger = string_at(*o, "trigger");
  const auto* slot = string_at(*o, "slot");
  const auto* started = string_at(*o, "started_at");
  const auto* outcome = string_at(*o, "outcome");
  const auto* detail = string_at(*o, "detail");
  const auto* key = string_at(*o, "key");
  const auto* identity = string_at(*o, "identity");
  const auto attempt = number_at<int>(*o, "attempt");
  const auto duration = number_at<std::int64_t>(*o, "duration_ms");
  const auto status = number_at<int>(*o, "status");
  const auto token = number_at<std::uint64_t>(*o, "token");
  if (!id || !trigger || !slot || !started || !outcome || !detail || !key || !identity || !attempt ||
      !duration || !status || !token)
    return std::nullopt;
  const auto slot_at = parse_time<std::chrono::seconds>(*slot);
  const auto started_at = parse_time<std::chrono::milliseconds>(*started);
  const auto what = outcome_from(*outcome);
  if (!slot_at || !started_at || !what) return std::nullopt;
  r.run_id = std::string(*id);
  r.manual = *trigger == "manual";
  r.attempt = *attempt;
  r.slot = *slot_at;
  r.started = *started_at;
  r.duration = std::chrono::milliseconds(*duration);
  r.outcome = *what;
  r.status = *status;
  r.detail = std::string(*detail);
  r.token = *token;
  r.lock_key = std::string(*key);
  r.identity = std::string(*identity);
  if (const auto* out = o->if_contains("output"); out && out->is_object()) {
    const auto& oo = out->get_object();
    if (const auto* t = string_at(oo, "stdout")) r.stdout_tail = std::string(*t);
    if (const auto* t = string_at(oo, "stderr")) r.stderr_tail = std::string(*t);
    if (const auto* b = oo.if_contains("stdout_truncated"); b && b->is_bool()) r.stdout_cut = b->get_bool();
    if (const auto* b = oo.if_contains("stderr_truncated"); b && b->is_bool()) r.stderr_cut = b->get_bool();
  }
  return r;
}

std::string encode(const group_state& s, std::size_t max_bytes) {
  auto text = json::serialize(encode_object(s));
  if (text.size() <= max_bytes) return text;
  // Drop the oldest run of the job with the most runs kept, until it fits: every job keeps its latest runs
  // the longest.
  group_state trimmed = s;
  for (;;) {
    auto most = trimmed.jobs.end();
    for (auto it = trimmed.jobs.begin(); it != trimmed.jobs.end(); ++it)
      if (!it->second.runs.empty() &&
          (most == trimmed.jobs.end() || it->second.runs.size() > most->second.runs.size()))
        most = it;
    if (most == trimmed.jobs.end()) return text;  // nothing left to drop: the caller's limit is too small
    most->second.runs.pop_back();
    text = json::serialize(encode_object(trimmed));
    if (text.size() <= max_bytes) return text;
  }
}

std::optional<group_state> decode(std::string_view text, std::string& error) {
  boost::system::error_code ec;
  const auto v = json::parse(text, ec);
  const auto* o = ec ? nullptr : v.if_object();
  if (!o) {
    error = "not a JSON object";
    return std::nullopt;
  }
  if (number_at<int>(*o, "version") != format_version) {
    error = "not a version 1 group state";
    return std::nullopt;
  }
  group_state s;
  if (const auto* leader = string_at(*o, "leader")) s.leader = std::string(*leader);
  s.token = number_at<std::uint64_t>(*o, "token").value_or(0);
  if (const auto* h = o->if_contains("handover"); h && h->is_bool()) s.handover = h->get_bool();
  if (const auto* names = o->if_contains("suspended")) {
    const auto* a = names->if_array();
    if (!a) {
      error = "\"suspended\" is not an array";
      return std::nullopt;
    }
    s.suspended.emplace();
    for (const auto& n : *a)
      if (const auto* str = n.if_string()) s.suspended->insert(std::string(*str));
  }
  const auto* jobs_value = o->if_contains("jobs");
  const auto* jobs = jobs_value ? jobs_value->if_object() : nullptr;
  if (!jobs) {
    error = "no \"jobs\" object";
    return std::nullopt;
  }
  for (const auto& [name, value] : *jobs) {
    const auto* j = value.if_object();
    if (!j) continue;
    auto& out = s.jobs[std::string(name)];
    if (const auto* d = string_at(*j, "decided")) out.decided = parse_time<std::chrono::seconds>(*d);
    if (const auto* ok = string_at(*j, "last_success"))
      if (const auto t = parse_time<std::chrono::milliseconds>(*ok)) out.last_success = *t;
    out.consecutive_failures = number_at<std::uint64_t>(*j, "consecutive_failures").value_or(0);
    if (const auto* runs = j->if_contains("runs"); runs && runs->is_array())
      for (const auto& r : runs->get_array())
        if (auto run = run_from_json(r)) out.runs.push_back(std::move(*run));
  }
  return s;
}

void decide(group_state& s, const std::string& job, sys_seconds slot) {
  auto& d = s.jobs[job].decided;
  if (!d || slot > *d) d = slot;
}

void add_run(group_state& s, const std::string& job, run_record run, std::size_t keep) {
  auto& j = s.jobs[job];
  j.runs.push_front(std::move(run));
  while (j.runs.size() > keep)
    j.runs.pop_back();
}

void finish_slot(group_state& s, const std::string& job, run_outcome outcome,
                 std::chrono::system_clock::time_point ended) {
  auto& j = s.jobs[job];
  if (outcome == run_outcome::succeeded) {
    j.consecutive_failures = 0;
    if (!j.last_success || ended > *j.last_success) j.last_success = ended;
  } else if (is_failure(outcome)) {
    ++j.consecutive_failures;
  }
}

std::map<std::string, sys_seconds> decided_slots(const group_state& s) {
  std::map<std::string, sys_seconds> out;
  for (const auto& [name, j] : s.jobs)
    if (j.decided) out[name] = *j.decided;
  return out;
}

}  // namespace baton::agent
