// SPDX-License-Identifier: Apache-2.0
// baton-agent: elects one runner among replicas with a Baton lease and runs cron jobs on it, passing the
// fencing token to every job and downstream write (docs/agent.md).

#include "agent.hpp"
#include "command_line.hpp"
#include "config.hpp"
#include "run_now_client.hpp"
#include "sidecar.hpp"

#include "baton/common/log.hpp"
#include "baton/common/process_group.hpp"
#include "baton/common/sd_notify.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/host_name.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#ifndef BATON_AGENT_VERSION
#define BATON_AGENT_VERSION "unknown"
#endif

namespace asio = boost::asio;
using namespace baton::agent;

namespace {

// Every error line on stderr: a message may quote the server URL or a flag with a password in it (an etcd
// URL's user:password@), and stderr ends up in terminals and CI logs.
void print_error(const std::string& message) {
  std::fprintf(stderr, "baton-agent: %s\n", baton::without_credentials(message).c_str());
}

// Exit statuses (docs/agent.md).
constexpr int exit_failed = 1;  // the agent failed while running
constexpr int exit_usage = 2;   // a bad command line, configuration or listen address: nothing was started

std::string comma_list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items)
    out += (out.empty() ? "" : ",") + item;
  return out.empty() ? "none" : out;
}

// The sidecar's URL as another machine would use it, published with the leadership: an agent that listens
// on every address (0.0.0.0, [::]) names its host instead, as the others cannot reach "0.0.0.0".
std::string api_url(const boost::asio::ip::tcp::endpoint& bound) {
  if (!bound.address().is_unspecified()) return "http://" + to_listen_string(bound);
  boost::system::error_code ec;
  auto host = asio::ip::host_name(ec);
  if (ec || host.empty()) return "http://" + to_listen_string(bound);
  return "http://" + host + ":" + std::to_string(bound.port());
}

// `+new -gone ~changed`, or none.
std::string jobs_summary(const config_changes& c) {
  std::string out;
  const auto add = [&](char mark, const std::vector<std::string>& names) {
    for (const auto& name : names)
      out += (out.empty() ? "" : " ") + (mark + name);
  };
  add('+', c.jobs_added);
  add('-', c.jobs_removed);
  add('~', c.jobs_changed);
  return out.empty() ? "none" : out;
}

// log_level and log_format, validated when the configuration was loaded.
void apply_log_settings(const agent_config& cfg) {
  baton::log::level lvl = baton::log::level::info;
  baton::log::parse_level(cfg.log_level, lvl);
  baton::log::set_level(lvl);
  baton::log::format format = baton::log::format::logfmt;
  baton::log::parse_format(cfg.log_format, format);
  baton::log::set_format(format);
}

// systemd's watchdog (WatchdogSec): WATCHDOG=1 every half of the timeout from a timer on the agent's one
// io_context, which also runs the election, the jobs and the sidecar, so a wedged loop stops the pings and
// systemd restarts the agent. Ends when the timer is cancelled or the context stops.
void ping_watchdog(asio::steady_timer& timer, std::chrono::microseconds half) {
  baton::sd_notify::notify("WATCHDOG=1");
  timer.expires_after(half);
  timer.async_wait([&timer, half](const boost::system::error_code& ec) {
    if (!ec) ping_watchdog(timer, half);
  });
}

// The configuration as the command line and the file give it, checked; throws config_error. The server
// token is read only to run: --check-config and --next-runs work without the secret.
agent_config load(const command_line& cmd, bool read_token) {
  auto cfg = load_config(cmd.config_path);
  apply_overrides(cfg, cmd.overrides);
  if (read_token) load_server_token(cfg, cmd.config_path);
  return cfg;
}

// load(), with an error printed as one line on stderr (the caller then exits 2).
std::optional<agent_config> load_or_print(const command_line& cmd, bool read_token) {
  try {
    return load(cmd, read_token);
  } catch (const config_error& e) {
    print_error(e.what());
    return std::nullopt;
  }
}

// The `tls` files, read again into the client's TLS context (changed paths, or the same ones: a certificate
// rotated in place is the common case), with one log line either way. Connections made from then on use
// them; open ones and the lease are untouched. Returns the error, empty on success.
std::string reload_tls(agent_runtime& agent, const agent_config& loaded, bool paths_changed) {
  const auto r =
      paths_changed ? agent.lock_client().reload_tls(loaded.tls) : agent.lock_client().reload_tls();
  if (r.ec) {
    baton::log::error("tls_reload_failed",
                      {{"error", r.diagnostic},
                       {"kept", "the previous certificate; nothing of the file was applied"},
                       {"not_after", r.not_after},
                       {"sha256", r.sha256}});
    return r.diagnostic;
  }
  baton::log::info("tls_reloaded", {{"ca_file", loaded.tls.ca_file},
                                    {"cert_file", loaded.tls.cert_file},
                                    {"subject", r.subject},
                                    {"not_after", r.not_after},
                                    {"sha256", r.sha256}});
  return {};
}

// FNV-1a (64 bits, hex) of the configuration file's bytes, for baton_agent_config_info: replicas whose
// files differ show different hashes. "" when the file cannot be read.
std::string file_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c; in.get(c);)
    h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

reload_result reload_file(const command_line& cmd, agent_config& running, agent_runtime& agent);

// SIGHUP and POST /v1/reload: the file is read and checked again, then compared with the running
// configuration. A bad file changes nothing. A good one is applied whole, or not at all when a key changed
// that only a restart applies (the sidecar's socket, the connection that holds the lease, the mode): half a
// configuration would be one that no file describes. Its TLS files are read first, since that is the one
// step that can fail: when it does, nothing else is applied either, so "whole" holds.
reload_result reload(const command_line& cmd, agent_config& running, agent_runtime& agent) {
  auto out = reload_file(cmd, running, agent);
  agent.note_config(out.applied, file_hash(cmd.config_path));
  return out;
}

reload_result reload_file(const command_line& cmd, agent_config& running, agent_runtime& agent) {
  reload_result out;
  agent_config loaded;
  try {
    loaded = load(cmd, true);
  } catch (const config_error& e) {
    baton::log::error("config_reload_failed",
                      {{"file", cmd.config_path}, {"error", e.what()}, {"kept", "running"}});
    out.error = e.what();
    return out;
  }
  out.changes = compare_configs(running, loaded);
  const auto& changes = out.changes;
  if (changes.restart_needed.empty() && baton::uses_tls(loaded.server)) {
    const bool paths_changed =
        std::find(changes.keys.begin(), changes.keys.end(), "tls") != changes.keys.end();
    out.error = reload_tls(agent, loaded, paths_changed);
    if (!out.error.empty()) return out;
  }
  if (changes.empty()) {
    baton::log::info("config_reload", {{"file", cmd.config_path}, {"changed", "none"}, {"applied", "true"}});
    out.applied = true;
    return out;
  }
  if (!changes.restart_needed.empty()) {
    baton::log::warn("config_reload",
                     {{"file", cmd.config_path},
                      {"changed", comma_list(changes.keys)},
                      {"jobs", jobs_summary(changes)},
                      {"restart_needed", comma_list(changes.restart_needed)},
                      {"applied", "false"},
                      {"reason", "only a restart applies " + comma_list(changes.restart_needed) +
                                     "; nothing of the file was applied"}});
    return out;
  }
  apply_log_settings(loaded);
  agent.apply_settings(loaded.resign_token, loaded.shutdown_grace);
  if (!changes.jobs_added.empty() || !changes.jobs_removed.empty() || !changes.jobs_changed.empty())
    agent.apply_jobs(loaded.jobs);
  if (changes.election) agent.restart_election(loaded.election_key, loaded.election);
  running = std::move(loaded);
  out.applied = true;
  baton::log::info("config_reload", {{"file", cmd.config_path},
                                     {"changed", comma_list(changes.keys)},
                                     {"jobs", jobs_summary(changes)},
                                     {"restart_needed", "none"},
                                     {"applied", "true"}});
  return out;
}

int run_agent(const command_line& cmd) {
  asio::io_context ioc(1);
  // Before anything slow and before the address is printed, so that a signal sent early is queued for its
  // handler below rather than the default death (SIGHUP's default would leave the lease to expire).
  asio::signal_set signals(ioc, SIGTERM, SIGINT);
  asio::signal_set hangups(ioc, SIGHUP);
  const auto loaded = load_or_print(cmd, true);
  if (!loaded) return exit_usage;
  const agent_config& cfg = *loaded;
  agent_config running = cfg;  // what a reload compares the file with, and replaces once applied
  const auto listen_key =
      cmd.overrides.contains("listen") && !cmd.overrides.at("listen").empty() ? "--listen" : "listen";
  apply_log_settings(cfg);
  ::signal(SIGPIPE, SIG_IGN);
  // Jobs' descendants that outlive them are re-parented here and reaped with their group.
  baton::become_subreaper();

  try {
    agent_runtime agent(ioc.get_executor(), cfg);
    agent.note_config(true, file_hash(cmd.config_path));
    sidecar api(ioc.get_executor(), agent);
    boost::system::error_code bind_error;
    const auto bound = api.bind(parse_listen(cfg.listen), bind_error);
    if (bind_error) {
      std::fprintf(stderr, "baton-agent: %s: cannot listen on %s: %s\n", listen_key, cfg.listen.c_str(),
                   bind_error.message().c_str());
      return exit_usage;
    }
    agent.set_api_url(api_url(bound));
    // metrics_listen: /metrics (and /healthz) on an address of its own, for Prometheus.
    sidecar metrics_api(ioc.get_executor(), agent);
    metrics_api.metrics_only();
    std::optional<asio::ip::tcp::endpoint> metrics_bound;
    if (!cfg.metrics_listen.empty()) {
      metrics_bound = metrics_api.bind(parse_listen(cfg.metrics_listen), bind_error);
      if (bind_error) {
        std::fprintf(stderr, "baton-agent: metrics_listen: cannot listen on %s: %s\n",
                     cfg.metrics_listen.c_str(), bind_error.message().c_str());
        return exit_usage;
      }
    }
    std::printf("baton-agent listening on %s\n", to_listen_string(bound).c_str());
    if (metrics_bound) std::printf("baton-agent metrics on %s\n", to_listen_string(*metrics_bound).c_str());
    std::fflush(stdout);
    baton::log::info("started", {{"identity", agent.identity()},
                                 {"server", baton::without_credentials(cfg.server)},
                                 {"key", cfg.election_key},
                                 {"jobs", cfg.jobs.size()},
                                 {"listen", to_listen_string(bound)}});
    for (const auto& warning : grace_warnings(cfg, cmd.config_path))
      baton::log::warn("grace_cut_on_loss", {{"detail", warning}});
    // Configuration loaded and the sidecar bound: what a unit ordered after this one (Type=notify) needs.
    baton::sd_notify::notify("READY=1\nSTATUS=sidecar on " + to_listen_string(bound));
    asio::steady_timer watchdog(ioc);
    if (const auto timeout = baton::sd_notify::watchdog_timeout()) ping_watchdog(watchdog, *timeout / 2);
    signals.async_wait([&](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      baton::log::info("shutdown", {{"signal", sig}});
      baton::sd_notify::notify("STOPPING=1");
      agent.shutdown();
    });
    std::function<void()> wait_for_hangup = [&] {
      hangups.async_wait([&](const boost::system::error_code& ec, int) {
        if (ec) return;
        reload(cmd, running, agent);
        wait_for_hangup();
      });
    };
    wait_for_hangup();
    // reload_on_change: the file's bytes looked at every period; a change is reloaded as SIGHUP would
    // (once per change: a file that does not pass is not tried again until it changes again).
    asio::steady_timer file_watch(ioc);
    std::string seen_hash = file_hash(cmd.config_path);
    std::function<void()> watch_file = [&] {
      if (cfg.reload_on_change.count() == 0) return;
      file_watch.expires_after(cfg.reload_on_change);
      file_watch.async_wait([&](const boost::system::error_code& ec) {
        if (ec) return;
        if (auto now = file_hash(cmd.config_path); !now.empty() && now != seen_hash) {
          seen_hash = std::move(now);
          baton::log::info("config_changed", {{"file", cmd.config_path}, {"hash", seen_hash}});
          reload(cmd, running, agent);
        }
        watch_file();
      });
    };
    watch_file();
    api.on_reload([&] { return reload(cmd, running, agent); });
    asio::co_spawn(ioc, api.serve(), asio::detached);
    if (metrics_bound) asio::co_spawn(ioc, metrics_api.serve(), asio::detached);
    int status = 0;
    asio::co_spawn(ioc, agent.run(), [&](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          baton::log::error("agent_failed", {{"error", ex.what()}});
          status = exit_failed;
        }
      }
      baton::sd_notify::notify("STOPPING=1");
      watchdog.cancel();
      signals.cancel();
      hangups.cancel();
      file_watch.cancel();
      api.close();
      metrics_api.close();
      ioc.stop();
    });
    ioc.run();
    baton::log::info("stopped", {});
    return status;
  } catch (const std::exception& e) {
    print_error(e.what());
    return exit_failed;
  }
}

int check_config(const command_line& cmd) {
  const auto cfg = load_or_print(cmd, false);
  if (!cfg) return exit_usage;
  for (const auto& warning : program_warnings(*cfg, cmd.config_path, std::getenv("PATH")))
    print_error("warning: " + warning);
  for (const auto& warning : grace_warnings(*cfg, cmd.config_path))
    print_error("warning: " + warning);
  for (const auto& warning : fencing_warnings(*cfg, cmd.config_path))
    print_error("warning: " + warning);
  std::printf("%s: ok (%zu jobs)\n", cmd.config_path.c_str(), cfg->jobs.size());
  return 0;
}

int next_runs(const command_line& cmd) {
  const auto cfg = load_or_print(cmd, false);
  if (!cfg) return exit_usage;
  const auto from =
      cmd.from.value_or(std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
  std::fputs(next_runs_text(*cfg, from, cmd.next_runs).c_str(), stdout);
  return 0;
}

// run-now NAME: one request to the running agent's sidecar; the file gives its address and token.
int run_now(const command_line& cmd) {
  const auto cfg = load_or_print(cmd, false);
  if (!cfg) return exit_usage;
  try {
    const auto answer = run_now_via_sidecar(*cfg, cmd.job, std::chrono::seconds(10));
    if (answer.exit_status == 0)
      std::printf("%s\n", answer.message.c_str());
    else
      print_error(answer.message);
    return answer.exit_status;
  } catch (const std::invalid_argument& e) {
    print_error(e.what());
    return exit_usage;
  }
}

}  // namespace

int main(int argc, char** argv) {
  command_line cmd;
  try {
    cmd = parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const usage_error& e) {
    print_error(e.what());
    return exit_usage;
  }
  switch (cmd.what) {
    case command_line::action::help:
      std::fputs(help_text().c_str(), stdout);
      return 0;
    case command_line::action::version:
      std::puts("baton-agent " BATON_AGENT_VERSION);
      return 0;
    case command_line::action::check_config:
      return check_config(cmd);
    case command_line::action::next_runs:
      return next_runs(cmd);
    case command_line::action::run_now:
      return run_now(cmd);
    case command_line::action::run:
      break;
  }
  return run_agent(cmd);
}
