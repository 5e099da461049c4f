// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE cli
#include <boost/test/unit_test.hpp>

#include "batond_fixture.hpp"
#include "eventually.hpp"
#include "fault_proxy.hpp"
#include "overlap.hpp"
#include "process_faults.hpp"
#include "storage_faults.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;
namespace json = boost::json;

namespace {

// Exit statuses documented in docs/cli.md.
constexpr int usage = 64;
constexpr int unavailable = 69;
constexpr int not_acquired = 75;
constexpr int lease_lost = 76;
constexpr int not_owner = 77;

// Bounds for things that take milliseconds on an idle machine; generous for a loaded 2-core one.
constexpr auto command_bound = 60s;
constexpr auto event_bound = 30s;

struct result {
  int code = -1;
  std::vector<std::string> out;  // stdout lines
  std::string err;               // all of stderr
  json::value json() const { return out.empty() ? json::value() : json::parse(out.front()); }
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::size_t line_count(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// Gone, or a zombie nobody has reaped yet: either way it no longer runs.
bool process_gone(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  return paren == std::string::npos ||
         (paren + 2 < stat.size() && (stat[paren + 2] == 'Z' || stat[paren + 2] == 'X'));
}

// A TCP port on loopback that nothing listens on.
int closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

struct cli_fixture {
  temp_dir data;
  temp_dir scratch;
  batond_process server{data.path()};
  int runs = 0;

  cli_fixture() {
    ::unsetenv("BATON_SERVER");
    // baton exec leaves alone a signal its caller ignores, and a test started in the background of a
    // non-interactive shell ignores SIGINT; the tests that send SIGINT need its default to be inherited.
    ::signal(SIGINT, SIG_DFL);
  }

  std::string path(const std::string& name) const { return (scratch.path() / name).string(); }

  std::vector<std::string> argv(std::vector<std::string> args, bool with_server = true) const {
    args.insert(args.begin(), bin_path("baton"));
    if (with_server) {
      args.insert(args.begin() + 1, server.url());
      args.insert(args.begin() + 1, "--server");
    }
    return args;
  }

  // Starts baton with stderr going to a file of its own; returns the process and that file's path.
  std::pair<std::unique_ptr<child_process>, std::string> start(std::vector<std::string> args,
                                                               bool with_server = true) {
    auto err = path("stderr-" + std::to_string(++runs));
    return {std::make_unique<child_process>(argv(std::move(args), with_server), err), err};
  }

  static result collect(child_process& p, const std::string& err_path, std::chrono::milliseconds bound) {
    result r;
    r.code = p.wait(bound);
    BOOST_REQUIRE_MESSAGE(r.code != -1, "baton did not exit in time");
    // It has exited: whatever it printed is in the pipe, and the end of output follows.
    try {
      for (;;)
        r.out.push_back(p.read_line(5s));
    } catch (const std::runtime_error&) {
    }
    r.err = read_file(err_path);
    return r;
  }

  result run(std::vector<std::string> args, bool with_server = true) {
    auto [p, err] = start(std::move(args), with_server);
    return collect(*p, err, command_bound);
  }

  http_reply get_lock(const std::string& key) { return server.client().get("/v1/locks/" + key); }
};

void check_error_line(const result& r, int code) {
  BOOST_TEST(r.code == code);
  BOOST_TEST(r.out.empty());
  BOOST_TEST(line_count(r.err) == 1u, "stderr: " << r.err);
  BOOST_TEST(r.err.rfind("baton: ", 0) == 0u, "stderr: " << r.err);
}

// Shell text that writes `value` into the file `name`, renamed into place so a reader never sees half a pid.
std::string publish(const cli_fixture& f, const std::string& value, const std::string& name) {
  return "echo " + value + " > " + f.path(name + ".tmp") + " && mv " + f.path(name + ".tmp") + " " +
         f.path(name);
}

// `baton exec KEY options -- sh -c ...`: the shell starts a grandchild in its group, writes both pids, waits.
std::vector<std::string> exec_family(const cli_fixture& f, std::vector<std::string> options,
                                     const std::string& prelude = "") {
  options.insert(options.begin(), "exec");
  for (std::string a : {"--", "/bin/sh", "-c"})
    options.push_back(a);
  options.push_back(prelude + "sleep 1000 & " + publish(f, "$!", "grandchild") + "; " +
                    publish(f, "$$", "child") + "; wait");
  return options;
}

struct family {
  int child = 0;
  int grandchild = 0;
  ~family() {
    // Never leave a sleeper behind, whatever the test concluded.
    if (grandchild > 0 && !process_gone(grandchild)) ::kill(grandchild, SIGKILL);
    if (child > 0 && !process_gone(child)) ::kill(child, SIGKILL);
  }
};

void wait_for_family(const cli_fixture& f, family& fam) {
  BOOST_REQUIRE(eventually([&] {
    return std::filesystem::exists(f.path("child")) && std::filesystem::exists(f.path("grandchild"));
  }));
  fam.child = std::stoi(read_file(f.path("child")));
  fam.grandchild = std::stoi(read_file(f.path("grandchild")));
  BOOST_TEST(!process_gone(fam.child));
  BOOST_TEST(!process_gone(fam.grandchild));
  BOOST_TEST(::getpgid(fam.grandchild) == fam.child);  // the command leads its own group
}

// The command of the overlap tests (overlap.hpp), with its pid in "child" and its times in "stamps".
std::string stamping_command(const cli_fixture& f) {
  return stamping_script(f.path("child"), f.path("stamps"));
}

// Waits until the stamping command has written; returns its pid.
int await_stamps(const cli_fixture& f) {
  BOOST_REQUIRE(eventually(
      [&] { return std::filesystem::exists(f.path("child")) && last_stamp(f.path("stamps")) > 0; }));
  return std::stoi(read_file(f.path("child")));
}

// SIGCONT on the way out, so a failed assertion never leaves batond stopped.
struct paused_server {
  explicit paused_server(batond_process& s) : server(s) { server.process().signal(SIGSTOP); }
  ~paused_server() { server.process().signal(SIGCONT); }
  batond_process& server;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(cli, cli_fixture)

BOOST_AUTO_TEST_CASE(acquire_get_renew_release_round_trip_prints_the_servers_answers) {
  auto a = run({"acquire", "jobs/a", "--ttl", "10s", "--owner", "worker-a"});
  BOOST_REQUIRE(a.code == 0);
  BOOST_TEST(a.err.empty());
  auto acquired = a.json().as_object();
  BOOST_TEST(acquired.at("key").as_string() == "jobs/a");
  BOOST_TEST(acquired.at("owner").as_string() == "worker-a");
  BOOST_TEST(acquired.at("ttl_ms").to_number<std::int64_t>() == 10'000);
  const auto token = acquired.at("token").to_number<std::uint64_t>();
  BOOST_TEST(token >= 1u);

  auto g = run({"get", "jobs/a"}).json().as_object();
  BOOST_TEST(g.at("held").as_bool());
  BOOST_TEST(g.at("owner").as_string() == "worker-a");
  BOOST_TEST(g.at("token").to_number<std::uint64_t>() == token);
  BOOST_TEST(g.at("ttl_remaining_ms").to_number<std::int64_t>() > 0);

  auto r = run({"renew", "jobs/a", "--owner", "worker-a", "--token", std::to_string(token), "--ttl", "1m"});
  BOOST_REQUIRE(r.code == 0);
  BOOST_TEST(r.json().at("ttl_ms").to_number<std::int64_t>() == 60'000);
  BOOST_TEST(r.json().at("token").to_number<std::uint64_t>() == token);
  // The server now counts the longer TTL.
  BOOST_TEST(get_lock("jobs%2Fa").json.at("ttl_remaining_ms").to_number<std::int64_t>() > 10'000);

  auto rel = run({"release", "jobs/a", "--owner", "worker-a", "--token", std::to_string(token)});
  BOOST_REQUIRE(rel.code == 0);
  BOOST_TEST(rel.json().at("released").as_bool());
  BOOST_TEST(rel.json().at("outcome").as_string() == "released");
  BOOST_TEST(get_lock("jobs%2Fa").status == 404);

  auto again = run({"release", "jobs/a", "--owner", "worker-a", "--token", std::to_string(token)});
  BOOST_TEST(again.code == 0);
  BOOST_TEST(again.json().at("outcome").as_string() == "already_free");
  auto free = run({"get", "jobs/a"});
  BOOST_TEST(free.code == 0);
  BOOST_TEST(json::serialize(free.json()) == R"({"key":"jobs/a","held":false})");
}

// docs/cli.md, "ls" and "break": a table or JSON lines in key order, paged up to --limit; a break prints
// the lease it ended, refuses another token or a free key with 77, and the holder's renew is then refused.
BOOST_AUTO_TEST_CASE(ls_lists_held_locks_and_break_ends_one_for_the_next_holder) {
  for (const char* key : {"ops/c", "ops/a", "ops/b", "elsewhere"})
    BOOST_REQUIRE(run({"acquire", key, "--ttl", "1m", "--owner", "w"}).code == 0);
  auto table = run({"ls", "ops/"});
  BOOST_REQUIRE(table.code == 0);
  BOOST_REQUIRE(table.out.size() == 4u);
  BOOST_TEST(table.out[0].rfind("KEY", 0) == 0u);
  BOOST_TEST(table.out[1].rfind("ops/a ", 0) == 0u);
  BOOST_TEST(table.out[3].rfind("ops/c ", 0) == 0u);
  BOOST_TEST(table.err.empty());

  auto lines = run({"ls", "ops/", "--json", "--limit", "2"});
  BOOST_REQUIRE(lines.code == 0);
  BOOST_REQUIRE(lines.out.size() == 2u);
  const auto first = json::parse(lines.out[0]).as_object();
  BOOST_TEST(first.at("key").as_string() == "ops/a");
  BOOST_TEST(first.at("kind").as_string() == "lock");
  BOOST_TEST(first.at("owner").as_string() == "w");
  BOOST_TEST(first.at("waiters").to_number<std::int64_t>() == 0);
  // More remain: stderr says where to continue, and --after does.
  BOOST_TEST(lines.err.find("--after ops/b") != std::string::npos, lines.err);
  auto rest = run({"ls", "ops/", "--json", "--after", "ops/b"});
  BOOST_REQUIRE(rest.out.size() == 1u);
  BOOST_TEST(json::parse(rest.out[0]).at("key").as_string() == "ops/c");
  BOOST_TEST(run({"ls", "--json"}).out.size() == 4u);  // no prefix: every key
  check_error_line(run({"ls", "ops/", "--limit", "0"}), 64);

  const auto token = get_lock("ops%2Fa").json.at("token").to_number<std::uint64_t>();
  check_error_line(run({"break", "ops/a", "--token", std::to_string(token + 100)}), 77);
  auto broke = run({"break", "ops/a", "--token", std::to_string(token)});
  BOOST_REQUIRE(broke.code == 0);
  BOOST_TEST(broke.json().at("broken").as_bool());
  BOOST_TEST(broke.json().at("owner").as_string() == "w");
  BOOST_TEST(broke.json().at("token").to_number<std::uint64_t>() == token);
  check_error_line(run({"break", "ops/a"}), 77);
  auto lost = run({"renew", "ops/a", "--owner", "w", "--token", std::to_string(token), "--ttl", "1m"});
  check_error_line(lost, 76);
  BOOST_TEST(lost.err.find("broken") != std::string::npos, lost.err);
  auto next = run({"acquire", "ops/a", "--ttl", "1m", "--owner", "x"});
  BOOST_REQUIRE(next.code == 0);
  BOOST_TEST(next.json().at("token").to_number<std::uint64_t>() > token);
}

BOOST_AUTO_TEST_CASE(acquire_without_owner_uses_identity_and_random_suffix_and_keeps_the_lock_after_exit) {
  auto a = run({"acquire", "k", "--ttl", "30s"});
  BOOST_REQUIRE(a.code == 0);
  const std::string owner(a.json().at("owner").as_string());
  BOOST_TEST(owner.find('#') != std::string::npos);
  BOOST_TEST(owner.find(':') < owner.find('#'));  // <hostname>:<pid>#<random>
  // baton has exited; give a background release (the SDK lease destructor's) every chance to show up.
  std::this_thread::sleep_for(300ms);
  auto held = get_lock("k");
  BOOST_REQUIRE(held.status == 200);
  BOOST_TEST(held.json.at("owner").as_string() == owner);
}

BOOST_AUTO_TEST_CASE(acquire_of_a_held_key_exits_not_acquired_naming_the_holder_on_stderr_only) {
  BOOST_REQUIRE(run({"acquire", "busy", "--ttl", "30s", "--owner", "first"}).code == 0);
  auto second = run({"acquire", "busy", "--ttl", "30s", "--owner", "second"});
  check_error_line(second, not_acquired);
  BOOST_TEST(second.err.find("first") != std::string::npos);
}

// An owner (or key) with a bidirectional override or a line separator cannot reorder or forge what the
// terminal shows: the CLI writes them escaped, in its messages and in its JSON.
BOOST_AUTO_TEST_CASE(layout_controls_in_owners_and_keys_are_escaped_in_the_clis_output) {
  const std::string rlo = "\xe2\x80\xae";   // U+202E RIGHT-TO-LEFT OVERRIDE
  const std::string lsep = "\xe2\x80\xa8";  // U+2028 LINE SEPARATOR
  BOOST_REQUIRE(
      run({"acquire", "spoof" + lsep + "key", "--ttl", "30s", "--owner", "evil" + rlo + "reversed"}).code ==
      0);
  auto second = run({"acquire", "spoof" + lsep + "key", "--ttl", "30s", "--owner", "second"});
  check_error_line(second, not_acquired);
  BOOST_TEST(second.err.find(rlo) == std::string::npos, second.err);
  BOOST_TEST(second.err.find(lsep) == std::string::npos, second.err);
  BOOST_TEST(second.err.find("\\u202e") != std::string::npos, second.err);
  BOOST_TEST(second.err.find("\\u2028") != std::string::npos, second.err);
  auto got = run({"get", "spoof" + lsep + "key"});
  BOOST_TEST(got.code == 0, got.err);
  BOOST_REQUIRE(!got.out.empty());
  const auto& line = got.out.front();
  BOOST_TEST(line.find(rlo) == std::string::npos, line);
  BOOST_TEST(line.find("\\u202e") != std::string::npos, line);
  // Still the same JSON to a parser.
  BOOST_TEST(std::string(got.json().at("owner").as_string()) == "evil" + rlo + "reversed");
}

BOOST_AUTO_TEST_CASE(acquire_again_with_the_same_owner_supersedes_the_old_token) {
  auto first = run({"acquire", "same", "--ttl", "30s", "--owner", "me"});
  auto second = run({"acquire", "same", "--ttl", "30s", "--owner", "me"});
  BOOST_REQUIRE(first.code == 0);
  BOOST_REQUIRE(second.code == 0);
  const auto old_token = first.json().at("token").to_number<std::uint64_t>();
  BOOST_TEST(second.json().at("token").to_number<std::uint64_t>() > old_token);
  auto stale = run({"renew", "same", "--owner", "me", "--token", std::to_string(old_token), "--ttl", "30s"});
  check_error_line(stale, lease_lost);
  BOOST_TEST(stale.err.find("token_mismatch") != std::string::npos);
  auto wrong = run({"release", "same", "--owner", "me", "--token", std::to_string(old_token)});
  check_error_line(wrong, not_owner);
  BOOST_TEST(get_lock("same").status == 200);
}

BOOST_AUTO_TEST_CASE(acquire_wait_takes_the_lock_once_the_holder_releases) {
  auto holder = run({"acquire", "handover", "--ttl", "10m", "--owner", "holder"});
  BOOST_REQUIRE(holder.code == 0);
  const auto token = holder.json().at("token").to_number<std::uint64_t>();
  auto [waiter, err] = start({"acquire", "handover", "--ttl", "30s", "--owner", "waiter", "--wait"});
  std::this_thread::sleep_for(500ms);
  BOOST_TEST(waiter->running());
  BOOST_REQUIRE(run({"release", "handover", "--owner", "holder", "--token", std::to_string(token)}).code ==
                0);
  auto r = collect(*waiter, err, command_bound);
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.json().at("owner").as_string() == "waiter");
  BOOST_TEST(r.json().at("token").to_number<std::uint64_t>() > token);
}

BOOST_AUTO_TEST_CASE(acquire_wait_timeout_gives_up_with_not_acquired) {
  BOOST_REQUIRE(run({"acquire", "long", "--ttl", "10m", "--owner", "holder"}).code == 0);
  auto r = run({"acquire", "long", "--ttl", "30s", "--wait-timeout", "300ms"});
  check_error_line(r, not_acquired);
  BOOST_TEST(get_lock("long").json.at("owner").as_string() == "holder");
}

BOOST_AUTO_TEST_CASE(bad_arguments_exit_usage_with_one_line_on_stderr) {
  const std::vector<std::vector<std::string>> cases{
      {"acquire", "k", "--ttl", "10"},
      {"acquire", "k", "--ttl", "10x"},
      {"acquire", "k", "--ttl", "0s"},
      {"acquire", "k"},
      {"acquire", "--ttl", "1s"},
      {"acquire", "k", "--ttl", "1s", "--wait-timeout", "soon"},
      {"acquire", "k", "--ttl", "1s", "--bogus"},
      {"acquire", "k", "extra", "--ttl", "1s"},
      {"renew", "k", "--owner", "o", "--ttl", "1s"},
      {"renew", "k", "--owner", "o", "--token", "abc", "--ttl", "1s"},
      {"release", "k", "--token", "1"},
      {"release", "k", "--owner", "o", "--token", "0"},
      {"get"},
      {"frobnicate", "k"},
      {},
      {"exec", "k", "--ttl", "1s"},
      {"exec", "k", "--ttl", "1s", "--grace", "later", "--", "true"},
      {"exec", "k", "--ttl", "1s", "--renew-every", "5s", "--", "true"},
      // A lost lease leaves half its safety margin (ttl/10) for the grace: 150 ms here.
      {"exec", "k", "--ttl", "3s", "--grace", "5s", "--", "true"},
      {"exec", "k", "--ttl", "3s", "--grace", "151ms", "--", "true"},
      {"exec", "k", "--ttl", "3s", "--safety-margin", "3s", "--", "true"},
      {"get", "k", "--server", "not a url"},
  };
  for (const auto& args : cases) {
    auto r = run(args, std::find(args.begin(), args.end(), "--server") == args.end());
    std::string shown;
    for (const auto& a : args)
      shown += a + " ";
    BOOST_TEST_CONTEXT("baton " << shown) {
      check_error_line(r, usage);
    }
  }
}

BOOST_AUTO_TEST_CASE(errors_never_show_the_password_of_an_etcd_url) {
  const std::string password = "s3cret-pw";
  const std::string etcd = "etcd://baton:" + password + "@127.0.0.1:" + std::to_string(closed_port());
  struct error_case {
    std::vector<std::string> args;
    int code;
  };
  const std::vector<error_case> cases{
      {{"get", "k", "--server", etcd, "--ca-file", path("ca.pem")}, usage},  // TLS settings need etcds://
      {{"--server=" + etcd}, usage},                                         // no command
      {{"get", "k", "--server", "ftp://baton:" + password + "@127.0.0.1:1"}, usage},
      {{"get", "k", "--server", "etcds://baton:" + password + "@[::1%lo]:1", "--ca-file", path("none.pem")},
       usage},
      {{"conformance", "--server",
        "http://baton:" + password + "@127.0.0.1:" + std::to_string(closed_port())},
       unavailable},
      {{"get", "k", "--server", etcd}, unavailable},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT("baton " << c.args.front() << " " << c.args.back()) {
      auto r = run(c.args, false);
      check_error_line(r, c.code);
      BOOST_TEST(r.err.find(password) == std::string::npos, r.err);
    }
  }
  // The same URL from the environment.
  ::setenv("BATON_SERVER", etcd.c_str(), 1);
  auto from_env = run({"get", "k", "--ca-file", path("ca.pem")}, false);
  ::unsetenv("BATON_SERVER");
  check_error_line(from_env, usage);
  BOOST_TEST(from_env.err.find(password) == std::string::npos, from_env.err);
  BOOST_TEST(from_env.err.find("etcd://***@127.0.0.1:") != std::string::npos, from_env.err);
}

BOOST_AUTO_TEST_CASE(help_lists_the_commands_and_exit_codes) {
  auto top = run({"--help"}, false);
  BOOST_TEST(top.code == 0);
  std::string text;
  for (const auto& l : top.out)
    text += l + "\n";
  for (const char* word :
       {"acquire", "renew", "release", "get", "exec", "64", "69", "75", "76", "77", "BATON_SERVER"})
    BOOST_TEST(text.find(word) != std::string::npos, "--help lacks " << word);
  for (const char* cmd : {"acquire", "renew", "release", "get", "exec"}) {
    auto r = run({cmd, "--help"}, false);
    BOOST_TEST(r.code == 0);
    BOOST_TEST(!r.out.empty());
    BOOST_TEST(r.out.front().find(std::string("baton ") + cmd) != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(unreachable_server_exits_unavailable) {
  const std::string url = "http://127.0.0.1:" + std::to_string(closed_port());
  check_error_line(run({"get", "k", "--server", url}, false), unavailable);
  check_error_line(run({"acquire", "k", "--ttl", "1s", "--server", url}, false), unavailable);
  check_error_line(run({"release", "k", "--owner", "o", "--token", "1", "--server", url}, false),
                   unavailable);
  auto e = run({"exec", "k", "--ttl", "1s", "--server", url, "--", "/bin/sh", "-c", "touch " + path("ran")},
               false);
  check_error_line(e, unavailable);
  BOOST_TEST(!std::filesystem::exists(path("ran")));
}

BOOST_AUTO_TEST_CASE(server_comes_from_the_environment_unless_the_flag_names_one) {
  BOOST_REQUIRE(run({"acquire", "envkey", "--ttl", "30s", "--owner", "o"}).code == 0);
  ::setenv("BATON_SERVER", server.url().c_str(), 1);
  auto from_env = run({"get", "envkey"}, false);
  ::setenv("BATON_SERVER", ("http://127.0.0.1:" + std::to_string(closed_port())).c_str(), 1);
  auto flag_wins = run({"get", "envkey", "--server", server.url()}, false);
  auto env_unreachable = run({"get", "envkey"}, false);
  ::unsetenv("BATON_SERVER");
  BOOST_TEST(from_env.code == 0);
  BOOST_TEST(from_env.json().at("owner").as_string() == "o");
  BOOST_TEST(flag_wins.code == 0);
  BOOST_TEST(env_unreachable.code == unavailable);
}

BOOST_AUTO_TEST_CASE(exec_gives_the_command_its_token_key_and_owner_and_releases_afterwards) {
  auto r = run({"exec", "jobs/nightly", "--ttl", "10s", "--", "/bin/sh", "-c",
                "echo \"$BATON_FENCING_TOKEN $BATON_LOCK_KEY $BATON_LOCK_OWNER\" > " + path("env")});
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.err.empty());
  std::istringstream env(read_file(path("env")));
  std::uint64_t token = 0;
  std::string key, owner;
  env >> token >> key >> owner;
  BOOST_TEST(token >= 1u);
  BOOST_TEST(key == "jobs/nightly");
  BOOST_TEST(owner.find('#') != std::string::npos);
  BOOST_TEST(get_lock("jobs%2Fnightly").status == 404);  // released when the command ended
  // The next holder gets a newer token: the command's token was real.
  auto next = run({"acquire", "jobs/nightly", "--ttl", "10s"});
  BOOST_TEST(next.json().at("token").to_number<std::uint64_t>() > token);
}

BOOST_AUTO_TEST_CASE(exec_passes_the_commands_exit_status_through) {
  BOOST_TEST(run({"exec", "k", "--ttl", "10s", "--", "/bin/sh", "-c", "exit 7"}).code == 7);
  BOOST_TEST(run({"exec", "k", "--ttl", "10s", "--", "/bin/sh", "-c", "kill -USR1 $$"}).code ==
             128 + SIGUSR1);
  BOOST_TEST(run({"exec", "k", "--ttl", "10s", "--", "true"}).code == 0);  // found through PATH
  BOOST_TEST(get_lock("k").status == 404);
}

BOOST_AUTO_TEST_CASE(exec_of_a_missing_command_exits_127_and_releases) {
  auto r = run({"exec", "k", "--ttl", "10s", "--", path("no-such-command")});
  check_error_line(r, 127);
  BOOST_TEST(get_lock("k").status == 404);
}

BOOST_AUTO_TEST_CASE(exec_of_a_held_key_does_not_run_the_command) {
  BOOST_REQUIRE(run({"acquire", "k", "--ttl", "10m", "--owner", "holder"}).code == 0);
  auto r = run({"exec", "k", "--ttl", "10s", "--", "/bin/sh", "-c", "touch " + path("ran")});
  check_error_line(r, not_acquired);
  BOOST_TEST(!std::filesystem::exists(path("ran")));
}

BOOST_AUTO_TEST_CASE(exec_wait_runs_the_command_once_the_holder_releases) {
  auto holder = run({"acquire", "k", "--ttl", "10m", "--owner", "holder"});
  const auto token = holder.json().at("token").to_number<std::uint64_t>();
  auto [p, err] = start({"exec", "k", "--ttl", "10s", "--wait", "--", "/bin/sh", "-c",
                         "echo $BATON_FENCING_TOKEN > " + path("token")});
  std::this_thread::sleep_for(500ms);
  BOOST_TEST(!std::filesystem::exists(path("token")));
  BOOST_REQUIRE(run({"release", "k", "--owner", "holder", "--token", std::to_string(token)}).code == 0);
  auto r = collect(*p, err, command_bound);
  BOOST_TEST(r.code == 0);
  BOOST_TEST(std::stoull(read_file(path("token"))) > token);
}

BOOST_AUTO_TEST_CASE(exec_kills_the_whole_process_group_when_the_lease_is_lost) {
  auto [p, err] = start(exec_family(*this, {"lost", "--ttl", "1s"}));
  family fam;
  wait_for_family(*this, fam);
  {
    // No renew is answered any more: the local deadline passes and the lease is lost.
    paused_server paused(server);
    const int code = p->wait(event_bound);
    BOOST_TEST(code == lease_lost);
    BOOST_TEST(eventually([&] { return process_gone(fam.child) && process_gone(fam.grandchild); }, 5s));
  }
  auto r = collect(*p, err, command_bound);
  BOOST_TEST_MESSAGE("stderr: " << r.err);
  BOOST_TEST(r.err.find("was lost") != std::string::npos, "stderr: " << r.err);
}

// Issue 24, defect 3: the grace after a loss outlasted the lease. Renewals are cut off (a partition between
// exec and batond); the next holder's acquire (straight to batond) is answered once the server has expired
// the lease. By then the first command, which ignores SIGTERM, must be dead and have written its last. With
// --ttl 6s, SIGKILL comes by 5.7 s after the last renew was sent, the server expires the lease 6 s after it
// received it: 300 ms to spare. The old exec sent SIGKILL 5 s after SIGTERM, at 10.4 s.
BOOST_AUTO_TEST_CASE(a_command_ignoring_sigterm_is_dead_before_the_next_holder_gets_the_lost_lease) {
  fault_proxy proxy(server.port());
  const auto proxy_url = "http://127.0.0.1:" + std::to_string(proxy.port());
  auto [p, err] = start({"--server", proxy_url, "exec", "overlap", "--ttl", "6s", "--", "/bin/sh", "-c",
                         stamping_command(*this)},
                        false);
  family fam;
  fam.child = await_stamps(*this);
  proxy.set_blackhole(true);
  auto next = run({"acquire", "overlap", "--ttl", "30s", "--owner", "next", "--wait"});
  const auto next_started = wall_ns();
  const bool first_gone = process_gone(fam.child);
  BOOST_REQUIRE(next.code == 0);
  BOOST_TEST(first_gone, "the first command still ran when the next holder got the lock");
  BOOST_TEST(p->wait(event_bound) == lease_lost);
  auto r = collect(*p, err, command_bound);
  BOOST_TEST(r.err.find("lost") != std::string::npos, "stderr: " << r.err);
  // exec has ended, and its command's group with it: every write is in the file.
  check_written_before(path("stamps"), next_started);
}

// Issue 24, defect 8: a stopped exec left its command unsupervised. exec is SIGSTOPped (it neither renews
// nor stops anything); its supervisor process must still stop the command by the lease's deadline, before
// the next holder gets the lock. Bounds as above.
BOOST_AUTO_TEST_CASE(a_stopped_exec_still_has_its_command_killed_before_the_lease_can_expire) {
  auto [p, err] = start({"exec", "frozen", "--ttl", "6s", "--", "/bin/sh", "-c", stamping_command(*this)});
  family fam;
  fam.child = await_stamps(*this);
  result next;
  std::int64_t next_started = 0;
  {
    stopped_process stopped(*p);
    next = run({"acquire", "frozen", "--ttl", "30s", "--owner", "next", "--wait"});
    next_started = wall_ns();
    const bool first_gone = process_gone(fam.child);
    BOOST_REQUIRE(next.code == 0);
    BOOST_TEST(first_gone, "the first command still ran when the next holder got the lock");
  }
  // Resumed, exec finds its lease lost (and its command gone), and ends.
  auto r = collect(*p, err, command_bound);
  BOOST_TEST(r.code == lease_lost, "stderr: " << r.err);
  check_written_before(path("stamps"), next_started);
}

// A command is never started without its supervisor: when the guard cannot arm its deadline timer
// (timerfd_create fails, injected by baton-faultproc), exec exits 71 without running it, and releases.
BOOST_AUTO_TEST_CASE(exec_does_not_run_a_command_its_supervisor_cannot_time) {
  auto err = path("stderr-guard");
  child_process p(argv({"exec", "k", "--ttl", "10s", "--", "/bin/sh", "-c", "touch " + path("ran")}), err,
                  process_faults("timerfd-emfile"));
  auto r = collect(p, err, command_bound);
  check_error_line(r, 71);
  BOOST_TEST(
      r.err.find("guard: cannot arm its CLOCK_BOOTTIME timer: Too many open files") != std::string::npos,
      r.err);
  BOOST_TEST(!std::filesystem::exists(path("ran")));
  BOOST_TEST(get_lock("k").status == 404);
}

// Issue 24: the guard ignored a failed re-arm of its timer. After a renew it took the new deadline although
// its timer could not be set for it, and once the timer had fired for the old one it had none: a stopped or
// starved exec would have left the command running past the lease. Now it keeps the deadline its timer holds
// (the first one here: timerfd_settime fails in the guard after its first call, injected by baton-faultproc)
// and stops the command there, ahead of the lease, which exec renews all along; exec says why.
BOOST_AUTO_TEST_CASE(a_guard_that_cannot_rearm_its_timer_stops_the_command_at_the_deadline_it_holds) {
  auto err = path("stderr-rearm");
  const auto started = std::chrono::steady_clock::now();
  // TTL 6 s: the first local deadline comes 5.4 s after the acquire was sent; renewals every 0.4-0.6 s, so
  // a loaded machine does not cost exec its lease before then.
  child_process p(argv({"exec", "rearm", "--ttl", "6s", "--renew-every", "500ms", "--", "/bin/sh", "-c",
                        "exec sleep 120"}),
                  err, process_faults("guard-rearm-einval"));
  auto r = collect(p, err, 30s);  // 5x the TTL; the command alone would run 120 s
  const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  BOOST_TEST_MESSAGE("exec ended after " << after << " s with " << r.code << "; stderr: " << r.err);
  // SIGTERM at the deadline; SIGKILL at once after it, since the timer cannot be armed for the grace either.
  BOOST_TEST((r.code == 128 + SIGTERM || r.code == 128 + SIGKILL), r.code);
  BOOST_TEST(after >= 5.0);  // not before the deadline the guard holds
  BOOST_TEST(r.err.find("guard cannot re-arm its timer for the renewed lease (Invalid argument)") !=
                 std::string::npos,
             r.err);
  BOOST_TEST(get_lock("rearm").status == 404);  // the lease was still held, and released
}

// The supervisor also ends what the command started when exec dies at once (SIGKILL): PR_SET_PDEATHSIG
// reaches the command only, and its children were left running unsupervised.
BOOST_AUTO_TEST_CASE(killing_exec_kills_the_commands_whole_group) {
  auto [p, err] = start(exec_family(*this, {"k", "--ttl", "10s"}));
  family fam;
  wait_for_family(*this, fam);
  p->signal(SIGKILL);
  BOOST_TEST(p->wait(event_bound) == 128 + SIGKILL);
  BOOST_TEST(eventually([&] { return process_gone(fam.child) && process_gone(fam.grandchild); }, 5s));
}

BOOST_AUTO_TEST_CASE(sigterm_to_exec_is_forwarded_to_the_group_and_the_lock_released) {
  auto [p, err] = start(exec_family(*this, {"k", "--ttl", "10s"}));
  family fam;
  wait_for_family(*this, fam);
  p->signal(SIGTERM);
  auto r = collect(*p, err, command_bound);
  BOOST_TEST(r.code == 128 + SIGTERM);  // the command's own status: SIGTERM ended it
  BOOST_TEST(eventually([&] { return process_gone(fam.child) && process_gone(fam.grandchild); }, 5s));
  BOOST_TEST(get_lock("k").status == 404);
}

// The same for a semaphore's permit (exec --permits): the command holds slot 0 of 2, and SIGTERM ends the
// command and frees the permit, so the key has no holder left.
BOOST_AUTO_TEST_CASE(sigterm_to_exec_with_permits_releases_the_permit) {
  auto [p, err] = start(exec_family(*this, {"pool", "--permits", "2", "--ttl", "10s"}));
  family fam;
  wait_for_family(*this, fam);
  auto held = get_lock("pool");
  BOOST_TEST_REQUIRE(held.status == 200);
  BOOST_TEST(held.json.at("permits").to_number<int>() == 2);
  const auto& holders = held.json.at("holders").as_array();
  BOOST_TEST_REQUIRE(holders.size() == 1u);
  BOOST_TEST(holders[0].at("slot").to_number<int>() == 0);
  p->signal(SIGTERM);
  auto r = collect(*p, err, command_bound);
  BOOST_TEST(r.code == 128 + SIGTERM);
  BOOST_TEST(eventually([&] { return process_gone(fam.child) && process_gone(fam.grandchild); }, 5s));
  BOOST_TEST(get_lock("pool").status == 404);
}

BOOST_AUTO_TEST_CASE(a_group_that_ignores_sigterm_is_killed_after_the_grace_period) {
  auto [p, err] = start(exec_family(*this, {"k", "--ttl", "10s", "--grace", "500ms"}, "trap '' TERM; "));
  family fam;
  wait_for_family(*this, fam);
  p->signal(SIGINT);
  auto r = collect(*p, err, command_bound);
  BOOST_TEST(r.code == 128 + SIGKILL);
  BOOST_TEST(eventually([&] { return process_gone(fam.child) && process_gone(fam.grandchild); }, 5s));
  BOOST_TEST(get_lock("k").status == 404);
}

BOOST_AUTO_TEST_CASE(processes_the_command_leaves_in_its_group_are_stopped_before_the_release) {
  auto r = run({"exec", "k", "--ttl", "10s", "--grace", "500ms", "--", "/bin/sh", "-c",
                "sleep 1000 & echo $! > " + path("gc.tmp") + " && mv " + path("gc.tmp") + " " +
                    path("grandchild") + "; exit 3"});
  BOOST_TEST(r.code == 3);
  family fam;
  fam.grandchild = std::stoi(read_file(path("grandchild")));
  BOOST_TEST(eventually([&] { return process_gone(fam.grandchild); }, 5s));
  BOOST_TEST(get_lock("k").status == 404);
}

BOOST_AUTO_TEST_SUITE_END()
