// SPDX-License-Identifier: Apache-2.0
#include "etcd_cluster.hpp"

#include "http_client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <signal.h>

#include <stdexcept>
#include <thread>

namespace baton::test {

unsigned short ephemeral_port() {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor a(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

namespace {

std::uint64_t as_uint(const boost::json::value* v) {
  if (!v) return 0;
  if (v->is_string()) return std::stoull(std::string(v->as_string()));
  if (v->is_number()) return v->to_number<std::uint64_t>();
  return 0;
}

}  // namespace

etcd_cluster::etcd_cluster(std::size_t members, std::chrono::seconds bound,
                           std::vector<std::string> extra_args)
    : extra_args_(std::move(extra_args)) {
  members_.resize(members);
  for (std::size_t i = 0; i < members; ++i) {
    auto& m = members_[i];
    m.name = "m" + std::to_string(i);
    m.client_port = ephemeral_port();
    m.peer_port = ephemeral_port();
    if (!initial_cluster_.empty()) initial_cluster_ += ",";
    initial_cluster_ += m.name + "=http://127.0.0.1:" + std::to_string(m.peer_port);
  }
  for (std::size_t i = 0; i < members; ++i)
    start(i);
  wait_healthy(bound);
}

etcd_cluster::~etcd_cluster() {
  for (auto& m : members_)
    if (m.proc && m.proc->running()) {
      m.proc->signal(SIGCONT);  // a member a test froze must still die
      m.proc->signal(SIGKILL);
      m.proc->wait(std::chrono::seconds(10));
    }
}

std::string etcd_cluster::url() const {
  std::string out = "etcd://";
  for (std::size_t i = 0; i < members_.size(); ++i)
    out += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(members_[i].client_port);
  return out;
}

std::filesystem::path etcd_cluster::log_path(std::size_t i) const {
  return dir_.path() / (members_[i].name + ".log");
}

bool etcd_cluster::running(std::size_t i) const {
  return members_[i].proc && members_[i].proc->running();
}

void etcd_cluster::start(std::size_t i) {
  auto& m = members_[i];
  if (running(i)) return;
  const std::string c = "http://127.0.0.1:" + std::to_string(m.client_port);
  const std::string p = "http://127.0.0.1:" + std::to_string(m.peer_port);
  // On a restart etcd ignores the --initial-* flags and rejoins from its data directory.
  std::vector<std::string> argv{"/usr/bin/etcd",
                                "--name",
                                m.name,
                                "--data-dir",
                                (dir_.path() / m.name).string(),
                                "--listen-client-urls",
                                c,
                                "--advertise-client-urls",
                                c,
                                "--listen-peer-urls",
                                p,
                                "--initial-advertise-peer-urls",
                                p,
                                "--initial-cluster",
                                initial_cluster_,
                                "--initial-cluster-token",
                                "baton-test",
                                "--initial-cluster-state",
                                "new"};
  argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  m.proc = std::make_unique<child_process>(argv, log_path(i).string());
}

void etcd_cluster::pause(std::size_t i) {
  if (!running(i) || members_[i].paused) return;
  members_[i].proc->signal(SIGSTOP);
  members_[i].paused = true;
}

void etcd_cluster::resume(std::size_t i) {
  if (!members_[i].paused) return;
  members_[i].proc->signal(SIGCONT);
  members_[i].paused = false;
}

void etcd_cluster::stop(std::size_t i) {
  auto& m = members_[i];
  if (!running(i)) return;
  resume(i);  // a stopped process would not act on SIGTERM
  m.proc->signal(SIGTERM);
  if (m.proc->wait(std::chrono::seconds(30)) == -1) kill(i);
}

void etcd_cluster::kill(std::size_t i) {
  auto& m = members_[i];
  if (!running(i)) return;
  m.proc->signal(SIGKILL);  // ends a paused member too
  m.proc->wait(std::chrono::seconds(30));
  m.paused = false;
}

void etcd_cluster::stop_all() {
  for (std::size_t i = 0; i < members_.size(); ++i)
    stop(i);
}

void etcd_cluster::start_all(std::chrono::seconds bound) {
  for (std::size_t i = 0; i < members_.size(); ++i)
    start(i);
  wait_healthy(bound);
}

std::optional<etcd_member_status> etcd_cluster::status(std::size_t i,
                                                       std::chrono::milliseconds timeout) const {
  if (!running(i) || members_[i].paused) return std::nullopt;
  try {
    auto r = http_client(members_[i].client_port, timeout).post("/v3/maintenance/status", "{}");
    if (r.status != 200 || !r.json.is_object()) return std::nullopt;
    const auto& o = r.json.as_object();
    etcd_member_status s;
    s.leader = as_uint(o.if_contains("leader"));
    if (auto* h = o.if_contains("header"); h && h->is_object()) {
      s.member_id = as_uint(h->as_object().if_contains("member_id"));
      s.raft_term = as_uint(h->as_object().if_contains("raft_term"));
    }
    return s;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::size_t etcd_cluster::leader(std::chrono::seconds bound) const {
  const auto until = std::chrono::steady_clock::now() + bound;
  for (;;) {
    std::optional<std::size_t> found;
    bool agreed = true, any = false;
    std::uint64_t leader_id = 0;
    for (std::size_t i = 0; i < members_.size() && agreed; ++i) {
      if (!running(i) || members_[i].paused) continue;
      // A generous per-member bound: a member busy syncing its log under load (a slow CI disk, sanitizer
      // builds of the clients) may answer late without anything being wrong with the cluster.
      auto s = status(i, std::chrono::seconds(5));
      if (!s || s->leader == 0 || (any && s->leader != leader_id)) {
        agreed = false;
        break;
      }
      any = true;
      leader_id = s->leader;
      if (s->member_id == s->leader) found = i;
    }
    if (agreed && any && found) return *found;
    if (std::chrono::steady_clock::now() >= until)
      throw std::runtime_error("the etcd members did not agree on a running leader in time");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace baton::test
