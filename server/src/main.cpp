// SPDX-License-Identifier: Apache-2.0
// batond: the reference lock server of the Baton protocol (docs/protocol.md).

#include "baton/common/listen_address.hpp"
#include "baton/common/log.hpp"
#include "baton/common/sd_notify.hpp"
#include "http_server.hpp"
#include "journal.hpp"
#include "lock_service.hpp"
#include "repair.hpp"
#include "tls.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/program_options.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <string_view>
#include <thread>

namespace po = boost::program_options;
namespace asio = boost::asio;
using namespace baton::server;

namespace {

// --listen, read as the agent reads its listen addresses (baton/common/listen_address.hpp).
asio::ip::tcp::endpoint parse_listen(const std::string& text) {
  try {
    return baton::parse_listen(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("--listen: ") + e.what());
  }
}

// Exit statuses beyond 0 (stopped cleanly), 1 (could not start) and 2 (bad usage); docs/design.md.
constexpr int exit_data_damaged = 65;    // a log or snapshot is damaged: see `batond repair`
constexpr int exit_storage_failed = 74;  // a write, fsync or rename of the log failed while serving

// A lease TTL above this is refused at start-up: a year is far beyond any lease, and far below where a
// deadline could overflow the clock.
constexpr std::int64_t max_ttl_limit_ms = 365LL * 24 * 3600 * 1000;

// The storage failure's own log line says what failed; answering what is in flight takes little time.
constexpr std::chrono::milliseconds storage_failure_drain{2'000};

int repair_main(int argc, char** argv) {
  std::string data_dir;
  po::options_description opts("batond repair options");
  opts.add_options()("help,h", "show this help")("data-dir", po::value(&data_dir),
                                                 "data directory to repair (required)");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, opts), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << "usage: batond repair --data-dir DIR\n"
                 "Cuts the damaged stretches out of a stopped batond's log, keeps each damaged log as\n"
                 "<name>.damaged, and raises the token counter above any token the lost bytes could hold.\n"
              << opts;
    return 0;
  }
  if (data_dir.empty()) throw std::invalid_argument("--data-dir is required");
  auto report = repair_data_dir(data_dir);
  if (report.damaged.empty()) {
    std::printf("batond repair: %s has no damaged log; nothing changed (last token %llu)\n", data_dir.c_str(),
                static_cast<unsigned long long>(report.last_token_seen));
    return 0;
  }
  for (const auto& d : report.damaged)
    std::printf(
        "damaged: file=%s offset=%llu lost_bytes=%llu valid_records_after=%llu (kept as %s.damaged)\n",
        d.file.c_str(), static_cast<unsigned long long>(d.offset),
        static_cast<unsigned long long>(d.lost_bytes), static_cast<unsigned long long>(d.records_after),
        d.file.filename().c_str());
  std::printf(
      "repaired: restored_leases=%llu last_token_seen=%llu token_floor=%llu generation=%llu\n"
      "Leases granted or extended in the lost bytes are gone: their holders may still act, and only "
      "the fencing tokens (the next grant is above %llu) keep their writes from landing after a new "
      "holder's.\n",
      static_cast<unsigned long long>(report.restored_leases),
      static_cast<unsigned long long>(report.last_token_seen),
      static_cast<unsigned long long>(report.token_floor), static_cast<unsigned long long>(report.generation),
      static_cast<unsigned long long>(report.token_floor));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "repair") {
    try {
      return repair_main(argc - 1, argv + 1);
    } catch (const po::error& e) {
      std::fprintf(stderr, "batond repair: %s (see batond repair --help)\n", e.what());
      return 2;
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "batond repair: %s\n", e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "batond repair: %s\n", e.what());
      return 1;
    }
  }

  std::string listen, data_dir, level_name, tokens_file, format_name;
  std::int64_t min_ttl = 0, max_ttl = 0, max_lock_delay = 0, read_timeout = 0, unauthenticated_timeout = 0;
  std::uint64_t compact_bytes = 0;
  std::int64_t max_permits = 0;
  unsigned threads = 0;
  tls_files tls;
  limits_options limits;

  po::options_description opts("batond options");
  // clang-format off
  opts.add_options()
    ("help,h", "show this help")
    ("version", "print the version and exit")
    ("listen", po::value(&listen)->default_value("127.0.0.1:7070"), "address to serve on, ADDRESS:PORT, an IPv6 address in brackets ([::1]:7070); port 0 picks a free one")
    ("data-dir", po::value(&data_dir), "directory for the write-ahead log and snapshots (required)")
    ("min-ttl-ms", po::value(&min_ttl)->default_value(100), "smallest lease TTL a client may ask for")
    ("max-ttl-ms", po::value(&max_ttl)->default_value(3'600'000), "largest lease TTL a client may ask for")
    ("max-lock-delay-ms", po::value(&max_lock_delay)->default_value(60'000), "largest lock-delay an acquire may ask for (0: none allowed)")
    ("max-permits", po::value(&max_permits)->default_value(1000), "most permits an acquire may ask for on one key (a semaphore), 1 to 65535")
    ("threads", po::value(&threads)->default_value(std::max(1u, std::thread::hardware_concurrency())), "worker threads")
    ("read-timeout-ms", po::value(&read_timeout)->default_value(30'000), "disconnect a client that sends no complete request for this long")
    ("compact-bytes", po::value(&compact_bytes)->default_value(64ull << 20), "compact the log once it grows past this size")
    ("log-format", po::value(&format_name)->default_value("logfmt"), "logfmt (ts=... level=... event=... key=value) or json (one object per line)")
    ("log-level", po::value(&level_name)->default_value("info"), "debug, info, warn or error")
    ("tls-cert", po::value(&tls.cert_file), "serve HTTPS only, with this PEM certificate chain (needs --tls-key); SIGHUP reloads it, --tls-key and --tls-client-ca for new connections, keeping the old ones if a file is bad")
    ("tls-key", po::value(&tls.key_file), "PEM private key of --tls-cert")
    ("tls-client-ca", po::value(&tls.client_ca_file), "mutual TLS: require a client certificate issued by a CA in this PEM bundle")
    ("tokens-file", po::value(&tokens_file), "require bearer tokens listed in this file (docs/security.md); SIGHUP reloads it")
    ("max-connections", po::value(&limits.max_connections)->default_value(limits.max_connections), "open client connections at once; past it: 503 and close")
    ("max-connections-per-address", po::value(&limits.max_connections_per_address)->default_value(limits.max_connections_per_address), "open connections from one client address; past it: 503 and close")
    ("unauthenticated-timeout-ms", po::value(&unauthenticated_timeout)->default_value(static_cast<std::int64_t>(limits.unauthenticated_timeout.count())), "with --tokens-file: close a connection that has made no authenticated request for this long")
    ("max-locks", po::value(&limits.max_locks)->default_value(limits.max_locks), "locks held at once; past it an acquire of a free key gets 503")
    ("max-records", po::value(&limits.max_records)->default_value(limits.max_records), "lock records kept (they outlive leases); past it a new key's first record write gets 507")
    ("max-header-bytes", po::value(&limits.max_header_bytes)->default_value(limits.max_header_bytes), "request line and headers; past it: 431")
    ("max-body-bytes", po::value(&limits.max_body_bytes)->default_value(limits.max_body_bytes), "request body; past it: 413")
    ("rate-limit", po::value(&limits.rate_per_second)->default_value(limits.rate_per_second), "requests per second per client (its authenticated name with --tokens-file, else its address), 0 = off; past it: 429")
    ("rate-burst", po::value(&limits.rate_burst)->default_value(limits.rate_burst), "requests a client may send at once above --rate-limit (0: the rate, at least 1)")
    ("max-waiters-per-key", po::value(&limits.max_waiters_per_key)->default_value(limits.max_waiters_per_key), "long-poll waiters on one key; past it: 503")
    ("max-waiters", po::value(&limits.max_waiters)->default_value(limits.max_waiters), "long-poll waiters in total; past it: 503");
  // clang-format on

  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
    if (vm.count("version")) {
      std::cout << "batond " BATOND_VERSION "\n";
      return 0;
    }
    if (vm.count("help")) {
      std::cout << "usage: batond --data-dir DIR [options]\n"
                   "       batond repair --data-dir DIR   (a damaged log; see batond repair --help)\n"
                << opts;
      return 0;
    }
    if (data_dir.empty()) throw std::invalid_argument("--data-dir is required");
    baton::log::level lvl;
    if (!baton::log::parse_level(level_name, lvl))
      throw std::invalid_argument("--log-level must be debug, info, warn or error");
    baton::log::set_level(lvl);
    baton::log::format format;
    if (!baton::log::parse_format(format_name, format))
      throw std::invalid_argument("--log-format must be logfmt or json, got \"" + format_name + "\"");
    baton::log::set_format(format);
    if (min_ttl < 1) throw std::invalid_argument("--min-ttl-ms must be at least 1");
    if (max_ttl < min_ttl) throw std::invalid_argument("--max-ttl-ms must be at least --min-ttl-ms");
    if (max_ttl > max_ttl_limit_ms)
      throw std::invalid_argument("--max-ttl-ms must be at most " + std::to_string(max_ttl_limit_ms) +
                                  " (365 days), got " + std::to_string(max_ttl));
    if (max_lock_delay < 0 || max_lock_delay > max_ttl_limit_ms)
      throw std::invalid_argument("--max-lock-delay-ms must be 0 to " + std::to_string(max_ttl_limit_ms) +
                                  " (365 days), got " + std::to_string(max_lock_delay));
    if (max_permits < 1 || max_permits > baton::server::max_permits_limit)
      throw std::invalid_argument("--max-permits must be 1 to " +
                                  std::to_string(baton::server::max_permits_limit) + ", got " +
                                  std::to_string(max_permits));
    if (compact_bytes < min_compact_bytes || compact_bytes > max_compact_bytes)
      throw std::invalid_argument("--compact-bytes must be " + std::to_string(min_compact_bytes) + " to " +
                                  std::to_string(max_compact_bytes) + ", got " +
                                  std::to_string(compact_bytes));
    if (read_timeout < 1) throw std::invalid_argument("--read-timeout-ms must be at least 1");
    if (threads < 1) throw std::invalid_argument("--threads must be at least 1");
    if (vm.count("tls-cert") != vm.count("tls-key"))
      throw std::invalid_argument("--tls-cert and --tls-key go together");
    if (vm.count("tls-client-ca") && !vm.count("tls-cert"))
      throw std::invalid_argument("--tls-client-ca needs --tls-cert and --tls-key");
    limits.unauthenticated_timeout = std::chrono::milliseconds(unauthenticated_timeout);
    validate(limits);
    if (limits.max_waiters >= limits.max_connections)
      baton::log::warn("waiters_not_below_connections",
                       {{"max_waiters", limits.max_waiters},
                        {"max_connections", limits.max_connections},
                        {"effect", "long-polls can take every connection slot from acquires and renews"}});

    http_options http;
    http.listen = parse_listen(listen);
    http.threads = threads;
    http.ttl = {std::chrono::milliseconds(min_ttl), std::chrono::milliseconds(max_ttl),
                std::chrono::milliseconds(max_lock_delay), static_cast<std::uint32_t>(max_permits)};
    http.read_timeout = std::chrono::milliseconds(read_timeout);
    // Certificates are read before the journal is opened, so a bad file stops batond before it does anything.
    std::int64_t tls_not_after = 0;
    if (vm.count("tls-cert")) {
      http.tls = make_server_tls_context(tls);
      auto served = served_certificate(*http.tls, std::chrono::system_clock::now());
      log_certificate("tls_certificate", served);
      tls_not_after = served.not_after_seconds;
    }
    if (vm.count("tokens-file")) {
      if (tokens_file.empty()) throw std::invalid_argument("--tokens-file must name a file");
      try {
        http.tokens = std::make_shared<auth::token_store>(tokens_file);
      } catch (const auth::tokens_file_error& e) {
        throw std::invalid_argument(e.what());
      }
      auto clients = http.tokens->current()->clients.size();
      baton::log::info("tokens_loaded", {{"file", tokens_file}, {"clients", clients}});
      if (clients == 0)
        baton::log::warn("tokens_file_empty",
                         {{"file", tokens_file}, {"effect", "every request but /healthz is refused"}});
    } else if (!http.listen.address().is_loopback()) {
      baton::log::warn("no_authentication", {{"address", http.listen.address().to_string()},
                                             {"reason",
                                              "listening beyond loopback without --tokens-file: anyone who "
                                              "can reach the port can take, release and read every lock"}});
    }
    http.limits = limits;

    // Block the stop signals in every thread; the signal_set in run() receives them.
    ::signal(SIGPIPE, SIG_IGN);

    server_metrics metrics;
    journal log(journal_options{data_dir, compact_bytes}, &metrics);
    lock_service service(log, metrics);
    auto stats = log.open(service.table(), clock::now());
    metrics.locks_held.store(static_cast<std::int64_t>(stats.restored_leases));
    metrics.tls_certificate_not_after.store(tls_not_after);
    baton::log::info("recovered", {{"data_dir", data_dir},
                                   {"generation", stats.generation},
                                   {"snapshot_entries", stats.snapshot_entries},
                                   {"records", stats.records},
                                   {"torn_bytes", stats.torn_bytes},
                                   {"restored_leases", stats.restored_leases},
                                   {"last_token", stats.last_token}});
    http_server server(http, service, metrics);
    // Fail-stop: after a failed write or fsync nothing more can be acknowledged, and retrying could
    // acknowledge what the kernel already dropped. Answer what is in flight (503), exit with a status of its
    // own, and let the supervisor's restart recover from what is on disk.
    log.on_failure([&server](const std::string& what) {
      baton::log::error("storage_failed", {{"error", what},
                                           {"action",
                                            "answering requests in flight with 503, then exiting with "
                                            "status 74; a restart recovers from the log"}});
      server.stop(storage_failure_drain);
    });
    log.start();

    auto bound = server.bind();
    std::string where =
        bound.address().is_v6() ? "[" + bound.address().to_string() + "]" : bound.address().to_string();
    std::printf("batond listening on %s:%u\n", where.c_str(), bound.port());
    std::fflush(stdout);
    baton::log::info("listening", {{"address", where + ":" + std::to_string(bound.port())},
                                   {"threads", threads},
                                   {"tls", !http.tls                    ? "off"
                                           : tls.client_ca_file.empty() ? "on"
                                                                        : "mutual"}});
    // Recovered and bound: a unit ordered after batond (Type=notify) starts only now, when it can be served.
    baton::sd_notify::notify("READY=1\nSTATUS=serving on " + where + ":" + std::to_string(bound.port()));
    server.run();
    log.stop();
    if (log.failed()) {
      baton::log::error("exiting", {{"status", exit_storage_failed}, {"error", log.failure_message()}});
      return exit_storage_failed;
    }
    baton::log::info("stopped", {{"durable_lsn", log.durable()}});
    return 0;
  } catch (const po::error& e) {
    std::fprintf(stderr, "batond: %s (see --help)\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "batond: %s\n", e.what());
    return 2;
  } catch (const journal_damaged& e) {
    std::fprintf(stderr,
                 "batond: %s; refusing to start and leaving the file as it is (batond repair --data-dir DIR "
                 "cuts it: docs/design.md, \"Repair\")\n",
                 e.what());
    return exit_data_damaged;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "batond: %s\n", e.what());
    return 1;
  }
}
