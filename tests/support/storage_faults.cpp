// SPDX-License-Identifier: Apache-2.0
#include "storage_faults.hpp"

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#ifndef BATON_LIB_DIR
#error "BATON_LIB_DIR must name the directory holding the built shared libraries"
#endif

namespace baton::test {

std::string lib_path(const std::string& name) {
  return std::string(BATON_LIB_DIR) + "/" + name;
}

storage_faults::storage_faults(std::filesystem::path data_dir) : data_dir_(std::move(data_dir)) {
  std::filesystem::create_directories(data_dir_);  // the library resolves the directory when it loads
  set("none");
}

void storage_faults::set(const std::string& mode) {
  // Written aside and renamed over: the library sees either the old mode or the new one, never half.
  auto control = control_dir_.path() / "control";
  auto next = control_dir_.path() / "control.next";
  {
    std::ofstream out(next, std::ios::trunc);
    out << mode << "\n";
    if (!out.flush()) throw std::runtime_error("cannot write " + next.string());
  }
  std::filesystem::rename(next, control);
}

std::vector<std::string> storage_faults::environment() const {
  std::string asan = "verify_asan_link_order=0";
  if (const char* inherited = std::getenv("ASAN_OPTIONS"); inherited && *inherited)
    asan = std::string(inherited) + ":" + asan;
  return {"LD_PRELOAD=" + lib_path("libbaton-faultfs.so"), "BATON_FAULTFS_DIR=" + data_dir_.string(),
          "BATON_FAULTFS_CONTROL=" + (control_dir_.path() / "control").string(), "ASAN_OPTIONS=" + asan};
}

}  // namespace baton::test
