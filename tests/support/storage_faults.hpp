// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: the storage fault injector (tests/faultfs/faultfs.cpp) for a batond process. Pass
// environment() to batond_process; set() changes the mode while batond runs.

#include "batond_fixture.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace baton::test {

class storage_faults {
 public:
  /// Faults will apply to the files under `data_dir`. Starts in mode `none`.
  explicit storage_faults(std::filesystem::path data_dir);

  /// Replaces the mode (`none`, `stall`, `eio-fsync`, `enospc`, `kill-before-rename`, ... optionally
  /// followed by ` once`; see faultfs.cpp). The next wrapped call in batond obeys it.
  void set(const std::string& mode);

  /// `NAME=value` entries for batond's environment: the preload, the directory, the control file, and
  /// ASAN_OPTIONS allowing a preload in front of the sanitizer runtime (a no-op for a plain build).
  std::vector<std::string> environment() const;

 private:
  std::filesystem::path data_dir_;
  temp_dir control_dir_;
};

/// Path of a built shared library (the build directory's lib/, known at compile time).
std::string lib_path(const std::string& name);

}  // namespace baton::test
