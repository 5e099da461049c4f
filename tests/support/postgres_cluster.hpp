// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: a throwaway PostgreSQL cluster (initdb + pg_ctl) in a temporary directory, listening only on
// 127.0.0.1 on a free port, stopped and removed when the object goes away.

#include "batond_fixture.hpp"
#include "process.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace baton::test {

/// The directory holding initdb and pg_ctl: $BATON_POSTGRES_BIN_DIR when set, else the newest
/// /usr/lib/postgresql/<version>/bin (Debian's layout). Throws std::runtime_error saying what to install when
/// there is none: a test that needs PostgreSQL fails rather than skips.
std::filesystem::path postgres_bin_dir();

class postgres_cluster {
 public:
  /// Runs initdb (trust authentication, superuser `baton`, no fsync) and starts the server with pg_ctl,
  /// waiting until it accepts connections. As root, both run as `nobody` (PostgreSQL refuses to run as root)
  /// and the directory is handed to that user. Throws std::runtime_error with the tool's output and the
  /// server log when a step fails; what was started is stopped first.
  postgres_cluster();
  /// Stops the server (pg_ctl stop -m immediate; SIGKILL to the postmaster if that fails), then removes the
  /// directory.
  ~postgres_cluster();
  postgres_cluster(const postgres_cluster&) = delete;
  postgres_cluster& operator=(const postgres_cluster&) = delete;

  unsigned short port() const { return port_; }
  /// A libpq connection string for the `postgres` database as `baton`.
  std::string conninfo() const;

 private:
  // Runs a PostgreSQL program to its end, as the unprivileged user when needed.
  finished_process run_tool(std::vector<std::string> argv) const;
  void stop() noexcept;

  temp_dir dir_;
  std::filesystem::path bin_;
  std::vector<std::string> as_user_;  // the command prefix that drops root, or empty
  unsigned short port_ = 0;
};

}  // namespace baton::test
