// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helpers: lease options in one line, and a client configuration with quick retries.

#include "baton/config.hpp"

#include <string>
#include <utility>

namespace baton::test {

inline baton::lease_options lease_opts(baton::milliseconds ttl,
                                       baton::milliseconds every = baton::milliseconds{0},
                                       baton::milliseconds margin = baton::milliseconds{0}) {
  baton::lease_options o;
  o.ttl = ttl;
  o.renew_every = every;
  o.safety_margin = margin;
  return o;
}

/// A client for tests against a server in the same process (baton::testing::memory_backend): requests
/// time out after 2 s, and retries back off from 10 to 50 ms.
inline baton::client_config quick_client_config(std::string identity) {
  baton::client_config cfg;
  cfg.identity = std::move(identity);
  cfg.request_timeout = std::chrono::milliseconds(2000);
  cfg.retry.initial_backoff = std::chrono::milliseconds(10);
  cfg.retry.max_backoff = std::chrono::milliseconds(50);
  return cfg;
}

}  // namespace baton::test
