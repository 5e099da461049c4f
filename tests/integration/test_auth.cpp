// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE auth
#include <boost/test/unit_test.hpp>

#include "batond_fixture.hpp"
#include "eventually.hpp"
#include "lock_requests.hpp"
#include "token_hash.hpp"

#include <boost/json/serialize.hpp>

#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>
#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;
namespace json = boost::json;

namespace {

constexpr auto event_bound = 30s;

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::trunc);
  out << text;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string str(const http_reply& r, const char* field) {
  return std::string(r.json.at(field).as_string());
}

const std::string tokens_text = "# test clients\n" + hash_of("writer-token") + " writer rw:jobs/\n" +
                                hash_of("reader-token") + " reader ro:jobs/\n" + hash_of("other-token") +
                                " other rw:other/\n" + hash_of("monitor-token") + " monitor\n";

struct auth_fixture {
  temp_dir data;
  temp_dir scratch;
  std::filesystem::path tokens = scratch.path() / "tokens";
  std::filesystem::path log = scratch.path() / "batond.log";
  std::unique_ptr<batond_process> server;

  explicit auth_fixture(const std::string& text = tokens_text) {
    write_file(tokens, text);
    start();
  }
  void start() { server = std::make_unique<batond_process>(data.path(), args(), 0, log.string()); }
  std::vector<std::string> args() const { return {"--tokens-file", tokens.string()}; }

  std::unique_ptr<http_client> as(const std::string& token) const {
    auto c = std::make_unique<http_client>(server->port());
    if (!token.empty()) c->set_authorization("Bearer " + token);
    return c;
  }
};

struct route {
  std::string name;
  std::string method;
  std::string target;
  std::function<std::string()> body;
  bool writes;
};

}  // namespace

BOOST_AUTO_TEST_CASE(every_route_answers_the_auth_matrix) {
  auth_fixture f;
  // A lease for renew and release to act on, taken by the writer.
  auto writer = f.as("writer-token");
  auto held = writer->post("/v1/locks/jobs%2Fheld/acquire", acquire_body("w", 60000));
  BOOST_REQUIRE_EQUAL(held.status, 200);
  const auto token = token_of(held);

  const std::vector<route> routes = {
      {"acquire", "POST", "/v1/locks/jobs%2Fnew/acquire", [] { return acquire_body("w", 60000); }, true},
      {"renew", "POST", "/v1/locks/jobs%2Fheld/renew", [&] { return renew_body("w", token, 60000); }, true},
      {"release", "POST", "/v1/locks/jobs%2Fgone/release", [] { return release_body("w", 1); }, true},
      {"get", "GET", "/v1/locks/jobs%2Fheld", [] { return std::string(); }, false},
      {"long-poll", "GET", "/v1/locks/jobs%2Fheld?wait_ms=1&token=" + std::to_string(token),
       [] { return std::string(); }, false},
  };
  for (const auto& r : routes) {
    BOOST_TEST_CONTEXT("route " << r.name) {
      auto none = f.as("")->request(r.method, r.target, r.body());
      BOOST_TEST(none.status == 401);
      BOOST_TEST(str(none, "error") == "unauthorized");
      BOOST_TEST(none.www_authenticate == R"(Bearer realm="batond")");

      auto wrong = f.as("not-a-token")->request(r.method, r.target, r.body());
      BOOST_TEST(wrong.status == 401);
      BOOST_TEST(str(wrong, "message") == "the bearer token is not valid");
      BOOST_TEST(wrong.www_authenticate == R"(Bearer realm="batond", error="invalid_token")");

      auto prefix = f.as("other-token")->request(r.method, r.target, r.body());
      BOOST_TEST(prefix.status == 403);
      BOOST_TEST(str(prefix, "error") == "forbidden");
      BOOST_TEST(str(prefix, "message") == "client \"other\" has no access to this key");

      auto reader = f.as("reader-token")->request(r.method, r.target, r.body());
      if (r.writes) {
        BOOST_TEST(reader.status == 403);
        BOOST_TEST(str(reader, "message") == "client \"reader\" may only read this key");
      } else {
        BOOST_TEST(reader.status == 200);
        BOOST_TEST(str(reader, "client") == "writer");
      }

      auto monitor = f.as("monitor-token")->request(r.method, r.target, r.body());
      BOOST_TEST(monitor.status == 403);

      auto right = writer->request(r.method, r.target, r.body());
      BOOST_TEST(right.status == 200, "status " << right.status << " body " << right.body);
    }
  }
  // Nothing a refused request carried took effect: the refused acquires left the key to the writer's one.
  auto got = writer->get("/v1/locks/jobs%2Fnew");
  BOOST_TEST(got.status == 200);
  BOOST_TEST(str(got, "owner") == "w");
  BOOST_TEST(str(got, "client") == "writer");

  // /metrics: any valid token; /healthz: open.
  BOOST_TEST(f.as("")->get("/metrics").status == 401);
  BOOST_TEST(f.as("not-a-token")->get("/metrics").status == 401);
  BOOST_TEST(f.as("monitor-token")->get("/metrics").status == 200);
  BOOST_TEST(f.as("reader-token")->get("/metrics").status == 200);
  BOOST_TEST(f.as("")->get("/healthz").status == 200);
  BOOST_TEST(f.as("not-a-token")->get("/healthz").status == 200);
  // An unknown route or a bad key says nothing before the token is checked.
  BOOST_TEST(f.as("")->get("/v1/nothing").status == 401);
  BOOST_TEST(f.as("writer-token")->get("/v1/nothing").status == 404);
  BOOST_TEST(f.as("")->get("/v1/locks/").status == 401);
  // Other schemes and malformed headers are refused as missing tokens.
  auto raw = http_client::raw(
      f.server->port(),
      "GET /v1/locks/jobs%2Fheld HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic d3JpdGVy\r\n\r\n");
  BOOST_TEST(raw.status == 401);
  BOOST_TEST(str(raw, "message") == "the Authorization header must be \"Bearer <token>\"");
  raw = http_client::raw(
      f.server->port(),
      "GET /v1/locks/jobs%2Fheld HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: bearer writer-token\r\n\r\n");
  BOOST_TEST(raw.status == 200);
}

BOOST_AUTO_TEST_CASE(another_client_cannot_renew_release_or_take_over_a_lease_even_with_owner_and_token) {
  auth_fixture f(hash_of("alpha-token") + " alpha rw:jobs/\n" + hash_of("beta-token") + " beta rw:jobs/\n" +
                 hash_of("alpha-next") + " alpha rw:jobs/\n");
  auto alpha = f.as("alpha-token");
  auto beta = f.as("beta-token");
  auto got = alpha->post("/v1/locks/jobs%2Fx/acquire", acquire_body("host:1", 60000));
  BOOST_REQUIRE_EQUAL(got.status, 200);
  const auto token = token_of(got);

  auto check_bound = [&] {
    // beta knows the owner string and the token (they are not secrets) and has write access to the key.
    auto renew = beta->post("/v1/locks/jobs%2Fx/renew", renew_body("host:1", token, 60000));
    BOOST_TEST(renew.status == 409);
    BOOST_TEST(str(renew, "reason") == "owner_mismatch");
    auto release = beta->post("/v1/locks/jobs%2Fx/release", release_body("host:1", token));
    BOOST_TEST(release.status == 409);
    BOOST_TEST(str(release, "error") == "not_owner");
    auto take = beta->post("/v1/locks/jobs%2Fx/acquire", acquire_body("host:1", 60000));
    BOOST_TEST(take.status == 409);
    BOOST_TEST(str(take, "error") == "held");
    BOOST_TEST(str(take, "client") == "alpha");
    auto view = beta->get("/v1/locks/jobs%2Fx");
    BOOST_TEST(view.status == 200);
    BOOST_TEST(token_of(view) == token);
    BOOST_TEST(str(view, "owner") == "host:1");
    BOOST_TEST(str(view, "client") == "alpha");
  };
  check_bound();

  // The binding is durable: after a crash and a restart it still holds.
  f.server->kill9();
  f.start();
  alpha = f.as("alpha-token");
  beta = f.as("beta-token");
  check_bound();
  // The holder itself still renews, also with its second token (a rotation keeps the name).
  BOOST_TEST(alpha->post("/v1/locks/jobs%2Fx/renew", renew_body("host:1", token, 60000)).status == 200);
  auto next = f.as("alpha-next");
  BOOST_TEST(next->post("/v1/locks/jobs%2Fx/renew", renew_body("host:1", token, 60000)).status == 200);
  auto released = next->post("/v1/locks/jobs%2Fx/release", release_body("host:1", token));
  BOOST_TEST(released.status == 200);
  BOOST_TEST(str(released, "outcome") == "released");
  // Free again: beta may take it now.
  BOOST_TEST(beta->post("/v1/locks/jobs%2Fx/acquire", acquire_body("host:1", 60000)).status == 200);
}

BOOST_AUTO_TEST_CASE(sighup_reloads_the_tokens_file_and_a_bad_file_keeps_the_old_table) {
  auth_fixture f(hash_of("old-token") + " old rw:*\n");
  BOOST_TEST(f.as("old-token")->get("/v1/locks/k").status == 404);
  BOOST_TEST(f.as("new-token")->get("/v1/locks/k").status == 401);

  write_file(f.tokens, hash_of("new-token") + " new rw:*\n");
  f.server->process().signal(SIGHUP);
  BOOST_TEST(eventually([&] { return f.as("new-token")->get("/v1/locks/k").status == 404; }));
  BOOST_TEST(f.as("old-token")->get("/v1/locks/k").status == 401);  // revoked
  // A connection opened before the reload is checked against the new table on its next request.

  write_file(f.tokens, hash_of("third-token") + " third rw:*\nthis line is wrong\n");
  f.server->process().signal(SIGHUP);
  BOOST_TEST(
      eventually([&] { return read_file(f.log).find("event=tokens_reload_failed") != std::string::npos; }));
  BOOST_TEST(read_file(f.log).find(f.tokens.string() + ":2: token hash must be") != std::string::npos);
  BOOST_TEST(f.as("new-token")->get("/v1/locks/k").status == 404);    // still in force
  BOOST_TEST(f.as("third-token")->get("/v1/locks/k").status == 401);  // nothing of the bad file
  BOOST_TEST(f.as("")->get("/v1/locks/k").status == 401);             // never back to no authentication

  std::filesystem::remove(f.tokens);
  f.server->process().signal(SIGHUP);
  BOOST_TEST(
      eventually([&] { return read_file(f.log).find("cannot open the tokens file") != std::string::npos; }));
  BOOST_TEST(f.as("new-token")->get("/v1/locks/k").status == 404);
  BOOST_TEST(f.server->process().running());
}

BOOST_AUTO_TEST_CASE(batond_refuses_to_start_on_a_bad_tokens_file) {
  temp_dir data, scratch;
  auto tokens = scratch.path() / "tokens";
  write_file(tokens, "# ok\n" + hash_of("a") + " a rw:jobs/\n" + hash_of("b") + " b wx:jobs/\n");
  auto err = scratch.path() / "err";
  child_process p({bin_path("batond"), "--listen", "127.0.0.1:0", "--data-dir", data.path().string(),
                   "--tokens-file", tokens.string()},
                  err.string());
  BOOST_TEST(p.wait(event_bound) == 2);
  BOOST_TEST(
      read_file(err) ==
      "batond: " + tokens.string() +
          ":3: permission \"wx:jobs/\" must be rw:<prefix>, ro:<prefix>, admin:<prefix> or max_locks=<N>\n");
  child_process missing({bin_path("batond"), "--listen", "127.0.0.1:0", "--data-dir", data.path().string(),
                         "--tokens-file", (scratch.path() / "none").string()},
                        err.string() + "2");
  BOOST_TEST(missing.wait(event_bound) == 2);
  BOOST_TEST(read_file(err.string() + "2").find("cannot open the tokens file") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(without_a_tokens_file_nothing_changes_and_a_public_address_is_warned_about) {
  temp_dir data, scratch;
  auto log = scratch.path() / "log";
  batond_process open(data.path(), {}, 0, log.string());
  auto c = open.client();
  auto got = c.post("/v1/locks/k/acquire", acquire_body("o", 60000));
  BOOST_TEST(got.status == 200);
  auto view = c.get("/v1/locks/k");
  BOOST_TEST(!view.json.as_object().contains("client"));  // the v1 answer, unchanged
  BOOST_TEST(read_file(log).find("no_authentication") == std::string::npos);
  open.terminate();

  // 0.0.0.0 with port 0: bound on every address, so the warning is due.
  temp_dir data2;
  auto log2 = scratch.path() / "log2";
  child_process wide({bin_path("batond"), "--listen", "0.0.0.0:0", "--data-dir", data2.path().string()},
                     log2.string());
  const auto line = wide.read_line(event_bound);
  BOOST_REQUIRE(line.starts_with("batond listening on"));
  const auto port = static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1)));
  BOOST_TEST(http_client(port).get("/healthz").status == 200);  // serving, so SIGTERM is handled
  BOOST_TEST(read_file(log2).find("level=warn event=no_authentication") != std::string::npos);
  wide.signal(SIGTERM);
  BOOST_TEST(wide.wait(event_bound) == 0);
}

namespace {
struct cli_result {
  int code = -1;
  std::string out, err;
};

cli_result run_baton(const auth_fixture& f, std::vector<std::string> args, const char* env_token) {
  if (env_token)
    ::setenv("BATON_TOKEN", env_token, 1);
  else
    ::unsetenv("BATON_TOKEN");
  static int runs = 0;
  auto err = f.scratch.path() / ("baton-err-" + std::to_string(++runs));
  args.insert(args.begin(), {bin_path("baton"), "--server", f.server->url()});
  child_process p(args, err.string());
  cli_result r;
  r.code = p.wait(60s);
  try {
    for (;;)
      r.out += p.read_line(5s) + "\n";
  } catch (const std::runtime_error&) {
  }
  r.err = read_file(err);
  ::unsetenv("BATON_TOKEN");
  return r;
}
}  // namespace

BOOST_AUTO_TEST_CASE(cli_sends_the_token_from_a_file_or_the_environment) {
  constexpr int usage = 64, access_denied = 78;
  auth_fixture f;
  auto good = (f.scratch.path() / "good").string();
  auto reader = (f.scratch.path() / "reader").string();
  auto empty = (f.scratch.path() / "empty").string();
  write_file(good, "  writer-token\n");  // trimmed
  write_file(reader, "reader-token");
  write_file(empty, "\n \n");

  auto r =
      run_baton(f, {"acquire", "jobs/cli", "--ttl", "30s", "--owner", "me", "--token-file", good}, nullptr);
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out.find("\"owner\":\"me\"") != std::string::npos);
  r = run_baton(f, {"get", "jobs/cli"}, "writer-token");
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out.find("\"owner\":\"me\"") != std::string::npos, r.out);
  // The flag wins over the environment.
  r = run_baton(f, {"get", "jobs/cli", "--token-file", good}, "not-a-token");
  BOOST_TEST(r.code == 0, r.err);

  r = run_baton(f, {"get", "jobs/cli"}, nullptr);
  BOOST_TEST(r.code == access_denied);
  BOOST_TEST(r.err.find("refused the bearer token") != std::string::npos, r.err);
  r = run_baton(f, {"get", "jobs/cli"}, "not-a-token");
  BOOST_TEST(r.code == access_denied);
  BOOST_TEST(r.err.find("not-a-token") == std::string::npos, r.err);  // never echoed
  r = run_baton(f, {"acquire", "jobs/cli2", "--ttl", "30s", "--token-file", reader}, nullptr);
  BOOST_TEST(r.code == access_denied);
  BOOST_TEST(r.err.find("may only read this key") != std::string::npos, r.err);
  BOOST_TEST(r.err.find('\n') == r.err.size() - 1);  // one line

  r = run_baton(f, {"get", "jobs/cli", "--token-file", empty}, nullptr);
  BOOST_TEST(r.code == usage);
  BOOST_TEST(r.err == "baton: --token-file " + empty + ": the file is empty\n");
  r = run_baton(f, {"get", "jobs/cli", "--token-file", good + ".missing"}, nullptr);
  BOOST_TEST(r.code == usage);
  BOOST_TEST(r.err.find("cannot open") != std::string::npos, r.err);
  r = run_baton(f, {"get", "jobs/cli"}, "two words");
  BOOST_TEST(r.code == usage);
  BOOST_TEST(r.err.find("two") == std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(agent_with_token_file_leads_and_one_without_cannot) {
  auth_fixture f(hash_of("agent-token") + " agent rw:test/\n" + hash_of("viewer-token") + " viewer ro:*\n");
  write_file(f.scratch.path() / "agent.token", "agent-token\n");
  const std::string base =
      "server: " + f.server->url() +
      "\nlisten: 127.0.0.1:0\nshutdown_grace: 1s\nelection:\n  key: test/leader\n  ttl: 30s\n";
  write_file(f.scratch.path() / "with.yaml",
             "token_file: " + (f.scratch.path() / "agent.token").string() + "\n" + base);
  write_file(f.scratch.path() / "without.yaml", base);
  auto start = [&](const std::string& config, const std::string& id) {
    auto p = std::make_unique<child_process>(
        std::vector<std::string>{bin_path("baton-agent"), "--config", (f.scratch.path() / config).string(),
                                 "--identity", id},
        (f.scratch.path() / (id + ".log")).string());
    BOOST_REQUIRE(p->read_line(event_bound).starts_with("baton-agent listening on "));
    return p;
  };
  // The agent without a token starts first and keeps failing (401); the one with a token is elected.
  auto without = start("without.yaml", "no-token");
  auto with = start("with.yaml", "has-token");
  auto viewer = f.as("viewer-token");
  http_reply view;
  BOOST_TEST(eventually([&] { return (view = viewer->get("/v1/locks/test%2Fleader")).status == 200; }));
  BOOST_TEST(str(view, "client") == "agent");
  BOOST_TEST(str(view, "owner").starts_with("has-token"));
  const auto log = read_file(f.scratch.path() / "has-token.log");
  BOOST_TEST(log.find("agent-token") == std::string::npos);  // the token is never logged
  with->signal(SIGTERM);
  without->signal(SIGTERM);
  BOOST_TEST(with->wait(event_bound) == 0);
  BOOST_TEST(without->wait(event_bound) == 0);
}
