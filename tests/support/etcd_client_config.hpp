// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: the SDK's configuration the etcd tests start from.

#include "baton/config.hpp"

#include <chrono>
#include <string>

namespace baton::test {

/// etcd at `url` (etcd://...), `identity`, and a 2 s request timeout.
inline client_config etcd_client_config(const std::string& url, const std::string& identity) {
  client_config c;
  c.server_url = url;
  c.identity = identity;
  c.request_timeout = std::chrono::milliseconds(2000);
  return c;
}

}  // namespace baton::test
