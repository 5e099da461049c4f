#define BOOST_TEST_MODULE tls
#include <boost/test/unit_test.hpp>

// batond over TLS (--tls-cert, --tls-key, --tls-client-ca) with the SDK and the CLI as clients; the
// certificates are made at test time (test_pki).

#include "batond_fixture.hpp"
#include "coro.hpp"
#include "lease_opts.hpp"
#include "test_pki.hpp"
#include "tls_files.hpp"
#include "tls_stub_server.hpp"

#include "baton/client.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>

#include <signal.h>

#include <fstream>
#include <sstream>
#include <thread>

using namespace baton;
using namespace baton::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

const test_pki& pki() {
  return test_pki::shared();
}

std::string https_url(const batond_process& p) {
  return "https://127.0.0.1:" + std::to_string(p.port());
}

client_config config(std::string url, tls_config tls = {}) {
  client_config c;
  c.server_url = std::move(url);
  c.tls = std::move(tls);
  c.identity = "tls-test";
  c.request_timeout = 10'000ms;
  c.retry.max_attempts = 2;
  c.retry.initial_backoff = 10ms;
  return c;
}

tls_config trusting_ca() {
  return tls_files(pki().ca());
}

// One try_acquire; the baton::exception it ends with, or nullopt when it succeeded.
std::optional<exception> try_acquire_error(const client_config& cfg, const std::string& key = "k") {
  asio::io_context ioc;
  std::optional<exception> failure;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    try {
      client c(ioc.get_executor(), cfg);
      auto r = co_await c.try_acquire(key, lease_opts(10'000ms));
      if (r.acquired) co_await r.acquired->release();
    } catch (const exception& e) {
      failure = e;
    }
  }());
  return failure;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The server still serves a correctly configured client.
void still_serves(const batond_process& server, tls_config tls = trusting_ca()) {
  auto e = try_acquire_error(config(https_url(server), std::move(tls)), "still-serving");
  BOOST_TEST(!e.has_value(), "a good client after the failure: " << (e ? e->what() : std::string()));
}

struct tls_server {
  temp_dir data;
  batond_process server;
  explicit tls_server(bool mutual = false, std::vector<std::string> args = {})
      : server(data.path(), with(pki().batond_args(mutual), std::move(args))) {}
  static std::vector<std::string> with(std::vector<std::string> a, std::vector<std::string> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
};

finished_process run_cli(const temp_dir& scratch, std::vector<std::string> args) {
  static int runs = 0;
  args.insert(args.begin(), bin_path("baton"));
  return run_to_end(std::move(args), (scratch.path() / ("cli-stderr-" + std::to_string(++runs))).string());
}

finished_process run_curl(const temp_dir& scratch, std::vector<std::string> args) {
  args.insert(args.begin(), {"/usr/bin/curl", "-sS", "--max-time", "30"});
  return run_to_end(std::move(args), (scratch.path() / "curl-stderr").string());
}

}  // namespace

BOOST_AUTO_TEST_CASE(sdk_acquires_renews_and_releases_over_tls_on_one_kept_alive_connection) {
  tls_server s;
  asio::io_context ioc;
  client c(ioc.get_executor(), config(https_url(s.server), trusting_ca()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.acquire("tls/job", lease_opts(1'500ms, 100ms));
    asio::steady_timer t(ioc, 1'000ms);
    co_await t.async_wait(asio::use_awaitable);
    BOOST_TEST(l.active());
    BOOST_TEST(c.stats().renews >= 3u);
    auto h = co_await c.get("tls/job");
    BOOST_REQUIRE(h.has_value());
    BOOST_TEST(h->token == l.token());
    BOOST_TEST((co_await l.release() == release_outcome::released));
    BOOST_TEST(!(co_await c.get("tls/job")).has_value());
    // Every request went over one pooled connection, still open: the server counts it and curl's own.
    auto metrics = run_curl(s.data, {"--cacert", pki().ca(), https_url(s.server) + "/metrics"});
    BOOST_TEST(contains(metrics.out, "\nbaton_connections 2\n"), metrics.out);
  }());
}

BOOST_AUTO_TEST_CASE(certificate_from_an_unknown_ca_is_refused_with_a_clear_error) {
  tls_server s;
  // No ca_file: the system store, which does not know the test CA.
  auto e = try_acquire_error(config(https_url(s.server)));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST((e->code() == error::tls_failed));
  BOOST_TEST(contains(e->diagnostic(), "is not trusted"), e->diagnostic());
  // Trusting another CA is no better.
  e = try_acquire_error(config(https_url(s.server), tls_files(pki().other_ca())));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST((e->code() == error::tls_failed));
  BOOST_TEST(contains(e->diagnostic(), "is not trusted"), e->diagnostic());
  still_serves(s.server);
}

BOOST_AUTO_TEST_CASE(certificate_for_another_host_is_refused_as_a_host_name_mismatch) {
  temp_dir data;
  batond_process server(data.path(),
                        {"--tls-cert", pki().wrong_host_cert(), "--tls-key", pki().wrong_host_key()});
  for (std::string host : {"127.0.0.1", "localhost"}) {
    auto e =
        try_acquire_error(config("https://" + host + ":" + std::to_string(server.port()), trusting_ca()));
    BOOST_REQUIRE(e.has_value());
    BOOST_TEST((e->code() == error::tls_failed));
    BOOST_TEST(contains(e->diagnostic(), "not valid for this host name"), e->diagnostic());
    BOOST_TEST(contains(e->diagnostic(), "mismatch"), e->diagnostic());
  }
}

BOOST_AUTO_TEST_CASE(https_checks_the_certificate_for_every_form_of_host_and_refuses_a_wrong_one) {
  const host_check_certs certs(pki());
  for (const auto& host : loopback_hosts) {
    BOOST_TEST_CONTEXT("https://" << host) {
      for (const auto& wrong : {certs.wrong_name, certs.wrong_address}) {
        tls_stub_server impostor(pki().file(wrong + ".pem"), pki().file(wrong + ".key"));
        auto e = try_acquire_error(
            config("https://" + host + ":" + std::to_string(impostor.port()), trusting_ca()));
        BOOST_REQUIRE(e.has_value());
        if (host == "[::1%lo]") {
          // A URL cannot carry a zone here: refused before any connection.
          BOOST_TEST((e->code() == error::invalid_config), e->what());
          BOOST_TEST(contains(e->diagnostic(), "zone"), e->diagnostic());
        } else {
          BOOST_TEST((e->code() == error::tls_failed), wrong << ": " << e->what());
          BOOST_TEST(contains(e->diagnostic(), "not valid for this host name"), e->diagnostic());
        }
        BOOST_TEST(impostor.received().empty(), wrong << " was sent: " << impostor.received());
      }
      if (host == "[::1%lo]") continue;
      tls_stub_server server(pki().file(certs.right + ".pem"), pki().file(certs.right + ".key"));
      auto e =
          try_acquire_error(config("https://" + host + ":" + std::to_string(server.port()), trusting_ca()));
      BOOST_REQUIRE(e.has_value());  // the stub answers 500: the request got through the handshake
      BOOST_TEST((e->code() == error::server_error), e->what());
      BOOST_TEST(contains(server.received(), "POST /v1/locks/k/acquire"), server.received());
    }
  }
}

BOOST_AUTO_TEST_CASE(server_certificate_names_both_localhost_and_the_loopback_address) {
  tls_server s;
  auto e = try_acquire_error(config("https://localhost:" + std::to_string(s.server.port()), trusting_ca()));
  BOOST_TEST(!e.has_value(), (e ? e->what() : std::string()));
}

BOOST_AUTO_TEST_CASE(plain_http_client_to_a_tls_server_gets_a_clear_answer_and_others_are_served) {
  tls_server s;
  auto e = try_acquire_error(config(s.server.url()));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST((e->code() == error::bad_request));
  BOOST_TEST(contains(e->diagnostic(), "only TLS"), e->diagnostic());
  auto raw = http_client::raw(s.server.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  BOOST_TEST(raw.status == 400);
  BOOST_TEST(contains(raw.body, "tls_required"), raw.body);
  still_serves(s.server);
}

BOOST_AUTO_TEST_CASE(tls_client_to_a_plain_server_fails_cleanly_and_the_server_keeps_serving) {
  temp_dir data;
  batond_process server(data.path());
  auto e = try_acquire_error(config("https://127.0.0.1:" + std::to_string(server.port()), trusting_ca()));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST((e->code() == error::tls_failed));
  BOOST_TEST(contains(e->diagnostic(), "does the server speak TLS"), e->diagnostic());
  BOOST_TEST(server.client().get("/healthz").status == 200);
}

BOOST_AUTO_TEST_CASE(mutual_tls_refuses_a_missing_or_foreign_client_certificate_and_accepts_the_right_one) {
  tls_server s(true);
  auto e = try_acquire_error(config(https_url(s.server), trusting_ca()));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST((e->code() == error::tls_failed));
  BOOST_TEST(contains(e->diagnostic(), "refused the TLS connection"), e->diagnostic());

  e = try_acquire_error(config(https_url(s.server),
                               tls_files(pki().ca(), pki().other_client_cert(), pki().other_client_key())));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST((e->code() == error::tls_failed));
  BOOST_TEST(contains(e->diagnostic(), "refused the TLS connection"), e->diagnostic());

  still_serves(s.server, tls_files(pki().ca(), pki().client_cert(), pki().client_key()));
}

BOOST_AUTO_TEST_CASE(unreadable_or_invalid_tls_files_are_configuration_errors_naming_the_file) {
  const std::string missing = "/nonexistent/ca.pem";
  auto e = try_acquire_error(config("https://127.0.0.1:1", tls_files(missing)));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST((e->code() == error::invalid_config));
  BOOST_TEST(contains(e->diagnostic(), "tls.ca_file \"" + missing + "\": cannot read"), e->diagnostic());

  // A key that is not the certificate's.
  e = try_acquire_error(
      config("https://127.0.0.1:1", tls_files(pki().ca(), pki().client_cert(), pki().server_key())));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST((e->code() == error::invalid_config));
  BOOST_TEST(contains(e->diagnostic(), "tls.key_file"), e->diagnostic());

  // Not PEM at all.
  e = try_acquire_error(config("https://127.0.0.1:1", tls_files(pki().file("server.ext"))));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST(contains(e->diagnostic(), "not a PEM"), e->diagnostic());

  // Certificates with a plain URL, and a certificate without its key.
  e = try_acquire_error(config("http://127.0.0.1:1", trusting_ca()));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST(contains(e->diagnostic(), "need an https://"), e->diagnostic());
  e = try_acquire_error(config("https://127.0.0.1:1", tls_files({}, pki().client_cert())));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST(contains(e->diagnostic(), "go together"), e->diagnostic());
}

BOOST_AUTO_TEST_CASE(batond_refuses_to_start_with_bad_tls_files) {
  temp_dir data;
  auto start = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv{bin_path("batond"), "--listen", "127.0.0.1:0", "--data-dir",
                                  data.path().string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_to_end(argv, (data.path() / "stderr").string());
  };
  auto r = start({"--tls-cert", "/nonexistent.pem", "--tls-key", pki().server_key()});
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.err, "--tls-cert \"/nonexistent.pem\": cannot read"), r.err);
  r = start({"--tls-cert", pki().server_cert(), "--tls-key", pki().client_key()});
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.err, "--tls-key"), r.err);
  r = start({"--tls-cert", pki().server_cert()});
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.err, "go together"), r.err);
  r = start({"--tls-client-ca", pki().ca()});
  BOOST_TEST(r.code == 2);
}

BOOST_AUTO_TEST_CASE(a_client_that_stalls_the_handshake_is_dropped_and_does_not_block_others) {
  tls_server s(false, {"--read-timeout-ms", "500"});
  // Connects and sends nothing: the server closes it after the read timeout.
  auto started = std::chrono::steady_clock::now();
  int status = -1;
  try {
    status = http_client::raw(s.server.port(), "", 60s).status;
  } catch (const std::exception&) {
    status = 0;  // closed without an answer
  }
  BOOST_TEST(status == 0);
  BOOST_TEST((std::chrono::steady_clock::now() - started < 30s));
  still_serves(s.server);
}

BOOST_AUTO_TEST_CASE(cli_acquires_renews_and_releases_over_mutual_tls) {
  tls_server s(true);
  temp_dir scratch;
  std::vector<std::string> tls{"--server", https_url(s.server), "--ca-file", pki().ca(),
                               "--cert",   pki().client_cert(), "--key",     pki().client_key()};
  auto with = [&](std::vector<std::string> a) {
    a.insert(a.end(), tls.begin(), tls.end());
    return a;
  };
  auto acquired = run_cli(scratch, with({"acquire", "cli/tls", "--ttl", "30s", "--owner", "me"}));
  BOOST_REQUIRE_MESSAGE(acquired.code == 0, acquired.err);
  auto token = std::to_string(boost::json::parse(acquired.out).at("token").as_int64());
  auto renewed =
      run_cli(scratch, with({"renew", "cli/tls", "--owner", "me", "--token", token, "--ttl", "30s"}));
  BOOST_TEST(renewed.code == 0, renewed.err);
  auto released = run_cli(scratch, with({"release", "cli/tls", "--owner", "me", "--token", token}));
  BOOST_TEST(released.code == 0, released.err);
  BOOST_TEST(contains(released.out, "\"released\""), released.out);

  // Without the client certificate: refused, one line, exit 69.
  auto refused =
      run_cli(scratch, {"get", "cli/tls", "--server", https_url(s.server), "--ca-file", pki().ca()});
  BOOST_TEST(refused.code == 69);
  BOOST_TEST(contains(refused.err, "refused the TLS connection"), refused.err);
  BOOST_TEST(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);

  // Without the CA: not trusted.
  auto untrusted = run_cli(scratch, {"get", "cli/tls", "--server", https_url(s.server)});
  BOOST_TEST(untrusted.code == 69);
  BOOST_TEST(contains(untrusted.err, "not trusted"), untrusted.err);

  // Flag mistakes are usage errors.
  auto no_key =
      run_cli(scratch, {"get", "k", "--server", https_url(s.server), "--cert", pki().client_cert()});
  BOOST_TEST(no_key.code == 64);
  BOOST_TEST(contains(no_key.err, "--cert and --key go together"), no_key.err);
  auto plain = run_cli(scratch, {"get", "k", "--server", s.server.url(), "--ca-file", pki().ca()});
  BOOST_TEST(plain.code == 64);
  auto missing =
      run_cli(scratch, {"get", "k", "--server", https_url(s.server), "--ca-file", "/nonexistent.pem"});
  BOOST_TEST(missing.code == 64);
  BOOST_TEST(contains(missing.err, "/nonexistent.pem"), missing.err);
}

BOOST_AUTO_TEST_CASE(agent_leads_through_a_mutual_tls_server) {
  tls_server s(true);
  temp_dir scratch;
  const auto config_path = scratch.path() / "agent.yaml";
  std::ofstream(config_path) << "server: " << https_url(s.server)
                             << "\nlisten: 127.0.0.1:0\nshutdown_grace: 1s\n"
                             << "election:\n  key: tls/leader\n  ttl: 5s\n"
                             << "tls:\n  ca_file: " << pki().ca() << "\n  cert_file: " << pki().client_cert()
                             << "\n  key_file: " << pki().client_key() << "\n";
  child_process agent({bin_path("baton-agent"), "--config", config_path.string(), "--identity", "tls-agent"},
                      (scratch.path() / "agent.log").string());
  auto line = agent.read_line(30s);
  BOOST_REQUIRE(line.rfind("baton-agent listening on ", 0) == 0);
  const auto port = static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1)));
  bool leads = false;
  for (auto until = std::chrono::steady_clock::now() + 30s;
       !leads && std::chrono::steady_clock::now() < until;) {
    try {
      auto r = http_client(port, 10s).get("/v1/leader");
      leads = r.status == 200 && r.json.at("is_leader").as_bool();
    } catch (const std::exception&) {
    }
    if (!leads) std::this_thread::sleep_for(50ms);
  }
  BOOST_TEST(leads);
  // The server agrees, asked over mutual TLS by the CLI.
  auto held = run_cli(scratch, {"get", "tls/leader", "--server", https_url(s.server), "--ca-file", pki().ca(),
                                "--cert", pki().client_cert(), "--key", pki().client_key()});
  BOOST_TEST(held.code == 0, held.err);
  BOOST_TEST(contains(held.out, "tls-agent#"), held.out);
  agent.signal(SIGTERM);
  BOOST_TEST(agent.wait(30s) == 0);
}
