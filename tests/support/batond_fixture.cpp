// SPDX-License-Identifier: Apache-2.0
#include "batond_fixture.hpp"

#include <signal.h>
#include <stdlib.h>

#include <stdexcept>

#ifndef BATON_BIN_DIR
#error "BATON_BIN_DIR must name the directory holding the built executables"
#endif

namespace baton::test {

std::string bin_path(const std::string& name) {
  const char* other = std::getenv("BATON_TEST_BIN_DIR");
  return std::string(other && *other ? other : BATON_BIN_DIR) + "/" + name;
}

batond_process::batond_process(const std::filesystem::path& data_dir, std::vector<std::string> extra_args,
                               unsigned short port, std::string stderr_path,
                               std::vector<std::string> extra_env) {
  std::vector<std::string> argv{
      bin_path("batond"), "--listen", "127.0.0.1:" + std::to_string(port), "--data-dir", data_dir.string(),
      "--log-level",      "warn"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  proc_ = std::make_unique<child_process>(std::move(argv), std::move(stderr_path), std::move(extra_env));
  std::string line = proc_->read_line(std::chrono::seconds(30));
  const std::string prefix = "batond listening on ";
  if (line.rfind(prefix, 0) != 0) throw std::runtime_error("unexpected first line from batond: " + line);
  port_ = static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1)));
}

batond_process::~batond_process() = default;

void batond_process::kill9() {
  proc_->signal(SIGKILL);
  proc_->wait(std::chrono::seconds(30));
}

int batond_process::terminate() {
  proc_->signal(SIGTERM);
  return proc_->wait(std::chrono::seconds(30));
}

}  // namespace baton::test
