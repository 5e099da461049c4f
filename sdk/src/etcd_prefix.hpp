// SPDX-License-Identifier: Apache-2.0
#pragma once
// The etcd backend's key prefix, as written after the members of an etcd:// URL. Private to the SDK.

#include <string>
#include <string_view>

namespace baton::detail {

/// The prefix every lock key is stored under in etcd, from the URL's path after the members (`path`: what
/// follows the first '/' after the members, empty when the URL has none). One rule (docs/sdk.md, etcd):
/// the prefix ends with a '/', added when the path lacks one, so `etcd://h/baton/locks` and
/// `etcd://h/baton/locks/` name the same keys; an empty path (`etcd://h`, `etcd://h/`) is the default,
/// `baton/locks/`. Nothing else changes: a path that already ends with '/' (`a//`, `/abs/`) is kept as
/// written, so the keys of existing prefixes written that way stay where they are.
inline std::string etcd_key_prefix(std::string_view path) {
  if (path.empty()) return "baton/locks/";
  std::string out(path);
  if (out.back() != '/') out.push_back('/');
  return out;
}

}  // namespace baton::detail
