// SPDX-License-Identifier: Apache-2.0
#pragma once
// What GET /v1/capabilities tells `baton conformance` about a server's optional features (docs/protocol.md,
// "Versions and features"), and the rule the checks follow: a check of an optional feature runs only when the
// server advertises that feature, and is skipped as "not advertised" otherwise. A 404 is a server from before
// the endpoint: protocol version 1 with no optional features. Any other failure says nothing about the
// features, so a feature's check fails rather than letting a server that errs here pass unchecked. Pure (no
// I/O), so the rule is tested without a server: tests/unit/sdk/test_cli_advertised_features.cpp.

#include <boost/json/value.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace baton::cli {

// The skip reason of a check whose feature the server does not advertise.
inline constexpr const char* not_advertised = "not advertised";

class advertised_features {
 public:
  // Nothing asked yet: known() is false.
  advertised_features() = default;

  // An answer to GET /v1/capabilities: its status (0 when none came), its body as JSON (null when it is not),
  // and how it reads in a message. A 200 advertises the strings of its "features" array (a 200 of another
  // shape advertises nothing; the capabilities check fails it); a 404, nothing.
  static advertised_features read(int status, const boost::json::value& body, std::string described);

  // Whether the answer settled what the server has (a 200 or a 404); asking again may tell more otherwise.
  bool known() const { return unknown_.empty(); }
  // Whether the server advertises `feature`: false also while not known().
  bool has(std::string_view feature) const;
  // The rule for a check of `feature`: returns when the server advertises it; throws check_skipped
  // (not_advertised, about `feature`) when it does not, and check_failed when the answer cannot tell.
  void require(std::string_view feature) const;

 private:
  std::vector<std::string> features_;
  bool endpoint_ = false;                     // 200: the server has GET /v1/capabilities
  std::string unknown_ = "it was not asked";  // why the answer tells nothing; empty once known
};

}  // namespace baton::cli
