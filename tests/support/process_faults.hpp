// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: the environment that preloads the process fault injector (tests/faultproc/faultproc.cpp) into
// baton exec or baton-agent, with one of its modes.

#include "storage_faults.hpp"  // lib_path()

#include <cstdlib>
#include <string>
#include <vector>

namespace baton::test {

/// `NAME=value` entries for the process's environment: the preload, BATON_FAULTPROC=`mode`, and ASAN_OPTIONS
/// allowing a preload in front of the sanitizer runtime (a no-op for a plain build).
inline std::vector<std::string> process_faults(const std::string& mode) {
  std::string asan = "verify_asan_link_order=0";
  if (const char* inherited = std::getenv("ASAN_OPTIONS"); inherited && *inherited)
    asan = std::string(inherited) + ":" + asan;
  return {"LD_PRELOAD=" + lib_path("libbaton-faultproc.so"), "BATON_FAULTPROC=" + mode,
          "ASAN_OPTIONS=" + asan};
}

}  // namespace baton::test
