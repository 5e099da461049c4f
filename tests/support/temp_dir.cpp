// SPDX-License-Identifier: Apache-2.0
#include "temp_dir.hpp"

#include <stdlib.h>

#include <stdexcept>
#include <string>
#include <system_error>

namespace baton::test {

temp_dir::temp_dir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "baton-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

temp_dir::~temp_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace baton::test
