// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: a bearer token as batond's --tokens-file holds it.

#include <openssl/evp.h>

#include <string>
#include <string_view>

namespace baton::test {

/// `sha256:<hex>` of `token`, as `printf %s TOKEN | sha256sum` gives it.
inline std::string hash_of(std::string_view token) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(token.data(), token.size(), d, &n, EVP_sha256(), nullptr);
  std::string s = "sha256:";
  static const char* digits = "0123456789abcdef";
  for (unsigned i = 0; i < n; ++i) {
    s.push_back(digits[d[i] >> 4]);
    s.push_back(digits[d[i] & 15]);
  }
  return s;
}

}  // namespace baton::test
