// baton-agent: elects one runner among replicas with a Baton lease and runs cron jobs on it, passing the
// fencing token to every job and downstream write (docs/agent.md).

#include "agent.hpp"
#include "config.hpp"
#include "sidecar.hpp"

#include "baton/common/log.hpp"
#include "baton/common/process_group.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

namespace asio = boost::asio;
using namespace baton::agent;

namespace {

constexpr const char* usage =
    "usage: baton-agent --config FILE [--server URL] [--identity ID] [--listen HOST:PORT]\n"
    "                   [--election-key KEY] [--log-level debug|info|warn|error]\n"
    "                   [--ca-file FILE] [--cert FILE --key FILE]\n"
    "       baton-agent --check-config FILE\n";

// The server URL as logged: the credentials of an etcd URL (etcd://user:password@...) are left out.
std::string loggable_url(const std::string& url) {
  const auto scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const auto start = scheme + 3;
  const auto end = url.find('/', start);
  const auto at = url.rfind('@', end == std::string::npos ? std::string::npos : end);
  if (at == std::string::npos || at < start) return url;
  return url.substr(0, start) + "***@" + url.substr(at + 1);
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, check_path;
  std::map<std::string, std::string> overrides;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "baton-agent: %s needs a value\n%s", flag.c_str(), usage);
      return 2;
    }
    std::string value = argv[++i];
    if (flag == "--config") config_path = value;
    else if (flag == "--check-config") check_path = value;
    else if (flag == "--server" || flag == "--identity" || flag == "--listen" || flag == "--election-key" ||
             flag == "--log-level" || flag == "--ca-file" || flag == "--cert" || flag == "--key")
      overrides[flag.substr(2)] = value;
    else {
      std::fprintf(stderr, "baton-agent: unknown flag %s\n%s", flag.c_str(), usage);
      return 2;
    }
  }
  if (!check_path.empty()) {
    try {
      auto cfg = load_config(check_path);
      apply_overrides(cfg, overrides);
      std::printf("%s: ok (%zu jobs)\n", check_path.c_str(), cfg.jobs.size());
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "baton-agent: %s\n", e.what());
      return 2;
    }
  }
  if (config_path.empty()) {
    std::fprintf(stderr, "baton-agent: --config FILE is required\n%s", usage);
    return 2;
  }
  agent_config cfg;
  try {
    cfg = load_config(config_path);
    apply_overrides(cfg, overrides);
    load_server_token(cfg, config_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "baton-agent: %s\n", e.what());
    return 2;
  }
  baton::log::level lvl = baton::log::level::info;
  baton::log::parse_level(cfg.log_level, lvl);
  baton::log::set_level(lvl);
  ::signal(SIGPIPE, SIG_IGN);
  // Jobs' descendants that outlive them are re-parented here and reaped with their group.
  baton::become_subreaper();

  try {
    asio::io_context ioc(1);
    agent_runtime agent(ioc.get_executor(), cfg);
    sidecar api(ioc.get_executor(), agent);
    auto bound = api.bind(cfg.listen);
    std::printf("baton-agent listening on %s:%u\n", bound.address().to_string().c_str(), bound.port());
    std::fflush(stdout);
    baton::log::info("started",
                     {{"identity", agent.identity()},
                      {"server", loggable_url(cfg.server)},
                      {"key", cfg.election_key},
                      {"jobs", cfg.jobs.size()},
                      {"listen", bound.address().to_string() + ":" + std::to_string(bound.port())}});
    asio::signal_set signals(ioc, SIGTERM, SIGINT);
    signals.async_wait([&](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      baton::log::info("shutdown", {{"signal", sig}});
      agent.shutdown();
    });
    asio::co_spawn(ioc, api.serve(), asio::detached);
    int status = 0;
    asio::co_spawn(ioc, agent.run(), [&](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          baton::log::error("agent_failed", {{"error", ex.what()}});
          status = 1;
        }
      }
      signals.cancel();
      api.close();
      ioc.stop();
    });
    ioc.run();
    baton::log::info("stopped", {});
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "baton-agent: %s\n", e.what());
    return 1;
  }
}
