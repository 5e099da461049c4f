// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: a fresh, empty temporary directory removed when the object goes away.

#include <filesystem>

namespace baton::test {

class temp_dir {
 public:
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace baton::test
