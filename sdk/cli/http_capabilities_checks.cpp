// SPDX-License-Identifier: Apache-2.0
// `baton conformance` over HTTP: GET /v1/capabilities, the optional features a server advertises.

#include "http_checks.hpp"

#include <algorithm>

namespace baton::cli::http_conformance {
namespace {

// Optional features a server may advertise, and the check that exercises each.
struct feature_check {
  const char* feature;
  const char* check;
};
constexpr feature_check known_features[] = {
    {"lease_values", "a lease's value is published, replaced and kept"},
    {"renew_batch", "renew batch"},
    {"proclaim", "proclaim"},
    {"lock_record", "lock record"},
    {"acquire_queue", "queued acquire"},
    {"list_locks", "list"},
    {"break_lease", "break"},
    {"lock_delay", "lock-delay"},
};

// GET /v1/capabilities: optional itself (a 404 is a version 1 server with no optional features). When
// answered, it must have the documented shape; each advertised feature this baton knows has checks of its
// own, which run only when it is advertised.
void capabilities(const suite& s) {
  auto c = s.open();
  auto r = c.request(http::verb::get, "/v1/capabilities", {}, s.timeout());
  if (r.status == 404)
    throw check_skipped(not_advertised,
                        "GET /v1/capabilities is 404: protocol version 1, no optional features",
                        "capabilities");
  expect(r.status == 200,
         "GET /v1/capabilities: expected 200, or 404 when not advertised; got " + r.describe());
  const auto* o = r.json.if_object();
  expect(o != nullptr, "GET /v1/capabilities: the body is not a JSON object: " + r.describe());
  const auto version = r.num("protocol_version");
  expect(version && *version >= 1, "GET /v1/capabilities: no integer protocol_version >= 1: " + r.describe());
  const auto* features = o->if_contains("features");
  expect(features && features->is_array(), "GET /v1/capabilities: no \"features\" array: " + r.describe());
  std::string checked, unknown;
  for (const auto& f : features->get_array()) {
    expect(f.is_string(), "GET /v1/capabilities: a feature that is not a string: " + r.describe());
    const std::string name(f.get_string());
    auto known = std::find_if(std::begin(known_features), std::end(known_features),
                              [&](const feature_check& k) { return name == k.feature; });
    auto& list = known != std::end(known_features) ? checked : unknown;
    list += (list.empty() ? "" : ", ") + name;
  }
  std::string note = "protocol_version " + std::to_string(*version);
  if (!checked.empty()) note += "; checked: " + checked;
  if (!unknown.empty()) note += "; not known to this baton, not checked: " + unknown;
  s.note(note);
}

constexpr check group[] = {
    {"capabilities", capabilities},
};

}  // namespace

std::span<const check> capabilities_checks() {
  return group;
}

}  // namespace baton::cli::http_conformance
