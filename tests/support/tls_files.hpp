// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: the SDK's TLS settings in one line (for tests that link baton::sdk).

#include "baton/config.hpp"

#include <string>

namespace baton::test {

inline baton::tls_config tls_files(std::string ca, std::string cert = {}, std::string key = {}) {
  baton::tls_config t;
  t.ca_file = std::move(ca);
  t.cert_file = std::move(cert);
  t.key_file = std::move(key);
  return t;
}

}  // namespace baton::test
