// SPDX-License-Identifier: Apache-2.0
#include "postgres_cluster.hpp"

#include "process.hpp"

#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace baton::test {

namespace fs = std::filesystem;

namespace {

// The user PostgreSQL runs as when the tests run as root.
constexpr const char* unprivileged_user = "nobody";
constexpr const char* install_advice = "install the `postgresql` package (bash deploy/install-deps.sh test)";

bool has_tools(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(dir / "initdb", ec) && fs::exists(dir / "pg_ctl", ec) && fs::exists(dir / "postgres", ec);
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A port the kernel had free a moment ago. PostgreSQL cannot be told to pick one itself (port 0), so a
// start that loses the race for it is retried with another.
unsigned short free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("postgres_cluster: socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("postgres_cluster: could not find a free port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

fs::path postgres_bin_dir() {
  if (const char* env = std::getenv("BATON_POSTGRES_BIN_DIR"); env && *env) {
    if (has_tools(env)) return env;
    throw std::runtime_error(std::string("PostgreSQL server programs (initdb, pg_ctl, postgres) not found in "
                                         "BATON_POSTGRES_BIN_DIR=") +
                             env + ": " + install_advice);
  }
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec))
    if (has_tools(e.path() / "bin")) found.push_back(e.path() / "bin");
  if (found.empty())
    throw std::runtime_error(std::string("PostgreSQL server programs (initdb, pg_ctl, postgres) not found in "
                                         "/usr/lib/postgresql/<version>/bin: ") +
                             install_advice + ", or set BATON_POSTGRES_BIN_DIR");
  // Newest version first: compare the version directories numerically ("9.6" < "15").
  std::sort(found.begin(), found.end(), [](const fs::path& x, const fs::path& y) {
    // strtod: a directory whose name is not a version counts as 0 instead of throwing.
    return std::strtod(x.parent_path().filename().c_str(), nullptr) >
           std::strtod(y.parent_path().filename().c_str(), nullptr);
  });
  return found.front();
}

postgres_cluster::postgres_cluster() : bin_(postgres_bin_dir()) {
  const fs::path data = dir_.path() / "data", log = dir_.path() / "postgres.log";
  // As root: drop to an unprivileged user for initdb and the server, in a directory it owns. setpriv execs
  // the program itself (no lingering parent), and env -C gives it a working directory it can read.
  if (::geteuid() == 0) {
    const passwd* pw = ::getpwnam(unprivileged_user);
    if (!pw)
      throw std::runtime_error(std::string("postgres_cluster: running as root and there is no user ") +
                               unprivileged_user + " to run PostgreSQL as");
    if (::chown(dir_.path().c_str(), pw->pw_uid, pw->pw_gid) != 0)
      throw std::runtime_error("postgres_cluster: cannot chown " + dir_.path().string() + " to " +
                               unprivileged_user);
    as_user_ = {"/usr/bin/setpriv",
                "--reuid=" + std::to_string(pw->pw_uid),
                "--regid=" + std::to_string(pw->pw_gid),
                "--clear-groups",
                "--",
                "/usr/bin/env",
                "-C",
                dir_.path().string()};
  }
  auto must = [&](std::vector<std::string> argv, const char* what) {
    auto r = run_tool(std::move(argv));
    if (r.code != 0)
      throw std::runtime_error(std::string("postgres_cluster: ") + what + " failed (status " +
                               std::to_string(r.code) + "):\n" + r.out + r.err + "\nserver log:\n" +
                               read_file(log));
  };
  must({(bin_ / "initdb").string(), "-D", data.string(), "-U", "baton", "-A", "trust", "-E", "UTF8",
        "--locale=C", "--no-sync", "--no-instructions"},
       "initdb");
  for (int attempt = 1;; ++attempt) {
    port_ = free_port();
    // fsync off: the cluster is thrown away, and the tests need it fast, not durable.
    const std::string server_opts = "-c listen_addresses=127.0.0.1 -c port=" + std::to_string(port_) +
                                    " -c unix_socket_directories=" + dir_.path().string() +
                                    " -c fsync=off -c synchronous_commit=off -c full_page_writes=off";
    try {
      must({(bin_ / "pg_ctl").string(), "-D", data.string(), "-l", log.string(), "-o", server_opts, "-w",
            "-t", "60", "start"},
           "pg_ctl start");
      break;
    } catch (const std::exception&) {
      stop();
      // Another process took the port between free_port() and the server's bind: try another one.
      if (attempt < 5 && read_file(log).find("could not bind") != std::string::npos) continue;
      throw;
    }
  }
}

postgres_cluster::~postgres_cluster() {
  stop();
}

finished_process postgres_cluster::run_tool(std::vector<std::string> argv) const {
  argv.insert(argv.begin(), as_user_.begin(), as_user_.end());
  return run_to_end(std::move(argv), (dir_.path() / "tool.stderr").string(), std::chrono::seconds(120));
}

void postgres_cluster::stop() noexcept {
  const fs::path data = dir_.path() / "data";
  std::error_code ec;
  if (!fs::exists(data / "postmaster.pid", ec)) return;  // not running
  int pid = -1;
  std::istringstream(read_file(data / "postmaster.pid")) >> pid;
  try {
    if (run_tool(
            {(bin_ / "pg_ctl").string(), "-D", data.string(), "-m", "immediate", "-w", "-t", "30", "stop"})
            .code == 0)
      return;
    std::fprintf(stderr, "postgres_cluster: pg_ctl stop failed; killing the postmaster (pid %d)\n", pid);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "postgres_cluster: pg_ctl stop: %s; killing the postmaster (pid %d)\n", e.what(),
                 pid);
  }
  // Never leave a server behind; its backends exit when they see the postmaster gone.
  if (pid > 0) ::kill(pid, SIGKILL);
}

std::string postgres_cluster::conninfo() const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " user=baton dbname=postgres connect_timeout=10";
}

}  // namespace baton::test
