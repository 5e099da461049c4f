// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: a real etcd cluster (Debian's etcd-server, 3.4+) on loopback, each member with ephemeral
// client and peer ports and its own data directory. Members can be stopped, killed and restarted on the same
// ports and data; the destructor kills every member that still runs.

#include "batond_fixture.hpp"

#include <boost/beast/core/detail/base64.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace baton::test {

/// One member's view of the cluster, from POST /v3/maintenance/status.
struct etcd_member_status {
  std::uint64_t member_id = 0;
  std::uint64_t leader = 0;  // 0 while the member knows of no leader
  std::uint64_t raft_term = 0;
};

/// A loopback TCP port the kernel just handed out and that is free again (for servers that cannot pick their
/// own and report it, like etcd; the small race with another process taking it is accepted).
unsigned short ephemeral_port();

class etcd_cluster {
 public:
  /// Starts `members` members and waits (at most `bound`) until every one reports the same leader.
  /// `extra_args` are added to every member's command line. Throws std::runtime_error when the cluster does
  /// not form in time.
  explicit etcd_cluster(std::size_t members = 3, std::chrono::seconds bound = std::chrono::seconds(30),
                        std::vector<std::string> extra_args = {});
  ~etcd_cluster();
  etcd_cluster(const etcd_cluster&) = delete;
  etcd_cluster& operator=(const etcd_cluster&) = delete;

  std::size_t size() const { return members_.size(); }
  unsigned short client_port(std::size_t i) const { return members_[i].client_port; }
  /// `etcd://127.0.0.1:a,127.0.0.1:b,...` naming every member (running or not), in member order.
  std::string url() const;
  /// The member's log file (etcd's stderr, appended to across restarts; removed with the cluster).
  std::filesystem::path log_path(std::size_t i) const;

  bool running(std::size_t i) const;
  /// The member's status, or nothing when it does not answer within `timeout`.
  std::optional<etcd_member_status> status(std::size_t i,
                                           std::chrono::milliseconds timeout = std::chrono::seconds(2)) const;
  /// Index of the leader once every running member agrees on one that runs; waits at most `bound`, then
  /// throws std::runtime_error.
  std::size_t leader(std::chrono::seconds bound = std::chrono::seconds(90)) const;
  /// Waits (at most `bound`) until every running member answers and agrees on a running leader.
  void wait_healthy(std::chrono::seconds bound = std::chrono::seconds(90)) const { leader(bound); }

  /// SIGTERM and wait for the exit (SIGKILL after 30 s).
  void stop(std::size_t i);
  /// SIGKILL: a crash, nothing flushed beyond what etcd already synced.
  void kill(std::size_t i);
  /// Starts a stopped member again on its ports and data directory; does not wait for the cluster.
  void start(std::size_t i);
  /// SIGSTOP: the member hangs with its sockets open (connections are accepted by the kernel, nothing is
  /// answered) while the others go on. A paused member counts as not running for status() and leader().
  void pause(std::size_t i);
  /// SIGCONT after pause().
  void resume(std::size_t i);
  bool paused(std::size_t i) const { return members_[i].paused; }
  /// The member's process id (for a fault injector that attaches to it, such as strace); -1 when stopped.
  int pid(std::size_t i) const { return running(i) ? members_[i].proc->pid() : -1; }
  void stop_all();
  /// Starts every stopped member and waits until the cluster is healthy again.
  void start_all(std::chrono::seconds bound = std::chrono::seconds(30));

 private:
  struct member {
    std::string name;
    unsigned short client_port = 0;
    unsigned short peer_port = 0;
    bool paused = false;
    std::unique_ptr<child_process> proc;
  };
  temp_dir dir_;
  std::string initial_cluster_;
  std::vector<std::string> extra_args_;
  std::vector<member> members_;
};

/// `s` in base64, as etcd's JSON gateway (/v3/kv/...) takes and gives keys and values.
inline std::string etcd_b64(const std::string& s) {
  std::string out(boost::beast::detail::base64::encoded_size(s.size()), '\0');
  out.resize(boost::beast::detail::base64::encode(out.data(), s.data(), s.size()));
  return out;
}

}  // namespace baton::test
