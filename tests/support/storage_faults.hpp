// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: the storage fault injector (tests/faultfs/faultfs.cpp) for a batond process. Pass
// environment() to batond_process; set() changes the mode while batond runs. With recording on, the
// injector notes what every sync made durable, and power_cut_image() builds what a power cut at that
// moment would leave of the data directory.

#include "batond_fixture.hpp"

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace baton::test {

class storage_faults {
 public:
  /// Faults will apply to the files under `data_dir`. Starts in mode `none`. With `record_syncs`, every
  /// process started with environment() records what its syncs made durable (one record across processes:
  /// the first takes the directory as it finds it as durable).
  explicit storage_faults(std::filesystem::path data_dir, bool record_syncs = false);

  /// Whether a sector of a file's unsynced tail survives a power cut: `index` of `count` sectors of 512
  /// bytes written after the file's last sync.
  using sector_survives = std::function<bool(std::size_t index, std::size_t count)>;

  /// Writes into `image` (created, or emptied) what a power cut now would leave of the data directory,
  /// from the record: the names of the directory's last synced listing, each with the content of its file's
  /// last sync (empty if it never had one); names created or removed since are as they were. With
  /// `survives`, each file whose current content extends its synced content keeps the sectors of the
  /// extension it selects, zeros in place of the others, up to the last kept one. Requires record_syncs.
  void power_cut_image(const std::filesystem::path& image, const sector_survives& survives = {}) const;

  /// Replaces the mode (`none`, `stall`, `eio-fsync`, `enospc`, `kill-before-rename`, ... optionally
  /// followed by ` once`; see faultfs.cpp). The next wrapped call in batond obeys it.
  void set(const std::string& mode);

  /// `NAME=value` entries for batond's environment: the preload, the directory, the control file, and
  /// ASAN_OPTIONS allowing a preload in front of the sanitizer runtime (a no-op for a plain build).
  std::vector<std::string> environment() const;

 private:
  std::filesystem::path data_dir_;
  temp_dir control_dir_;
  bool record_syncs_;
};

/// Path of a built shared library (the build directory's lib/, known at compile time).
std::string lib_path(const std::string& name);

}  // namespace baton::test
