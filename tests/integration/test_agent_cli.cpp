#define BOOST_TEST_MODULE agent_cli
#include <boost/test/unit_test.hpp>

// baton-agent as a process: its command line, the one-shot commands (--check-config, --next-runs), a listen
// address that cannot be bound, and SIGHUP while it leads.

#include "batond_fixture.hpp"
#include "eventually.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

using namespace baton::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

fs::path write_file(const temp_dir& dir, const std::string& name, const std::string& text) {
  const auto p = dir.path() / name;
  std::ofstream(p) << text;
  return p;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The first log line with `event=<event>`, or "".
std::string log_line(const fs::path& log, const std::string& event) {
  std::istringstream in(read_all(log));
  for (std::string line; std::getline(in, line);)
    if (contains(line + " ", " event=" + event + " ")) return line;
  return {};
}

// Runs baton-agent to its end, with a stderr file of its own in `dir`.
finished_process agent(const temp_dir& dir, std::vector<std::string> args) {
  static int runs = 0;
  args.insert(args.begin(), bin_path("baton-agent"));
  return run_to_end(std::move(args), (dir.path() / ("stderr-" + std::to_string(++runs))).string(), 30s);
}

// A loopback TCP port held by this process, so that binding it again fails.
struct occupied_port {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  unsigned short port = 0;
  occupied_port() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    BOOST_REQUIRE(::listen(fd, 1) == 0);
    BOOST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~occupied_port() { ::close(fd); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(version_and_help_need_no_value_and_config_takes_the_equals_form) {
  temp_dir dir;
  const auto version = agent(dir, {"--version"});
  BOOST_TEST(version.code == 0, version.err);
  BOOST_TEST(version.out == "baton-agent " BATON_VERSION "\n");
  const auto help = agent(dir, {"--config", "/etc/baton/agent.yaml", "--help"});
  BOOST_TEST(help.code == 0);
  BOOST_TEST(contains(help.out, "--next-runs N"));
  const auto good = write_file(dir, "good.yaml", "listen: 127.0.0.1:0\n");
  const auto check = agent(dir, {"--check-config=" + good.string()});
  BOOST_TEST(check.code == 0, check.err);
  BOOST_TEST(check.out == good.string() + ": ok (0 jobs)\n");
  const auto unknown = agent(dir, {"--config=" + good.string(), "--lisen", "127.0.0.1:0"});
  BOOST_TEST(unknown.code == 2);
  BOOST_TEST(contains(unknown.err, "--lisen"), unknown.err);
}

BOOST_AUTO_TEST_CASE(a_listen_host_name_is_refused_by_check_config_with_its_place) {
  temp_dir dir;
  const auto file = write_file(dir, "agent.yaml", "server: http://127.0.0.1:9\nlisten: myhost:7071\n");
  const auto r = agent(dir, {"--check-config", file.string()});
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.err, "agent.yaml:2:9: listen: \"myhost\" is not an IP address"), r.err);
  // localhost is taken, as batond takes it.
  const auto local = write_file(dir, "local.yaml", "listen: localhost:7071\n");
  BOOST_TEST(agent(dir, {"--check-config", local.string()}).code == 0);
}

BOOST_AUTO_TEST_CASE(a_listen_port_in_use_is_one_line_naming_the_key_and_exit_2) {
  temp_dir dir;
  occupied_port busy;
  const auto address = "127.0.0.1:" + std::to_string(busy.port);
  const auto file = write_file(dir, "agent.yaml", "server: http://127.0.0.1:9\nlisten: " + address + "\n");
  const auto from_file = agent(dir, {"--config", file.string()});
  BOOST_TEST(from_file.code == 2);
  BOOST_TEST(from_file.out.empty());
  BOOST_TEST(from_file.err ==
             "baton-agent: listen: cannot listen on " + address + ": Address already in use\n");
  // Given by the flag, the flag is named.
  const auto plain = write_file(dir, "plain.yaml", "server: http://127.0.0.1:9\n");
  const auto from_flag = agent(dir, {"--config", plain.string(), "--listen", address});
  BOOST_TEST(from_flag.code == 2);
  BOOST_TEST(from_flag.err ==
             "baton-agent: --listen: cannot listen on " + address + ": Address already in use\n");
}

BOOST_AUTO_TEST_CASE(an_ipv6_listen_address_is_printed_in_brackets) {
  temp_dir dir;
  const auto file = write_file(dir, "agent.yaml", "server: http://127.0.0.1:9\nlisten: \"[::1]:0\"\n");
  child_process p({bin_path("baton-agent"), "--config", file.string()}, (dir.path() / "log").string());
  std::string line;
  try {
    line = p.read_line(30s);
  } catch (const std::exception&) {
    p.wait(10s);
    const auto log = read_all(dir.path() / "log");
    if (contains(log, "cannot listen on [::1]:0")) return;  // no IPv6 loopback on this machine
    BOOST_FAIL("the agent did not start: " + log);
  }
  BOOST_TEST(line.starts_with("baton-agent listening on [::1]:"), line);
  BOOST_TEST(std::stoul(line.substr(line.rfind(':') + 1)) > 0u);
  BOOST_TEST(eventually([&] { return contains(log_line(dir.path() / "log", "started"), "listen=[::1]:"); }));
  p.signal(SIGTERM);
  BOOST_TEST(p.wait(30s) == 0);
}

BOOST_AUTO_TEST_CASE(check_config_warns_about_a_program_missing_here_and_still_passes) {
  temp_dir dir;
  const auto file = write_file(dir, "agent.yaml",
                               "jobs:\n"
                               "  - name: a\n"
                               "    schedule: \"* * * * *\"\n"
                               "    command: [\"baton-no-such-program\"]\n"
                               "  - name: b\n"
                               "    schedule: \"* * * * *\"\n"
                               "    command: [\"sh\", \"-c\", \"true\"]\n");
  const auto r = agent(dir, {"--check-config", file.string()});
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out == file.string() + ": ok (2 jobs)\n");
  BOOST_TEST(contains(r.err, "baton-agent: warning: " + file.string() +
                                 ":4:15: jobs[0].command[0]: \"baton-no-such-program\" is not found in PATH"),
             r.err);
  BOOST_TEST(!contains(r.err, "jobs[1]"), r.err);
}

BOOST_AUTO_TEST_CASE(next_runs_prints_each_jobs_slots_in_its_zone) {
  temp_dir dir;
  const auto file = write_file(dir, "agent.yaml",
                               "jobs:\n"
                               "  - name: nightly\n"
                               "    schedule: \"30 2 * * *\"\n"
                               "    timezone: America/New_York\n"
                               "    command: [x]\n");
  const auto r =
      agent(dir, {"--next-runs", "3", "--config", file.string(), "--from", "2026-03-07T12:00:00Z"});
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out ==
             "nightly: \"30 2 * * *\" in America/New_York\n"
             "  2026-03-08 03:00:00 EDT -04:00  2026-03-08T07:00:00Z\n"
             "  2026-03-09 02:30:00 EDT -04:00  2026-03-09T06:30:00Z\n"
             "  2026-03-10 02:30:00 EDT -04:00  2026-03-10T06:30:00Z\n");
  const auto bad = agent(dir, {"--next-runs", "three", "--config", file.string()});
  BOOST_TEST(bad.code == 2);
  BOOST_TEST(contains(bad.err, "--next-runs: expected a number"), bad.err);
}

BOOST_AUTO_TEST_CASE(sighup_rereads_the_file_while_the_leader_keeps_its_lease) {
  temp_dir dir;
  batond_process server(dir.path(), {}, 0, (dir.path() / "batond.log").string());
  const auto config = [&](const std::string& listen, const std::string& more_jobs) {
    return "server: " + server.url() + "\nlisten: " + listen +
           "\nshutdown_grace: 1s\nelection:\n  key: reload/leader\n  ttl: 2s\n"
           "jobs:\n  - name: tick\n    schedule: \"0 0 1 1 *\"\n    command: [\"/bin/true\"]\n" +
           more_jobs;
  };
  const auto file = write_file(dir, "agent.yaml", config("127.0.0.1:0", ""));
  const auto log = dir.path() / "agent.log";
  child_process p({bin_path("baton-agent"), "--config", file.string(), "--identity", "reloader"},
                  log.string());
  const auto line = p.read_line(30s);
  BOOST_REQUIRE(line.starts_with("baton-agent listening on "));
  const auto port = static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1)));
  const auto leader = [&] { return http_client(port, 10s).get("/v1/leader").json; };
  BOOST_REQUIRE(eventually([&] { return leader().at("is_leader").as_bool(); }));
  const auto token = leader().at("token");

  // Unchanged file: nothing to do.
  p.signal(SIGHUP);
  BOOST_REQUIRE(eventually([&] { return !log_line(log, "config_reload").empty(); }, 10s));
  BOOST_TEST(contains(log_line(log, "config_reload"), "changed=none"), log_line(log, "config_reload"));

  // A new job and a new listen address: read, compared and reported, not applied.
  write_file(
      dir, "agent.yaml",
      config("127.0.0.1:1", "  - name: extra\n    schedule: \"0 0 1 1 *\"\n    command: [\"/bin/true\"]\n"));
  p.signal(SIGHUP);
  BOOST_REQUIRE(eventually([&] { return contains(read_all(log), "changed=listen,jobs"); }, 10s));
  const auto reported = read_all(log);
  BOOST_TEST(contains(reported, "jobs=+extra restart_needed=listen applied=false reason="), reported);

  // A bad file: one error line with its place, and the running configuration is kept.
  write_file(dir, "agent.yaml",
             config("127.0.0.1:0", "  - name: broken\n    schedule: \"61 * * * *\"\n    command: [x]\n"));
  p.signal(SIGHUP);
  BOOST_REQUIRE(eventually([&] { return !log_line(log, "config_reload_failed").empty(); }, 10s));
  BOOST_TEST(
      contains(log_line(log, "config_reload_failed"), "agent.yaml:12:15: jobs[1].schedule: minute field"),
      log_line(log, "config_reload_failed"));

  // Two TTLs later the agent still runs and still leads under the same lease.
  std::this_thread::sleep_for(4s);
  BOOST_TEST(p.running());
  const auto after = leader();
  BOOST_TEST(after.at("is_leader").as_bool());
  BOOST_TEST(after.at("token") == token);
  BOOST_TEST(log_line(log, "lost").empty(), read_all(log));
  p.signal(SIGTERM);
  BOOST_TEST(p.wait(30s) == 0);
  BOOST_TEST(!log_line(log, "released").empty());
}

BOOST_AUTO_TEST_CASE(the_leader_endpoint_gives_the_leaders_identity_apart_from_its_owner_string) {
  temp_dir dir;
  batond_process server(dir.path(), {}, 0, (dir.path() / "batond.log").string());
  const auto file = write_file(dir, "agent.yaml", "server: " + server.url() + "\nlisten: 127.0.0.1:0\n");
  child_process p({bin_path("baton-agent"), "--config", file.string(), "--identity", "node#7"},
                  (dir.path() / "agent.log").string());
  const auto line = p.read_line(30s);
  const auto port = static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1)));
  boost::json::value answer;
  BOOST_REQUIRE(eventually([&] {
    answer = http_client(port, 10s).get("/v1/leader").json;
    return answer.at("is_leader").as_bool();
  }));
  // The owner is the identity with the SDK's random suffix; an identity may contain '#' itself.
  const std::string owner(answer.at("leader").as_string());
  BOOST_TEST(owner.starts_with("node#7#"), owner);
  BOOST_TEST(owner.size() == std::string("node#7#").size() + 16);
  BOOST_TEST(answer.at("leader_identity").as_string() == "node#7");
  p.signal(SIGTERM);
  BOOST_TEST(p.wait(30s) == 0);
}
