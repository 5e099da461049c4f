// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE tls
#include <boost/test/unit_test.hpp>

// batond over TLS (--tls-cert, --tls-key, --tls-client-ca) with the SDK and the CLI as clients; the
// certificates are made at test time (test_pki).

#include "batond_fixture.hpp"
#include "coro.hpp"
#include "eventually.hpp"
#include "lease_opts.hpp"
#include "test_pki.hpp"
#include "tls_files.hpp"
#include "tls_stub_server.hpp"

#include "baton/client.hpp"
#include "baton/testing.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/json/parse.hpp>

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <signal.h>

#include <filesystem>
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
      auto r = co_await c.async_try_acquire(key, lease_opts(10'000ms));
      if (r.acquired) co_await r.acquired->async_release();
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
    auto l = co_await c.async_acquire("tls/job", lease_opts(1'500ms, 100ms));
    asio::steady_timer t(ioc, 1'000ms);
    co_await t.async_wait(asio::use_awaitable);
    BOOST_TEST(l.active());
    BOOST_TEST(c.stats().renews >= 3u);
    auto h = co_await c.async_get("tls/job");
    BOOST_REQUIRE(h.has_value());
    BOOST_TEST(h->token == l.token());
    BOOST_TEST((co_await l.async_release() == release_outcome::released));
    BOOST_TEST(!(co_await c.async_get("tls/job")).has_value());
    // The 13 requests went over pooled connections, still open: one, or two when a renewal was in flight as
    // get() was sent (a slow machine). The server counts them and curl's own.
    auto metrics = run_curl(s.data, {"--cacert", pki().ca(), https_url(s.server) + "/metrics"});
    BOOST_TEST((contains(metrics.out, "\nbaton_connections 2\n") ||
                contains(metrics.out, "\nbaton_connections 3\n")),
               metrics.out);
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

// --- Certificate reload on SIGHUP -------------------------------------------------------------------------

namespace {

namespace beast = boost::beast;

// A TLS connection of the test's own to batond (trusting the test CA): which certificate it was served, and
// requests on it later. Every step is bounded; a failed one throws.
class tls_connection {
 public:
  explicit tls_connection(unsigned short port, const std::string& cert = {}, const std::string& key = {}) {
    ctx_.load_verify_file(pki().ca());
    ctx_.set_verify_mode(asio::ssl::verify_peer);
    if (!cert.empty()) {
      ctx_.use_certificate_chain_file(cert);
      ctx_.use_private_key_file(key, asio::ssl::context::pem);
    }
    // A connection copies its context's certificate when it is made, so only now.
    stream_.emplace(ioc_, ctx_);
    run_coro(
        ioc_,
        [&]() -> asio::awaitable<void> {
          auto& tcp = beast::get_lowest_layer(*stream_);
          tcp.expires_after(10s);
          co_await tcp.async_connect({asio::ip::make_address("127.0.0.1"), port}, asio::use_awaitable);
          co_await stream_->async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
        }(),
        20s);
  }

  // The SHA-256 fingerprint of the certificate the server presented on this connection.
  std::string fingerprint() {
    X509* cert = ::SSL_get1_peer_certificate(stream_->native_handle());
    if (!cert) throw std::runtime_error("the server presented no certificate");
    unsigned char* der = nullptr;
    const int n = ::i2d_X509(cert, &der);
    ::X509_free(cert);
    if (n <= 0) throw std::runtime_error("cannot encode the server's certificate");
    auto out = test_pki::sha256_fingerprint(std::string_view(reinterpret_cast<const char*>(der), n));
    ::OPENSSL_free(der);
    return out;
  }

  // The CA names the server listed when it asked for a client certificate, one line each ("/CN=...").
  std::string requested_ca_names() {
    std::string out;
    if (const auto* names = ::SSL_get_client_CA_list(stream_->native_handle())) {
      for (int i = 0; i < sk_X509_NAME_num(names); ++i) {
        char line[256];
        out += ::X509_NAME_oneline(sk_X509_NAME_value(names, i), line, sizeof line);
        out += '\n';
      }
    }
    return out;
  }

  // GET `target` on this connection, kept alive; the answer's status.
  int get(const std::string& target) {
    int status = 0;
    run_coro(
        ioc_,
        [&]() -> asio::awaitable<void> {
          beast::get_lowest_layer(*stream_).expires_after(10s);
          beast::http::request<beast::http::empty_body> req{beast::http::verb::get, target, 11};
          req.set(beast::http::field::host, "127.0.0.1");
          co_await beast::http::async_write(*stream_, req, asio::use_awaitable);
          beast::flat_buffer buffer;
          beast::http::response<beast::http::string_body> res;
          co_await beast::http::async_read(*stream_, buffer, res, asio::use_awaitable);
          status = res.result_int();
        }(),
        20s);
    return status;
  }

 private:
  asio::io_context ioc_;
  asio::ssl::context ctx_{asio::ssl::context::tls_client};
  std::optional<beast::ssl_stream<beast::tcp_stream>> stream_;
};

// The fingerprint a new connection is served now.
std::string served_fingerprint(unsigned short port) {
  return tls_connection(port).fingerprint();
}

// A new connection with this client certificate gets an answer (mutual TLS accepts the certificate).
bool accepted_with(unsigned short port, const std::string& cert, const std::string& key) {
  try {
    return tls_connection(port, cert, key).get("/healthz") == 200;
  } catch (const std::exception&) {
    return false;
  }
}

// Replaces `to` with a copy of `from` in one step, as a certificate rotation does: batond never reads half
// a file.
void install(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to + ".new", std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(to + ".new", to);
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path + ".new") << text;
  std::filesystem::rename(path + ".new", path);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::size_t count_lines_with(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size()))
    ++n;
  return n;
}

// The last line of `text` that holds `part`, empty when none does.
std::string last_line_with(const std::string& text, const std::string& part) {
  const auto at = text.rfind(part);
  if (at == std::string::npos) return {};
  const auto begin = text.rfind('\n', at);
  const auto start = begin == std::string::npos ? 0 : begin + 1;
  return text.substr(start, text.find('\n', at) - start);
}

// batond serving certificate files of the test's own (copies it can replace), its log in a file.
struct reloading_server {
  temp_dir data, files;
  std::string cert = (files.path() / "cert.pem").string();
  std::string key = (files.path() / "key.pem").string();
  std::string client_ca = (files.path() / "client-ca.pem").string();
  std::string log = (files.path() / "batond.log").string();
  std::unique_ptr<child_process> server;
  std::vector<std::string> argv_;
  unsigned short port_ = 0;

  // At log level info (batond_process starts it at warn), for the lines that answer a reload.
  explicit reloading_server(bool mutual = false) {
    install(pki().server_cert(), cert);
    install(pki().server_key(), key);
    std::vector<std::string> argv{bin_path("batond"), "--listen", "127.0.0.1:0", "--data-dir",
                                  data.path().string()};
    argv.insert(argv.end(), {"--log-level", "info", "--tls-cert", cert, "--tls-key", key});
    if (mutual) {
      install(pki().ca(), client_ca);
      argv.insert(argv.end(), {"--tls-client-ca", client_ca});
    }
    argv_ = argv;
    start();
  }
  void start() {
    server = std::make_unique<child_process>(argv_, log);
    const auto line = server->read_line(30s);
    BOOST_REQUIRE_MESSAGE(line.rfind("batond listening on ", 0) == 0, line);
    port_ = static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1)));
  }
  // Stops batond and starts it again on the same port and data: every connection to it is closed, and
  // clients must make new ones.
  void restart() {
    server->signal(SIGTERM);
    BOOST_REQUIRE(server->wait(30s) == 0);
    argv_[2] = "127.0.0.1:" + std::to_string(port_);
    start();
  }
  ~reloading_server() {
    server->signal(SIGTERM);
    server->wait(30s);
  }
  unsigned short port() const { return port_; }

  // SIGHUP, then waits (bounded) for batond's answer in the log; returns that line (`tls_reloaded` or
  // `tls_reload_failed`).
  std::string reload() {
    const auto answers = [&] { return count_lines_with(read_file(log), "event=tls_reload"); };
    const std::size_t before = answers();
    server->signal(SIGHUP);
    BOOST_REQUIRE_MESSAGE(eventually([&] { return answers() > before; }, 10s),
                          "no answer to SIGHUP in the log:\n"
                              << read_file(log));
    return last_line_with(read_file(log), "event=tls_reload");
  }
};

bool reloaded(const std::string& line) {
  return contains(line, "level=info event=tls_reloaded ");
}
bool failed(const std::string& line) {
  return contains(line, "level=error event=tls_reload_failed ");
}

}  // namespace

BOOST_AUTO_TEST_CASE(sighup_serves_a_replaced_certificate_to_new_connections_and_keeps_leases_and_open_ones) {
  reloading_server s;
  temp_dir scratch;
  const std::string url = "https://127.0.0.1:" + std::to_string(s.port());
  const std::string a = test_pki::sha256_fingerprint_of_file(pki().server_cert());
  pki().make_leaf("server-b", "ca", "localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost");
  const std::string b = test_pki::sha256_fingerprint_of_file(pki().file("server-b.pem"));
  BOOST_REQUIRE(a != b);
  BOOST_TEST(served_fingerprint(s.port()) == a);

  auto acquired = run_cli(scratch, {"acquire", "reload/k", "--ttl", "60s", "--owner", "me", "--server", url,
                                    "--ca-file", pki().ca()});
  BOOST_REQUIRE_MESSAGE(acquired.code == 0, acquired.err);
  const auto token = boost::json::parse(acquired.out).at("token").as_int64();
  tls_connection opened_before(s.port());
  BOOST_TEST(opened_before.get("/healthz") == 200);

  install(pki().file("server-b.pem"), s.cert);
  install(pki().file("server-b.key"), s.key);
  BOOST_TEST(reloaded(s.reload()));
  BOOST_TEST(eventually([&] { return served_fingerprint(s.port()) == b; }, 10s));
  BOOST_TEST(contains(read_file(s.log), "sha256=" + b), read_file(s.log));
  // The connection opened before keeps its certificate and is still served; the lease is untouched.
  BOOST_TEST(opened_before.fingerprint() == a);
  BOOST_TEST(opened_before.get("/healthz") == 200);
  auto held = run_cli(scratch, {"get", "reload/k", "--server", url, "--ca-file", pki().ca()});
  BOOST_REQUIRE_MESSAGE(held.code == 0, held.err);
  BOOST_TEST(boost::json::parse(held.out).at("token").as_int64() == token, held.out);

  auto metrics = run_curl(scratch, {"--cacert", pki().ca(), url + "/metrics"});
  BOOST_TEST(contains(metrics.out, "baton_tls_reloads_total{outcome=\"ok\"} 1\n"), metrics.out);
  BOOST_TEST(contains(metrics.out, "baton_tls_reloads_total{outcome=\"failed\"} 0\n"), metrics.out);
}

BOOST_AUTO_TEST_CASE(a_bad_file_on_sighup_keeps_the_certificate_served_and_logs_the_file_and_reason) {
  reloading_server s;
  temp_dir scratch;
  const std::string url = "https://127.0.0.1:" + std::to_string(s.port());
  pki().make_leaf("server-c", "ca", "localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost");
  const std::string c = test_pki::sha256_fingerprint_of_file(pki().file("server-c.pem"));
  install(pki().file("server-c.pem"), s.cert);
  install(pki().file("server-c.key"), s.key);
  BOOST_REQUIRE(reloaded(s.reload()));
  BOOST_REQUIRE(eventually([&] { return served_fingerprint(s.port()) == c; }, 10s));
  auto acquired = run_cli(scratch, {"acquire", "reload/bad", "--ttl", "60s", "--owner", "me", "--server", url,
                                    "--ca-file", pki().ca()});
  BOOST_REQUIRE_MESSAGE(acquired.code == 0, acquired.err);
  const auto token = boost::json::parse(acquired.out).at("token").as_int64();

  // The error line holds its value in quotes, escaped.
  const auto quoted = [](const std::string& file) { return "\\\"" + file + "\\\""; };
  struct bad_case {
    std::string what;
    std::string cert_text, key_text;  // what the file holds instead; empty: server-c's; "-": no file at all
    std::string file_and_reason;      // in the error line
    std::string detail = {};          // in the error line too
  };
  const std::string not_pem = "this is not PEM\n";
  const bad_case cases[] = {
      {"a key that is not PEM", {}, not_pem, "--tls-key " + quoted(s.key) + ": not a PEM private key"},
      {"a certificate that is not PEM",
       not_pem,
       {},
       "--tls-cert " + quoted(s.cert) + ": not a PEM certificate"},
      {"a key of another certificate",
       {},
       read_file(pki().server_key()),
       "--tls-key " + quoted(s.key) + ": ",
       "mismatch"},
      {"a missing certificate", "-", {}, "--tls-cert " + quoted(s.cert) + ": cannot read"},
      {"a missing key", {}, "-", "--tls-key " + quoted(s.key) + ": cannot read"},
  };
  for (const auto& bad : cases) {
    BOOST_TEST_CONTEXT(bad.what) {
      install(pki().file("server-c.pem"), s.cert);
      install(pki().file("server-c.key"), s.key);
      for (const auto& [file, text] : {std::pair{s.cert, bad.cert_text}, std::pair{s.key, bad.key_text}}) {
        if (text == "-")
          std::filesystem::remove(file);
        else if (!text.empty())
          write_file(file, text);
      }
      // One error line names the file and the reason, and the fingerprint still served.
      const auto line = s.reload();
      BOOST_TEST(failed(line), line);
      BOOST_TEST(contains(line, bad.file_and_reason), line);
      BOOST_TEST(contains(line, bad.detail), line);
      BOOST_TEST(contains(line, "served_sha256=" + c), line);
      // New connections still get server-c, and batond serves them with the lease as it was.
      BOOST_TEST(served_fingerprint(s.port()) == c);
      auto held = run_cli(scratch, {"get", "reload/bad", "--server", url, "--ca-file", pki().ca()});
      BOOST_REQUIRE_MESSAGE(held.code == 0, held.err);
      BOOST_TEST(boost::json::parse(held.out).at("token").as_int64() == token, held.out);
    }
  }
  auto metrics = run_curl(scratch, {"--cacert", pki().ca(), url + "/metrics"});
  BOOST_TEST(contains(metrics.out, "baton_tls_reloads_total{outcome=\"ok\"} 1\n"), metrics.out);
  BOOST_TEST(contains(metrics.out, "baton_tls_reloads_total{outcome=\"failed\"} 5\n"), metrics.out);
  // Good files again: the next reload takes them.
  install(pki().server_cert(), s.cert);
  install(pki().server_key(), s.key);
  BOOST_TEST(reloaded(s.reload()));
  BOOST_TEST(served_fingerprint(s.port()) == test_pki::sha256_fingerprint_of_file(pki().server_cert()));
}

BOOST_AUTO_TEST_CASE(an_expired_certificate_is_loaded_on_sighup_and_logged_as_expired) {
  reloading_server s;
  pki().make_leaf("server-expired", "ca", "localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost", -1);
  install(pki().file("server-expired.pem"), s.cert);
  install(pki().file("server-expired.key"), s.key);
  BOOST_TEST(reloaded(s.reload()));
  const auto log = read_file(s.log);
  BOOST_TEST(contains(log, "level=warn event=tls_certificate_expired file=" + s.cert), log);
  // Served all the same (a client that checks validity refuses it: the SDK's does).
  auto e = try_acquire_error(config("https://127.0.0.1:" + std::to_string(s.port()), trusting_ca()));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST(contains(e->diagnostic(), "expired"), e->diagnostic());
}

BOOST_AUTO_TEST_CASE(sighup_reloads_the_client_ca_of_mutual_tls) {
  reloading_server s(true);
  BOOST_TEST(accepted_with(s.port(), pki().client_cert(), pki().client_key()));
  BOOST_TEST(!accepted_with(s.port(), pki().other_client_cert(), pki().other_client_key()));
  install(pki().other_ca(), s.client_ca);
  BOOST_TEST(reloaded(s.reload()));
  BOOST_TEST(eventually(
      [&] { return accepted_with(s.port(), pki().other_client_cert(), pki().other_client_key()); }, 10s));
  BOOST_TEST(!accepted_with(s.port(), pki().client_cert(), pki().client_key()));
  // The certificate request names the new CA, so a client holding several certificates picks the right one.
  const auto names =
      tls_connection(s.port(), pki().other_client_cert(), pki().other_client_key()).requested_ca_names();
  BOOST_TEST(names == "/CN=baton-other-ca\n", names);
  // A client CA file that is not PEM is refused and the other CA stays trusted.
  write_file(s.client_ca, "not PEM\n");
  BOOST_TEST(failed(s.reload()));
  BOOST_TEST(contains(read_file(s.log), "--tls-client-ca \\\"" + s.client_ca + "\\\""), read_file(s.log));
  BOOST_TEST(accepted_with(s.port(), pki().other_client_cert(), pki().other_client_key()));
}

// --- The client certificate read again: client::reload_tls(), and baton-agent on SIGHUP ------------------

namespace {

// A client certificate and key at paths of the test's own, which it can replace as a rotation does.
struct client_files {
  temp_dir dir;
  std::string cert = (dir.path() / "client.pem").string();
  std::string key = (dir.path() / "client.key").string();
  client_files(const std::string& from_cert, const std::string& from_key) { rotate(from_cert, from_key); }
  void rotate(const std::string& from_cert, const std::string& from_key) const {
    install(from_cert, cert);
    install(from_key, key);
  }
  tls_config tls() const { return tls_files(pki().ca(), cert, key); }
};

// Polls `pred` on the coroutine's executor until it holds or `bound` passes.
template <class Pred>
asio::awaitable<bool> eventually_co(Pred pred, std::chrono::milliseconds bound = 10s) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= until) co_return false;
    co_await sleep_for(20ms);
  }
  co_return true;
}

// The error of one get() of `key` (a new connection: the client keeps none idle), or nullopt.
asio::awaitable<std::optional<exception>> get_error(client& c, const std::string& key) {
  try {
    co_await c.async_get(key);
  } catch (const exception& e) {
    co_return e;
  }
  co_return std::nullopt;
}

}  // namespace

BOOST_AUTO_TEST_CASE(
    reload_tls_makes_new_connections_present_a_rotated_client_certificate_and_keeps_the_lease) {
  reloading_server s(true);
  // CA "other-ca" issues the certificate the files rotate to.
  pki().make_leaf("client-y", "other-ca", "baton-client", "subjectAltName=DNS:baton-client");
  const std::string x = test_pki::sha256_fingerprint_of_file(pki().client_cert());
  const std::string y = test_pki::sha256_fingerprint_of_file(pki().file("client-y.pem"));
  client_files files(pki().client_cert(), pki().client_key());
  auto cfg = config("https://127.0.0.1:" + std::to_string(s.port()), files.tls());
  cfg.max_idle_connections = 0;  // every request on a new connection: the one the test looks at
  asio::io_context ioc;
  client c(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    // Renewed every 300 ms, on a new connection each time; the TTL outlasts the test.
    auto l = co_await c.async_acquire("rotate/k", lease_opts(60'000ms, 300ms));
    BOOST_TEST(co_await eventually_co([&] { return c.stats().renews >= 1u; }));

    // The files now hold a certificate of another CA, and batond trusts only that CA.
    files.rotate(pki().file("client-y.pem"), pki().file("client-y.key"));
    install(pki().other_ca(), s.client_ca);
    BOOST_REQUIRE(reloaded(s.reload()));
    // Until the client reads the files again, its new connections present the old certificate: refused.
    auto e = co_await get_error(c, "rotate/k");
    BOOST_REQUIRE(e.has_value());
    BOOST_TEST((e->code() == error::tls_failed || e->code() == error::connection_failed), e->what());

    const auto r = c.reload_tls();
    BOOST_TEST(!r.ec, r.diagnostic);
    BOOST_TEST(r.sha256 == y);
    BOOST_TEST(r.sha256 != x);
    BOOST_TEST(r.subject == "CN=baton-client");
    BOOST_TEST(r.not_after.size() == 20u, r.not_after);
    e = co_await get_error(c, "rotate/k");
    BOOST_TEST(!e.has_value(), (e ? e->what() : std::string()));
    // The lease was untouched, and its renewals go through on new connections again.
    const auto renews = c.stats().renews;
    BOOST_TEST(co_await eventually_co([&] { return c.stats().renews >= renews + 2; }));
    BOOST_TEST(l.active());
    auto h = co_await c.async_get("rotate/k");
    BOOST_REQUIRE(h.has_value());
    BOOST_TEST(h->token == l.token());
    BOOST_TEST((co_await l.async_release() == release_outcome::released));
  }());
}

BOOST_AUTO_TEST_CASE(reload_tls_with_a_bad_file_changes_nothing_and_says_which_file_and_why) {
  reloading_server s(true);
  pki().make_leaf("client-z", "ca", "baton-client-z", "subjectAltName=DNS:baton-client-z");
  const std::string x = test_pki::sha256_fingerprint_of_file(pki().client_cert());
  client_files files(pki().client_cert(), pki().client_key());
  auto cfg = config("https://127.0.0.1:" + std::to_string(s.port()), files.tls());
  cfg.max_idle_connections = 0;
  asio::io_context ioc;
  client c(ioc.get_executor(), cfg);
  const auto quoted = [](const std::string& file) { return "\"" + file + "\""; };
  struct bad_case {
    std::string what;
    std::string cert_text, key_text;  // what the file holds instead; empty: a good one; "-": no file at all
    std::string file_and_reason;
  };
  const std::string not_pem = "this is not PEM\n";
  const bad_case cases[] = {
      {"a key that is not PEM", {}, not_pem, "tls.key_file " + quoted(files.key) + ": not a PEM private key"},
      {"a certificate that is not PEM", not_pem, {}, "tls.cert_file " + quoted(files.cert) + ": not a PEM"},
      {"a key of another certificate",
       {},
       read_file(pki().server_key()),
       "tls.key_file " + quoted(files.key)},
      {"a missing certificate", "-", {}, "tls.cert_file " + quoted(files.cert) + ": cannot read"},
      {"a missing key", {}, "-", "tls.key_file " + quoted(files.key) + ": cannot read"},
  };
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.async_acquire("rotate/bad", lease_opts(60'000ms, 300ms));
    for (const auto& bad : cases) {
      BOOST_TEST_CONTEXT(bad.what) {
        // A good certificate of the trusted CA beside the broken file: none of it may be taken.
        files.rotate(pki().file("client-z.pem"), pki().file("client-z.key"));
        for (const auto& [file, text] :
             {std::pair{files.cert, bad.cert_text}, std::pair{files.key, bad.key_text}}) {
          if (text == "-")
            std::filesystem::remove(file);
          else if (!text.empty())
            write_file(file, text);
        }
        const auto r = c.reload_tls();
        BOOST_TEST((r.ec == error::invalid_config), r.ec.message());
        BOOST_TEST(contains(r.diagnostic, bad.file_and_reason), r.diagnostic);
        BOOST_TEST(r.sha256 == x);  // still presented
        // New connections still present the previous certificate, which batond accepts.
        auto e = co_await get_error(c, "rotate/bad");
        BOOST_TEST(!e.has_value(), (e ? e->what() : std::string()));
      }
    }
    // The mismatch says so.
    files.rotate(pki().client_cert(), pki().server_key());
    auto r = c.reload_tls();
    BOOST_TEST(contains(r.diagnostic, "mismatch"), r.diagnostic);
    // Files given anew: a missing CA file, and a certificate without its key.
    r = c.reload_tls(tls_files("/nonexistent/ca.pem", files.cert, files.key));
    BOOST_TEST((r.ec == error::invalid_config));
    BOOST_TEST(contains(r.diagnostic, "tls.ca_file \"/nonexistent/ca.pem\": cannot read"), r.diagnostic);
    r = c.reload_tls(tls_files(pki().ca(), pki().client_cert()));
    BOOST_TEST((r.ec == error::invalid_config));
    BOOST_TEST(contains(r.diagnostic, "go together"), r.diagnostic);
    BOOST_TEST(r.sha256 == x);
    // Renewals went on throughout.
    const auto renews = c.stats().renews;
    BOOST_TEST(co_await eventually_co([&] { return c.stats().renews >= renews + 1; }));
    BOOST_TEST(l.active());

    // Other paths, given anew, are taken, and a later reload_tls() reads those again.
    const auto z = test_pki::sha256_fingerprint_of_file(pki().file("client-z.pem"));
    r = c.reload_tls(tls_files(pki().ca(), pki().file("client-z.pem"), pki().file("client-z.key")));
    BOOST_TEST(!r.ec, r.diagnostic);
    BOOST_TEST(r.sha256 == z);
    r = c.reload_tls();
    BOOST_TEST(!r.ec, r.diagnostic);
    BOOST_TEST(r.sha256 == z);
    auto e = co_await get_error(c, "rotate/bad");
    BOOST_TEST(!e.has_value(), (e ? e->what() : std::string()));
    BOOST_TEST((co_await l.async_release() == release_outcome::released));
  }());
}

BOOST_AUTO_TEST_CASE(reload_tls_on_a_client_without_tls_is_a_configuration_error) {
  temp_dir data;
  batond_process server(data.path());
  asio::io_context ioc;
  client c(ioc.get_executor(), config(server.url()));
  const auto r = c.reload_tls();
  BOOST_TEST((r.ec == error::invalid_config));
  BOOST_TEST(contains(r.diagnostic, "does not use TLS"), r.diagnostic);
  client plain_etcd(ioc.get_executor(), config("etcd://127.0.0.1:1"));
  BOOST_TEST((plain_etcd.reload_tls().ec == error::invalid_config));
  // A backend of the test's own cannot read TLS files either.
  client own(ioc.get_executor(), config("https://127.0.0.1:1", trusting_ca()),
             std::make_shared<baton::testing::memory_backend>(ioc.get_executor()));
  BOOST_TEST((own.reload_tls().ec == error::invalid_config));
}

namespace {

// baton-agent on `server` with its client certificate in `files`, its log in a file, leading alone.
struct tls_agent {
  temp_dir dir;
  std::string config_path = (dir.path() / "agent.yaml").string();
  std::string log = (dir.path() / "agent.log").string();
  std::unique_ptr<child_process> process;
  unsigned short port = 0;

  tls_agent(const reloading_server& server, const tls_config& tls) {
    write(server, tls);
    process = std::make_unique<child_process>(
        std::vector<std::string>{bin_path("baton-agent"), "--config", config_path, "--identity", "tls-agent"},
        log);
    const auto line = process->read_line(30s);
    BOOST_REQUIRE_MESSAGE(line.rfind("baton-agent listening on ", 0) == 0, line);
    port = static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1)));
  }
  ~tls_agent() {
    process->signal(SIGTERM);
    process->wait(30s);
  }

  // The configuration file: the election renews every second, well apart from batond's idle timeout.
  void write(const reloading_server& server, const tls_config& tls) const {
    std::ofstream(config_path + ".new")
        << "server: https://127.0.0.1:" << server.port()
        << "\nlisten: 127.0.0.1:0\nshutdown_grace: 1s\nlog_level: info\n"
        << "election:\n  key: tls/rotate\n  ttl: 3s\n"
        << "tls:\n  ca_file: " << tls.ca_file << "\n  cert_file: " << tls.cert_file
        << "\n  key_file: " << tls.key_file << "\n";
    std::filesystem::rename(config_path + ".new", config_path);
  }

  bool leads() const {
    try {
      auto r = http_client(port, 5s).get("/v1/leader");
      return r.status == 200 && r.json.at("is_leader").as_bool();
    } catch (const std::exception&) {
      return false;
    }
  }

  // Confirmed renews so far (the count of the renew latency summary), -1 when the sidecar does not answer.
  long renews() const {
    try {
      const auto body = http_client(port, 5s).get("/metrics").body;
      const std::string series = "baton_agent_renew_latency_seconds_count ";
      const auto at = body.find(series);
      return at == std::string::npos ? -1 : std::stol(body.substr(at + series.size()));
    } catch (const std::exception&) {
      return -1;
    }
  }

  // SIGHUP, then waits (bounded) for the agent's TLS line; returns it (`tls_reloaded` or
  // `tls_reload_failed`).
  std::string reload() {
    const auto answers = [&] { return count_lines_with(read_file(log), "event=tls_reload"); };
    const std::size_t before = answers();
    process->signal(SIGHUP);
    BOOST_REQUIRE_MESSAGE(eventually([&] { return answers() > before; }, 10s), "no TLS line after SIGHUP:\n"
                                                                                   << read_file(log));
    return last_line_with(read_file(log), "event=tls_reload");
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(agent_sighup_reads_a_client_certificate_rotated_in_place_and_reconnects_with_it) {
  reloading_server s(true);
  pki().make_leaf("agent-y", "other-ca", "baton-agent", "subjectAltName=DNS:baton-agent");
  const std::string x = test_pki::sha256_fingerprint_of_file(pki().client_cert());
  const std::string y = test_pki::sha256_fingerprint_of_file(pki().file("agent-y.pem"));
  client_files files(pki().client_cert(), pki().client_key());
  tls_agent agent(s, files.tls());
  BOOST_REQUIRE(eventually([&] { return agent.leads(); }, 30s));

  // A broken key file: the agent says so, keeps its certificate and goes on renewing.
  write_file(files.key, "this is not PEM\n");
  auto line = agent.reload();
  BOOST_TEST(contains(line, "level=error event=tls_reload_failed "), line);
  BOOST_TEST(contains(line, "tls.key_file \\\"" + files.key + "\\\""), line);
  BOOST_TEST(contains(line, "previous certificate"), line);
  BOOST_TEST(contains(line, "sha256=" + x), line);
  auto renews = agent.renews();
  BOOST_TEST(eventually([&] { return agent.renews() >= renews + 2; }, 10s));

  // Rotated in place to a certificate of another CA, and batond now trusts only that CA: the old
  // certificate is refused on every new connection, and after SIGHUP the agent's new ones present the new.
  files.rotate(pki().file("agent-y.pem"), pki().file("agent-y.key"));
  install(pki().other_ca(), s.client_ca);
  BOOST_REQUIRE(reloaded(s.reload()));
  BOOST_TEST(!accepted_with(s.port(), pki().client_cert(), pki().client_key()));
  line = agent.reload();
  BOOST_TEST(contains(line, "level=info event=tls_reloaded "), line);
  BOOST_TEST(contains(line, "sha256=" + y), line);
  BOOST_TEST(contains(line, "cert_file=" + files.cert), line);
  // batond restarted: every connection is new, and only the new certificate is accepted.
  s.restart();
  renews = std::max(agent.renews(), 0L);
  BOOST_TEST(eventually([&] { return agent.leads() && agent.renews() >= renews + 2; }, 20s),
             "renews " << agent.renews() << "\n"
                       << read_file(agent.log));

  // Other paths in the file are applied too, without a restart.
  client_files moved(pki().file("agent-y.pem"), pki().file("agent-y.key"));
  agent.write(s, moved.tls());
  auto r = http_client(agent.port, 10s).post("/v1/reload", "");
  BOOST_TEST(r.status == 200, r.body);
  BOOST_TEST(contains(r.body, "\"changed\":[\"tls\"]"), r.body);
  BOOST_TEST(contains(r.body, "\"restart_needed\":[]"), r.body);
  BOOST_TEST(contains(last_line_with(read_file(agent.log), "event=tls_reload"), "cert_file=" + moved.cert));
  // And a path that cannot be read is refused with the file's name, nothing applied.
  agent.write(s, tls_files(pki().ca(), moved.cert, "/nonexistent/agent.key"));
  r = http_client(agent.port, 10s).post("/v1/reload", "");
  BOOST_TEST(r.status == 400, r.body);
  BOOST_TEST(contains(r.body, "/nonexistent/agent.key"), r.body);
  renews = std::max(agent.renews(), 0L);
  BOOST_TEST(eventually([&] { return agent.leads() && agent.renews() >= renews + 2; }, 15s));
}

BOOST_AUTO_TEST_CASE(reload_tls_of_an_etcds_client_reads_the_files_for_every_member) {
  // Connections are made lazily: the files are read and checked without any member being reached.
  client_files files(pki().client_cert(), pki().client_key());
  asio::io_context ioc;
  client c(ioc.get_executor(), config("etcds://127.0.0.1:1,127.0.0.1:2", files.tls()));
  pki().make_leaf("etcd-client-y", "ca", "baton-etcd-client", "subjectAltName=DNS:baton-etcd-client");
  files.rotate(pki().file("etcd-client-y.pem"), pki().file("etcd-client-y.key"));
  auto r = c.reload_tls();
  BOOST_TEST(!r.ec, r.diagnostic);
  BOOST_TEST(r.sha256 == test_pki::sha256_fingerprint_of_file(pki().file("etcd-client-y.pem")));
  BOOST_TEST(r.subject == "CN=baton-etcd-client");
  write_file(files.key, "this is not PEM\n");
  r = c.reload_tls();
  BOOST_TEST((r.ec == error::invalid_config));
  BOOST_TEST(contains(r.diagnostic, "tls.key_file \"" + files.key + "\""), r.diagnostic);
  BOOST_TEST(r.sha256 == test_pki::sha256_fingerprint_of_file(pki().file("etcd-client-y.pem")));
}
