// SPDX-License-Identifier: Apache-2.0
#include "agent_fixture.hpp"

#include <dirent.h>

#include <charconv>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace baton::test {

agent_process::agent_process(const std::filesystem::path& config, std::string id, std::filesystem::path log,
                             std::vector<std::string> extra_env)
    : identity_(std::move(id)), log_(std::move(log)) {
  proc_ = std::make_unique<child_process>(
      std::vector<std::string>{bin_path("baton-agent"), "--config", config.string(), "--identity", identity_},
      log_.string(), std::move(extra_env));
  auto line = proc_->read_line(std::chrono::seconds(30));
  const std::string prefix = "baton-agent listening on ";
  if (line.rfind(prefix, 0) != 0) throw std::runtime_error("unexpected first line from baton-agent: " + line);
  port_ = static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1)));
}

http_reply agent_process::get(const std::string& target, std::chrono::milliseconds timeout) const {
  try {
    return http_client(port_, timeout).get(target);
  } catch (const std::exception&) {
    return {};
  }
}

http_reply agent_process::leader() const {
  auto r = get("/v1/leader");
  if (r.status == 0) r.json = boost::json::object{{"is_leader", false}};
  return r;
}

std::string agent_process::log() const {
  return read_file(log_);
}

std::vector<std::string> agent_process::log_lines(const std::vector<std::string>& parts) const {
  std::vector<std::string> out;
  std::istringstream in(log());
  for (std::string line; std::getline(in, line);) {
    bool all = true;
    for (const auto& p : parts)
      all = all && line.find(p) != std::string::npos;
    if (all) out.push_back(line);
  }
  return out;
}

double agent_process::metric(const std::string& series) const {
  std::istringstream in(get("/metrics").body);
  for (std::string line; std::getline(in, line);)
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ')
      return std::stod(line.substr(series.size() + 1));
  return -1;
}

std::vector<std::unique_ptr<agent_process>> start_agents(const std::filesystem::path& config, int count,
                                                         const temp_dir& dir) {
  std::vector<std::unique_ptr<agent_process>> agents;
  for (int i = 0; i < count; ++i)
    agents.push_back(std::make_unique<agent_process>(config, "node-" + std::to_string(i),
                                                     dir.path() / ("a" + std::to_string(i) + ".log")));
  return agents;
}

std::filesystem::path write_config(const temp_dir& dir, const std::string& name, const std::string& text) {
  auto p = dir.path() / name;
  std::ofstream(p) << text;
  return p;
}

std::string base_config(const batond_process& server, const std::string& ttl, const std::string& jobs) {
  return "server: " + server.url() +
         "\nlisten: 127.0.0.1:0\nshutdown_grace: 1s\nelection:\n  key: test/leader\n  ttl: " + ttl +
         "\njobs:\n" + jobs;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string wait_until_after_a_slot(int period, int from, int to) {
  using std::chrono::system_clock;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2 * period);
  for (;;) {
    const auto now = std::chrono::floor<std::chrono::seconds>(system_clock::now());
    const auto into = static_cast<int>(now.time_since_epoch().count() % period);
    if (into >= from && into <= to) {
      const std::time_t t = system_clock::to_time_t(now - std::chrono::seconds(into));
      std::tm utc{};
      ::gmtime_r(&t, &utc);
      char text[32];
      std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
      return text;
    }
    if (std::chrono::steady_clock::now() >= give_up)
      throw std::runtime_error("no moment " + std::to_string(from) + "-" + std::to_string(to) +
                               " s after a slot came within two periods");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

namespace {

// Calls `visit(pid, comm, fields)` for each process in /proc, `fields` being its stat line after the command
// name: state ppid pgrp ... (comm may hold spaces and parentheses, so the split is at the last ')').
template <class Visit>
void each_process(Visit visit) {
  DIR* proc = ::opendir("/proc");
  if (!proc) throw std::runtime_error("cannot read /proc");
  while (const dirent* e = ::readdir(proc)) {
    int pid = 0;
    const std::string_view name(e->d_name);
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec != std::errc{} || end != name.data() + name.size()) continue;
    auto stat = read_file(std::filesystem::path("/proc") / name / "stat");
    auto open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 1));
    visit(pid, stat.substr(open + 1, close - open - 1), fields);
  }
  ::closedir(proc);
}

}  // namespace

std::vector<int> live_processes_in_group(int pgid) {
  std::vector<int> out;
  each_process([&](int pid, const std::string&, std::istringstream& fields) {
    char state = 0;
    int ppid = 0, group = 0;
    if ((fields >> state >> ppid >> group) && group == pgid && state != 'Z' && state != 'X')
      out.push_back(pid);
  });
  return out;
}

std::vector<int> guards_of(int agent_pid) {
  std::vector<int> out;
  each_process([&](int pid, const std::string& comm, std::istringstream& fields) {
    char state = 0;
    int ppid = 0;
    if ((fields >> state >> ppid) && ppid == agent_pid && comm == "baton-guard" && state != 'Z')
      out.push_back(pid);
  });
  return out;
}

}  // namespace baton::test
