// SPDX-License-Identifier: Apache-2.0
// `baton conformance` over HTTP: the groups of checks in the order they run, and what more than one group
// uses. Each check runs on keys of its own (conformance/<random>/<check>) and throws check_failed with the
// reason.
//
// Each check's counterpart through baton::backend, where the backend's interface can express it, has the
// same name in backend_conformance.cpp's tables (on_backend::find). What only the wire shows has none and is
// skipped in that mode.

#include "http_checks.hpp"

#include <vector>

namespace baton::cli::http_conformance {

void expect_lost(const reply& r, std::initializer_list<const char*> reasons, const std::string& what) {
  suite::expect_error(r, 409, "lost", what);
  const auto reason = r.str("reason");
  bool ok = false;
  for (auto* x : reasons)
    ok = ok || reason == x;
  std::string allowed;
  for (auto* x : reasons)
    allowed += (allowed.empty() ? "" : " or ") + std::string(x);
  expect(ok, what + ": reason should be " + allowed + ", got " + r.describe());
}

reply bad(const suite& s, http::verb method, const std::string& target, std::string body) {
  auto c = s.open();
  return c.request(method, target, std::move(body), s.timeout());
}

std::span<const check> checks() {
  static const std::vector<check> all = [] {
    std::vector<check> v;
    for (auto group :
         {lease_checks(), capabilities_checks(), renew_batch_checks(), proclaim_checks(), record_checks(),
          queue_checks(), operator_checks(), lock_delay_checks(), semaphore_checks(), bad_input_checks()})
      v.insert(v.end(), group.begin(), group.end());
    return v;
  }();
  return all;
}

}  // namespace baton::cli::http_conformance
