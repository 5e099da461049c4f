// SPDX-License-Identifier: Apache-2.0
#include "shrink.hpp"

#include <algorithm>
#include <sstream>
#include <vector>

namespace baton::sim {

std::string first_violation_kind(const run_result& r) {
  if (r.violations.empty()) return "";
  const std::string& v = r.violations.front();
  const std::string prefix = "VIOLATION ";
  const auto colon = v.find(':');
  if (v.rfind(prefix, 0) != 0 || colon == std::string::npos) return v;
  return v.substr(prefix.size(), colon - prefix.size());
}

namespace {

class shrinker {
 public:
  shrinker(const options& o, const run_result& r, int max_runs)
      : best_{o, r, 0, first_violation_kind(r)}, max_runs_(max_runs) {}

  shrunk run() {
    // A safety violation shows in a prefix of the run; liveness needs the whole run and its healed end.
    if (best_.kind != "no_progress") shorten();
    drop_faults();
    if (best_.kind != "no_progress") shorten();
    return std::move(best_);
  }

 private:
  // Runs `o`; keeps it as the best when it still fails the same way.
  bool fails(const options& o) {
    if (best_.runs >= max_runs_) return false;
    ++best_.runs;
    auto r = sim::run(o);
    if (first_violation_kind(r) != best_.kind) return false;
    best_.o = o;
    best_.r = std::move(r);
    return true;
  }

  // The earliest end, to 10 ms, at which the run still fails: the same run cut short, so a violation whose
  // evidence lies before the end is still there.
  void shorten() {
    using std::chrono::milliseconds;
    milliseconds lo{0};
    milliseconds hi = best_.o.stop.count() > 0 ? best_.o.stop : best_.o.duration;
    while (hi - lo > milliseconds(10)) {
      auto mid = lo + (hi - lo) / 2;
      options o = best_.o;
      o.stop = mid;
      if (fails(o))
        hi = mid;
      else
        lo = mid;
    }
  }

  // Delta debugging over the faults drawn before the end: leave out chunks of them, halving the chunks
  // while none can go.
  void drop_faults() {
    auto kept = [&] {
      std::vector<std::uint64_t> k;
      for (std::uint64_t i = 0; i < best_.r.fault_points; ++i)
        if (!best_.o.skip_faults.contains(i)) k.push_back(i);
      return k;
    };
    std::size_t chunks = 2;
    for (auto k = kept(); !k.empty() && best_.runs < max_runs_; k = kept()) {
      chunks = std::min(chunks, k.size());
      const std::size_t size = (k.size() + chunks - 1) / chunks;
      bool removed = false;
      for (std::size_t from = 0; from < k.size(); from += size) {
        options o = best_.o;
        for (std::size_t i = from; i < std::min(k.size(), from + size); ++i)
          o.skip_faults.insert(k[i]);
        if (fails(o)) {
          removed = true;
          break;
        }
      }
      if (removed) {
        chunks = std::max<std::size_t>(chunks - 1, 2);
      } else if (size == 1) {
        break;  // no single fault can go
      } else {
        chunks *= 2;
      }
    }
  }

  shrunk best_;
  int max_runs_;
};

}  // namespace

shrunk shrink(const options& o, const run_result& r, int max_runs) {
  return shrinker(o, r, max_runs).run();
}

std::string format_ordinals(const std::set<std::uint64_t>& s) {
  std::ostringstream out;
  for (auto it = s.begin(); it != s.end();) {
    auto first = *it, last = first;
    while (++it != s.end() && *it == last + 1)
      last = *it;
    if (out.tellp() > 0) out << ",";
    out << first;
    if (last != first) out << "-" << last;
  }
  return out.str();
}

bool parse_ordinals(const std::string& text, std::set<std::uint64_t>& out) {
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    try {
      std::size_t used = 0;
      const auto first = std::stoull(part, &used);
      auto last = first;
      if (used < part.size()) {
        if (part[used] != '-') return false;
        const std::string rest = part.substr(used + 1);
        last = std::stoull(rest, &used);
        if (used != rest.size() || last < first) return false;
      }
      for (auto i = first; i <= last; ++i)
        out.insert(i);
    } catch (const std::exception&) {
      return false;
    }
  }
  return true;
}

}  // namespace baton::sim
