// SPDX-License-Identifier: Apache-2.0
// The optional features a server advertises, and the rule that a feature's check needs them
// (advertised_features.hpp).

#include "advertised_features.hpp"

#include "conformance_check.hpp"

#include <algorithm>
#include <utility>

namespace baton::cli {

advertised_features advertised_features::read(int status, const boost::json::value& body,
                                              std::string described) {
  advertised_features a;
  if (status == 404) {
    a.unknown_.clear();
    return a;
  }
  if (status != 200) {
    a.unknown_ = "GET /v1/capabilities answered " + std::move(described);
    return a;
  }
  a.unknown_.clear();
  a.endpoint_ = true;
  if (const auto* o = body.if_object())
    if (const auto* f = o->if_contains("features"); f && f->is_array())
      for (const auto& name : f->get_array())
        if (name.is_string()) a.features_.emplace_back(name.get_string());
  return a;
}

bool advertised_features::has(std::string_view feature) const {
  return std::find(features_.begin(), features_.end(), feature) != features_.end();
}

void advertised_features::require(std::string_view feature) const {
  const std::string name(feature);
  if (!known())
    throw check_failed("whether the server has " + name + " is unknown: " + unknown_ +
                       " (only a 404 says a server has no optional features)");
  if (has(feature)) return;
  throw check_skipped(not_advertised,
                      endpoint_ ? name + " is not among the features of GET /v1/capabilities"
                                : name +
                                      " (GET /v1/capabilities is 404: protocol version 1, no optional "
                                      "features)",
                      name);
}

}  // namespace baton::cli
