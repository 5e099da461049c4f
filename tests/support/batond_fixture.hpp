// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: a real batond process on an ephemeral loopback port with its own data directory.

#include "http_client.hpp"
#include "process.hpp"
#include "temp_dir.hpp"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace baton::test {

class batond_process {
 public:
  /// Starts batond on 127.0.0.1:0 with `data_dir` and waits for "batond listening on ...". Its stderr
  /// (the log) is inherited, or written to `stderr_path` when given. `extra_env` (`NAME=value` entries) is
  /// added to its environment.
  explicit batond_process(const std::filesystem::path& data_dir, std::vector<std::string> extra_args = {},
                          unsigned short port = 0, std::string stderr_path = {},
                          std::vector<std::string> extra_env = {});
  ~batond_process();

  unsigned short port() const { return port_; }
  child_process& process() { return *proc_; }
  http_client client() const { return http_client(port_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// SIGKILL, no chance to flush (a crash).
  void kill9();
  /// SIGTERM and wait; returns the exit status.
  int terminate();

 private:
  std::unique_ptr<child_process> proc_;
  unsigned short port_ = 0;
};

/// Path of a built executable: in the build directory's bin/, known at compile time, or in the directory
/// named by the environment variable BATON_TEST_BIN_DIR (to run the tests against another build).
std::string bin_path(const std::string& name);

}  // namespace baton::test
