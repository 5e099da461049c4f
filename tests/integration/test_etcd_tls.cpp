// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE etcd_tls
#include <boost/test/unit_test.hpp>

// The SDK's etcd backend over TLS (etcds://) against a real etcd serving its client port with a certificate
// made at test time, with and without client certificate authentication.

#include "batond_fixture.hpp"
#include "coro.hpp"
#include "etcd_client_config.hpp"
#include "etcd_cluster.hpp"
#include "lease_opts.hpp"
#include "test_pki.hpp"
#include "tls_files.hpp"
#include "tls_stub_server.hpp"

#include "baton/client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <optional>
#include <thread>

using namespace baton;
using namespace baton::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

const test_pki& pki() {
  return test_pki::shared();
}

client_config config(const std::string& url, tls_config tls) {
  auto c = etcd_client_config(url, "etcd-tls-test");
  c.tls = std::move(tls);
  c.request_timeout = 5000ms;
  c.retry.max_attempts = 1;
  return c;
}

// A get through the SDK; the error it ends with, if any.
std::optional<exception> get_error(const client_config& cfg) {
  asio::io_context ioc;
  std::optional<exception> failure;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    try {
      client c(ioc.get_executor(), cfg);
      co_await c.async_get("probe");
    } catch (const exception& e) {
      failure = e;
    }
  }());
  return failure;
}

struct etcd_tls_process {
  temp_dir dir;
  unsigned short client_port = ephemeral_port(), peer_port = ephemeral_port();
  std::unique_ptr<child_process> proc;
  explicit etcd_tls_process(bool client_cert_auth) {
    std::string c = "https://127.0.0.1:" + std::to_string(client_port),
                p = "http://127.0.0.1:" + std::to_string(peer_port);
    std::vector<std::string> argv{"/usr/bin/etcd",
                                  "--name",
                                  "t",
                                  "--data-dir",
                                  (dir.path() / "data").string(),
                                  "--listen-client-urls",
                                  c,
                                  "--advertise-client-urls",
                                  c,
                                  "--listen-peer-urls",
                                  p,
                                  "--initial-advertise-peer-urls",
                                  p,
                                  "--initial-cluster",
                                  "t=" + p,
                                  "--cert-file",
                                  pki().server_cert(),
                                  "--key-file",
                                  pki().server_key()};
    if (client_cert_auth) {
      argv.insert(argv.end(), {"--client-cert-auth", "--trusted-ca-file", pki().ca()});
    }
    proc = std::make_unique<child_process>(argv, (dir.path() / "etcd.log").string());
    // Ready once the SDK (with the right certificates) gets an answer.
    const auto ready = config(url(), tls_files(pki().ca(), pki().client_cert(), pki().client_key()));
    auto until = std::chrono::steady_clock::now() + 60s;
    while (get_error(ready)) {
      BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < until, "etcd did not start");
      std::this_thread::sleep_for(200ms);
    }
  }
  std::string url() const { return "etcds://127.0.0.1:" + std::to_string(client_port); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(lease_lifecycle_on_etcd_over_tls) {
  etcd_tls_process etcd(false);
  asio::io_context ioc;
  client a(ioc.get_executor(), config(etcd.url(), tls_files(pki().ca())));
  client b(ioc.get_executor(), config(etcd.url(), tls_files(pki().ca())));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto ra = co_await a.async_try_acquire("tls/report", lease_opts(2000ms, 500ms));
    BOOST_REQUIRE(ra.acquired.has_value());
    auto rb = co_await b.async_try_acquire("tls/report", lease_opts(2000ms, 500ms));
    BOOST_TEST(!rb.acquired.has_value());
    BOOST_TEST(rb.holder.token == ra.acquired->token());
    asio::steady_timer t(ioc, 3000ms);  // 1.5 TTLs: only keepalives over TLS hold it
    co_await t.async_wait(asio::use_awaitable);
    BOOST_TEST(ra.acquired->active());
    BOOST_TEST(a.stats().renews >= 3u);
    BOOST_TEST((co_await ra.acquired->async_release() == release_outcome::released));
    BOOST_TEST(!(co_await b.async_get("tls/report")).has_value());
  }());
}

// The key watch was plain TCP only: over etcds:// it was never opened, and a held key deleted behind its
// holder's back was found at the next renew, seconds later. Now the watch speaks TLS as every request does.
// Another client deletes the key (a release with the holder's owner and token); the holder renews every
// 8-12 s and must see the loss within 2 s. A waiter over etcds:// then takes a lock the moment it is
// released.
BOOST_AUTO_TEST_CASE(over_etcds_a_held_key_deleted_by_another_client_is_a_loss_well_before_the_next_renew) {
  etcd_tls_process etcd(false);
  asio::io_context ioc;
  client a(ioc.get_executor(), config(etcd.url(), tls_files(pki().ca())));
  client b(ioc.get_executor(), config(etcd.url(), tls_files(pki().ca())));
  const auto raw = make_backend(ioc.get_executor(), config(etcd.url(), tls_files(pki().ca())));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto gone = co_await a.async_acquire("tls/watched", lease_opts(30000ms, 10000ms));
    co_await sleep_for(500ms);  // the watch stream is open by now; one opened later replays the delete
    const auto deleted_at = std::chrono::steady_clock::now();
    auto deleted = co_await raw->release("tls/watched", gone.owner(), gone.token(), 5000ms);
    BOOST_REQUIRE(!deleted.ec);
    BOOST_REQUIRE((deleted.outcome == release_outcome::released));
    while (gone.active() && std::chrono::steady_clock::now() - deleted_at < 5s)
      co_await sleep_for(20ms);
    const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - deleted_at).count();
    BOOST_TEST_MESSAGE("lease lost " << after * 1000 << " ms after its key was deleted (renew period 10 s)");
    BOOST_TEST((gone.state() == lease_state::lost));
    BOOST_TEST(after < 2.0);  // 4x below the earliest renew
    BOOST_TEST(gone.loss_reason().find("not_held") != std::string::npos, gone.loss_reason());

    // A waiter's watch over TLS: b waits for a lock a holds, and has it once a releases.
    auto held = co_await a.async_acquire("tls/handover", lease_opts(30000ms));
    std::optional<lease> next;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
          next.emplace(co_await b.async_acquire("tls/handover", lease_opts(30000ms)));
        },
        asio::detached);
    co_await sleep_for(300ms);
    BOOST_TEST(!next.has_value());
    BOOST_TEST((co_await held.async_release() == release_outcome::released));
    for (int i = 0; i < 100 && !next; ++i)
      co_await sleep_for(50ms);
    BOOST_REQUIRE(next.has_value());
    BOOST_TEST(next->token() > held.token());
    co_await next->async_release();
  }());
}

BOOST_AUTO_TEST_CASE(etcd_over_tls_refuses_an_untrusted_server_and_plain_etcd_urls) {
  etcd_tls_process etcd(false);
  auto e = get_error(config(etcd.url(), tls_files(pki().other_ca())));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST((e->code() == error::tls_failed));
  BOOST_TEST(e->diagnostic().find("is not trusted") != std::string::npos, e->diagnostic());
  // etcd:// (plain) to a TLS port: no answer that makes sense, and an error rather than a hang.
  e = get_error(config("etcd://127.0.0.1:" + std::to_string(etcd.client_port), {}));
  BOOST_TEST(e.has_value());
}

// etcd closes at once when it refuses a client certificate: the client reads its alert (tls_failed) or, when
// the close overtakes the alert, a reset (connection_failed) whose message says what it likely was.
void refused_for_its_certificate(const std::optional<exception>& e) {
  BOOST_REQUIRE(e.has_value());
  if (e->code() == error::tls_failed) return;
  BOOST_TEST((e->code() == error::connection_failed), e->what());
  BOOST_TEST(e->diagnostic().find("client certificate") != std::string::npos, e->diagnostic());
}

BOOST_AUTO_TEST_CASE(etcd_with_client_certificate_auth_needs_our_certificate) {
  etcd_tls_process etcd(true);
  refused_for_its_certificate(get_error(config(etcd.url(), tls_files(pki().ca()))));
  refused_for_its_certificate(get_error(
      config(etcd.url(), tls_files(pki().ca(), pki().other_client_cert(), pki().other_client_key()))));
  auto e = get_error(config(etcd.url(), tls_files(pki().ca(), pki().client_cert(), pki().client_key())));
  BOOST_TEST(!e.has_value(), (e ? e->what() : std::string()));
}

BOOST_AUTO_TEST_CASE(etcds_checks_the_certificate_for_every_form_of_host_and_tells_a_wrong_one_no_password) {
  const host_check_certs certs(pki());
  auto url = [](const std::string& host, unsigned short port) {
    return "etcds://baton:s3cret-pw@" + host + ":" + std::to_string(port);
  };
  for (const auto& host : loopback_hosts) {
    BOOST_TEST_CONTEXT("etcds://" << host) {
      for (const auto& wrong : {certs.wrong_name, certs.wrong_address}) {
        tls_stub_server impostor(pki().file(wrong + ".pem"), pki().file(wrong + ".key"));
        auto e = get_error(config(url(host, impostor.port()), tls_files(pki().ca())));
        BOOST_REQUIRE(e.has_value());
        BOOST_TEST((e->code() == error::tls_failed), wrong << ": " << e->what());
        BOOST_TEST(e->diagnostic().find("not valid for this host name") != std::string::npos,
                   e->diagnostic());
        BOOST_TEST(impostor.received().empty(), wrong << " was sent: " << impostor.received());
      }
      // The right certificate: the client gets as far as authenticating (the stub refuses with a 500).
      tls_stub_server server(pki().file(certs.right + ".pem"), pki().file(certs.right + ".key"));
      auto e = get_error(config(url(host, server.port()), tls_files(pki().ca())));
      BOOST_REQUIRE(e.has_value());
      BOOST_TEST((e->code() != error::tls_failed), e->what());
      BOOST_TEST(server.received().find("POST /v3/auth/authenticate") != std::string::npos,
                 server.received());
    }
  }
}

BOOST_AUTO_TEST_CASE(etcd_endpoint_without_a_host_is_a_configuration_error) {
  auto e = get_error(config("etcds://:2379", tls_files(pki().ca())));
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST((e->code() == error::invalid_config), e->what());
}
