// SPDX-License-Identifier: Apache-2.0
// chaos-worker: one client of the chaos run (docs/reliability.md). It loops: try to acquire one of a few
// contended keys, write to fenced-store with the lease's token (sometimes a long write of several chunks
// that straddles renews), release. It records every step as one JSON line with a CLOCK_MONOTONIC timestamp
// in microseconds, which the history checker (chaos-check) reads.
//
//   chaos-worker --id NAME --server URL --store URL --keys a,b,c --events FILE [--seed N] [--ttl-ms N]
//                [--request-timeout-ms N] [--raise-ttl-ms N] [--long-hold-ms N] [--ignore-loss]
//                [--semaphore-keys d,e --permits N]
//
// Safe mode writes inside baton::with_lease and checks lease.active() before each chunk: a chunk is never
// started once the SDK says the lease is gone. --ignore-loss is the deliberately unsafe worker of the
// checker's self-test: it writes every planned chunk whatever the lease's state. SIGTERM or SIGINT: finish
// the current lease (release it) and exit 0. SIGUSR1: the next chunk started within 2 s stops the process
// (SIGSTOP to itself) right after its lease check, and is written when the runner continues it.
//
// With --long-hold-ms N, a quarter of the rounds hold their lease for N/2 to N ms, writing a chunk every
// third of the TTL: a lease that spans a fault of several TTLs, such as an etcd leader's disk stall.
//
// With --semaphore-keys, the round's key is drawn from both lists, and a key of that list is a semaphore of
// --permits permits (baton::semaphore): a permit is recorded as the resource `key#slot`, its grant with
// fields base, permits and slot, which the checker counts (too_many_holders), and written to the store with
// its slot and count (Fencing-Slot, Fencing-Permits: docs/fencing.md, "Semaphores").
//
// With --raise-ttl-ms N, half the rounds raise their lease's TTL, which the SDK never does (it renews with
// the TTL it acquired with): they speak the protocol through the SDK's backend, acquire with --ttl-ms,
// renew with it a few times, then renew with N, the renew batond must make durable before it answers.
// Such a renew is retried after a timeout with the same TTL until the local deadline passes, as the SDK
// retries; a retry answered before the raised TTL is on disk is how a crash gives the lock away early.

#include <baton/client.hpp>
#include <baton/semaphore.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One JSON line per event, flushed at once: a worker killed mid-run leaves whole lines behind.
class event_log {
 public:
  event_log(const std::string& path, std::string src) : src_(std::move(src)) {
    file_ = std::fopen(path.c_str(), "a");
    if (!file_) throw std::runtime_error("cannot open " + path);
  }
  ~event_log() { std::fclose(file_); }
  event_log(const event_log&) = delete;
  event_log& operator=(const event_log&) = delete;

  void emit(std::string_view ev, json::object fields) {
    fields["t"] = now_us();
    fields["src"] = src_;
    fields["ev"] = ev;
    auto line = json::serialize(fields);
    std::fprintf(file_, "%s\n", line.c_str());
    std::fflush(file_);
  }

 private:
  std::string src_;
  std::FILE* file_;
};

struct options {
  std::string id, server, store, events;
  std::vector<std::string> keys;
  std::vector<std::string> semaphore_keys;
  std::uint32_t permits = 2;
  std::uint64_t seed = 1;
  long ttl_ms = 1000;
  long request_timeout_ms = 400;
  long raise_ttl_ms = 0;  // 0: no rounds raise the TTL
  long long_hold_ms = 0;  // 0: no rounds hold their lease for long
  bool ignore_loss = false;
};

struct store_endpoint {
  std::string host, port;
};

// PUT /items/{key} with the token, fenced per key; returns the HTTP status, or -1 when the store could not
// be reached in time (the write may or may not have happened: the store's own history says which). A
// permit's resource `key#slot` goes as Fencing-Resource: key with Fencing-Slot and Fencing-Permits
// (docs/fencing.md), so the store fences it per slot and against a newer count.
asio::awaitable<int> put_item(const store_endpoint& at, const std::string& key, std::uint64_t token,
                              std::string value, milliseconds timeout, std::uint32_t permits) {
  auto ex = co_await asio::this_coro::executor;
  asio::ip::tcp::resolver resolver(ex);
  auto [rec, results] = co_await resolver.async_resolve(at.host, at.port, use_tuple);
  if (rec) co_return -1;
  beast::tcp_stream stream(ex);
  stream.expires_after(timeout);
  auto [cec, ep] = co_await stream.async_connect(results, use_tuple);
  if (cec) co_return -1;
  std::string path = "/items/";
  for (char c : key)
    path += c == '#' ? std::string("%23") : std::string(1, c);
  http::request<http::string_body> req{http::verb::put, path, 11};
  req.set(http::field::host, at.host);
  req.set("Fencing-Token", std::to_string(token));
  if (const auto hash = key.rfind('#'); hash != std::string::npos) {
    req.set("Fencing-Resource", key.substr(0, hash));
    req.set("Fencing-Slot", key.substr(hash + 1));
    req.set("Fencing-Permits", std::to_string(permits));
  } else {
    req.set("Fencing-Resource", key);
  }
  req.body() = std::move(value);
  req.prepare_payload();
  auto [wec, wn] = co_await http::async_write(stream, req, use_tuple);
  if (wec) co_return -1;
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  auto [ec, n] = co_await http::async_read(stream, buf, res, use_tuple);
  if (ec) co_return -1;
  beast::error_code ignored;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  co_return static_cast<int>(res.result_int());
}

// A permit's resource: key#slot.
std::string permit_resource(const std::string& key, std::uint32_t slot) {
  return key + "#" + std::to_string(slot);
}

// What a lease fences, and names in the history: its key, or key#slot for a permit (--permits is 2 or more).
std::string resource_of(const baton::lease& l) {
  return l.permits() > 1 ? permit_resource(l.key(), l.slot()) : l.key();
}

struct worker {
  const options& opt;
  event_log& log;
  baton::client& client;
  baton::backend& raw;  // the protocol without the SDK's lease code (raising_round)
  store_endpoint store;
  const baton::lease*& current;  // the lease held now, for the renew events
  std::mt19937_64 rng;
  bool stopping = false;
  std::uint64_t raising_rounds = 0;
  std::int64_t pause_armed_until = 0;  // SIGUSR1: stop before the next write that starts until then

  long uniform(long lo, long hi) { return std::uniform_int_distribution<long>(lo, hi)(rng); }

  asio::awaitable<void> sleep(milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(use_tuple);
  }

  // One chunk's write, right after its lease check: the store's HTTP status, or -1. When the stale_write
  // fault is armed (docs/reliability.md), the process first stops itself between the check and the write,
  // as by a GC pause, until the runner continues it; then the write goes out through a blocking client,
  // which the SDK's cancellation cannot stop, as a program with a synchronous client writes. Only the fence
  // can refuse it then.
  asio::awaitable<int> write_after_check(const std::string& key, std::uint64_t token, int chunk) {
    const std::string value = opt.id + ":" + std::to_string(token) + ":" + std::to_string(chunk);
    const milliseconds timeout(opt.request_timeout_ms);
    if (pause_armed_until <= now_us())
      co_return co_await put_item(store, key, token, value, timeout, opt.permits);
    pause_armed_until = 0;
    log.emit("paused_before_write", {{"key", key}, {"token", token}, {"chunk", chunk}});
    ::raise(SIGSTOP);
    asio::io_context blocking;
    int status = -1;
    asio::co_spawn(blocking, put_item(store, key, token, value, timeout, opt.permits),
                   [&](std::exception_ptr, int s) { status = s; });
    blocking.run();
    co_return status;
  }

  // The chunks of one write. In safe mode a chunk starts only while the SDK says the lease is active.
  asio::awaitable<void> write_chunks(const baton::lease& l, const std::string& res, int chunks,
                                     milliseconds gap) {
    for (int i = 0; i < chunks; ++i) {
      if (!opt.ignore_loss && !l.active()) {
        log.emit("write_skipped", {{"key", res}, {"token", l.token()}, {"chunk", i}});
        co_return;
      }
      log.emit("write_start", {{"key", res}, {"token", l.token()}, {"chunk", i}, {"chunks", chunks}});
      const int status = co_await write_after_check(res, l.token(), i);
      log.emit("write_done", {{"key", res}, {"token", l.token()}, {"chunk", i}, {"status", status}});
      if (i + 1 < chunks) co_await sleep(gap);
    }
  }

  asio::awaitable<void> one_round() {
    const auto pick = static_cast<std::size_t>(
        uniform(0, static_cast<long>(opt.keys.size() + opt.semaphore_keys.size()) - 1));
    const bool permit = pick >= opt.keys.size();
    const std::string key = permit ? opt.semaphore_keys[pick - opt.keys.size()] : opt.keys[pick];
    baton::lease_options lo;
    lo.ttl = milliseconds(opt.ttl_ms);  // the other options keep their defaults, as in main's copy
    const auto sent = now_us();
    log.emit("acquire_req", {{"key", key}});
    std::optional<baton::lease> held;
    std::string failure;
    try {
      // Not `permit ? co_await a : co_await b`: GCC 12 destroys that conditional's result twice.
      baton::acquire_result r;
      if (permit)
        r = co_await baton::semaphore(client, key, opt.permits).async_try_acquire(lo);
      else
        r = co_await client.async_try_acquire(key, lo);
      if (!r.acquired) {
        // A full semaphore names the permit that expires first, and its slot.
        log.emit("acquire_refused", {{"key", permit ? permit_resource(key, r.holder.slot) : key},
                                     {"sent", sent},
                                     {"holder_token", r.holder.token},
                                     {"holder", r.holder.owner}});
      } else {
        held.emplace(std::move(*r.acquired));
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty()) log.emit("acquire_failed", {{"key", key}, {"sent", sent}, {"error", failure}});
    if (!held) {
      co_await sleep(milliseconds(uniform(10, 120)));
      co_return;
    }
    baton::lease& l = *held;
    const std::string res = resource_of(l);
    current = &l;
    json::object granted{
        {"key", res}, {"sent", sent}, {"token", l.token()}, {"ttl_ms", opt.ttl_ms}, {"owner", l.owner()}};
    if (permit) {
      granted["base"] = key;
      granted["permits"] = l.permits();
      granted["slot"] = l.slot();
    }
    log.emit("acquire_granted", std::move(granted));

    // A third of the writes are long: several chunks spread over more than one renew period. With
    // --long-hold-ms, a quarter of the rounds are longer still: a chunk every third of the TTL for half to
    // all of it.
    int chunks = 0;
    milliseconds gap{0};
    if (opt.long_hold_ms > 0 && uniform(0, 3) == 0) {
      gap = milliseconds(opt.ttl_ms / 3);
      chunks = static_cast<int>(uniform(opt.long_hold_ms / 2, opt.long_hold_ms) / gap.count()) + 1;
    } else {
      const bool long_write = uniform(0, 2) == 0;
      chunks = long_write ? static_cast<int>(uniform(3, 7)) : static_cast<int>(uniform(1, 2));
      gap = milliseconds(long_write ? uniform(opt.ttl_ms / 6, opt.ttl_ms / 3) : uniform(0, 20));
    }
    std::string aborted;
    try {
      if (opt.ignore_loss)
        co_await write_chunks(l, res, chunks, gap);
      else
        co_await baton::with_lease(l, write_chunks(l, res, chunks, gap));
    } catch (const std::exception& e) {
      aborted = e.what();
    }
    if (!aborted.empty())
      log.emit("write_aborted", {{"key", res}, {"token", l.token()}, {"reason", aborted}});

    const auto release_sent = now_us();
    log.emit("release_req", {{"key", res}, {"token", l.token()}});
    std::string outcome;
    try {
      switch (co_await l.async_release()) {
        case baton::release_outcome::released:
          outcome = "released";
          break;
        case baton::release_outcome::already_free:
          outcome = "already_free";
          break;
        case baton::release_outcome::not_owner:
          outcome = "not_owner";
          break;
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
    current = nullptr;
    if (!outcome.empty())
      log.emit("released",
               {{"key", res}, {"token", l.token()}, {"sent", release_sent}, {"outcome", outcome}});
    else
      log.emit("release_failed", {{"key", res}, {"token", l.token()}, {"error", failure}});
    co_await sleep(milliseconds(uniform(0, 40)));
  }

  // A lease held through the protocol (raising_round): its TTL now and when the renew that set it was sent;
  // its local deadline is then, as the SDK's, sent + ttl - ttl / 10.
  struct raw_lease {
    std::string key, owner;
    std::uint64_t token = 0;
    long ttl_ms = 0;
    std::int64_t confirmed_sent = 0;
    std::int64_t deadline() const { return confirmed_sent + (ttl_ms - ttl_ms / 10) * 1000; }
  };

  // Renews `l` with `ttl_ms`, retried after transport errors, timeouts and 503s (with the same TTL) until
  // an answer or the local deadline. Returns false once the lease is lost.
  asio::awaitable<bool> renew(raw_lease& l, long ttl_ms) {
    auto& b = raw;
    milliseconds backoff(50);
    for (;;) {
      if (now_us() >= l.deadline()) {
        log.emit("lost", {{"key", l.key}, {"token", l.token}, {"reason", "deadline"}});
        co_return false;
      }
      const auto sent = now_us();
      auto r = co_await b.renew(l.key, l.owner, l.token, milliseconds(ttl_ms),
                                milliseconds(opt.request_timeout_ms));
      if (!r.ec) {
        l.ttl_ms = ttl_ms;
        l.confirmed_sent = sent;
        log.emit("renewed", {{"key", l.key}, {"token", l.token}, {"sent", sent}, {"ttl_ms", ttl_ms}});
        co_return true;
      }
      if (r.ec == baton::error::lease_lost) {
        log.emit("lost", {{"key", l.key}, {"token", l.token}, {"reason", r.lost_reason}});
        co_return false;
      }
      co_await sleep(milliseconds(uniform(backoff.count() / 2, backoff.count())));
      backoff = std::min(backoff * 2, milliseconds(opt.ttl_ms / 4));
    }
  }

  asio::awaitable<void> raising_round() {
    auto& b = raw;
    raw_lease l;
    l.key = opt.keys[static_cast<std::size_t>(uniform(0, static_cast<long>(opt.keys.size()) - 1))];
    l.owner = opt.id + "#raise-" + std::to_string(++raising_rounds);
    const auto sent = now_us();
    const milliseconds timeout(opt.request_timeout_ms);
    log.emit("acquire_req", {{"key", l.key}});
    auto a = co_await b.acquire(l.key, l.owner, milliseconds(opt.ttl_ms), {}, timeout);
    if (a.ec == baton::error::held) {
      log.emit(
          "acquire_refused",
          {{"key", l.key}, {"sent", sent}, {"holder_token", a.holder.token}, {"holder", a.holder.owner}});
    } else if (a.ec) {
      // Unknown outcome: a grant nobody knows of ends with its TTL.
      log.emit("acquire_failed",
               {{"key", l.key}, {"sent", sent}, {"error", a.ec.message() + " " + a.diagnostic}});
    }
    if (a.ec) {
      co_await sleep(milliseconds(uniform(10, 120)));
      co_return;
    }
    l.token = a.token;
    l.ttl_ms = opt.ttl_ms;
    l.confirmed_sent = sent;
    log.emit(
        "acquire_granted",
        {{"key", l.key}, {"sent", sent}, {"token", l.token}, {"ttl_ms", opt.ttl_ms}, {"owner", l.owner}});

    // Renewed every third of its TTL, raised after 0-4 renews, held 2-6 TTLs (of --ttl-ms) after the raise,
    // written to in chunks meanwhile. A lease held when a disk stall begins often raises its TTL during the
    // stall, and is still held when batond, killed in the stall, comes back.
    const long raise_after = uniform(0, 4);
    const long hold_after_raise_ms = uniform(2, 6) * opt.ttl_ms;
    std::int64_t hold_until = std::numeric_limits<std::int64_t>::max();
    int renews = 0, chunk = 0;
    bool held = true;
    while (held && now_us() < hold_until && !stopping) {
      const std::int64_t next_renew = l.confirmed_sent + l.ttl_ms * 1000 / 3;
      if (now_us() >= next_renew) {
        const bool raise = renews++ == raise_after;
        held = co_await renew(l, renews > raise_after ? opt.raise_ttl_ms : opt.ttl_ms);
        if (held && raise) hold_until = now_us() + hold_after_raise_ms * 1000;
        continue;
      }
      if (now_us() >= l.deadline()) {
        log.emit("write_skipped", {{"key", l.key}, {"token", l.token}, {"chunk", chunk}});
      } else {
        log.emit("write_start", {{"key", l.key}, {"token", l.token}, {"chunk", chunk}});
        const int status = co_await write_after_check(l.key, l.token, chunk);
        log.emit("write_done", {{"key", l.key}, {"token", l.token}, {"chunk", chunk}, {"status", status}});
        ++chunk;
      }
      const std::int64_t wake =
          std::min(next_renew, now_us() + uniform(opt.ttl_ms / 6, opt.ttl_ms / 3) * 1000);
      co_await sleep(milliseconds(std::max<std::int64_t>(0, (wake - now_us()) / 1000)));
    }

    // Released whatever happened: conditional on owner and token, so harmless if someone else holds it.
    const auto release_sent = now_us();
    log.emit("release_req", {{"key", l.key}, {"token", l.token}});
    std::string outcome, failure;
    for (int attempt = 0; attempt < 4 && outcome.empty(); ++attempt) {
      auto r = co_await b.release(l.key, l.owner, l.token, timeout);
      if (r.ec) {
        failure = r.ec.message();
        co_await sleep(milliseconds(50 << attempt));
        continue;
      }
      outcome = to_string(r.outcome);
    }
    if (!outcome.empty())
      log.emit("released",
               {{"key", l.key}, {"token", l.token}, {"sent", release_sent}, {"outcome", outcome}});
    else
      log.emit("release_failed", {{"key", l.key}, {"token", l.token}, {"error", failure}});
    co_await sleep(milliseconds(uniform(0, 40)));
  }

  asio::awaitable<void> run() {
    while (!stopping) {
      if (opt.raise_ttl_ms > 0 && uniform(0, 1) == 0)
        co_await raising_round();
      else
        co_await one_round();
    }
  }
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    auto comma = s.find(',', start);
    out.push_back(s.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string flag = argv[i];
      if (flag == "--ignore-loss") {
        opt.ignore_loss = true;
        continue;
      }
      if (i + 1 >= argc) throw std::invalid_argument("missing value for " + flag);
      std::string value = argv[++i];
      if (flag == "--id")
        opt.id = value;
      else if (flag == "--server")
        opt.server = value;
      else if (flag == "--store")
        opt.store = value;
      else if (flag == "--events")
        opt.events = value;
      else if (flag == "--keys")
        opt.keys = split(value);
      else if (flag == "--semaphore-keys")
        opt.semaphore_keys = split(value);
      else if (flag == "--permits")
        opt.permits = static_cast<std::uint32_t>(std::stoul(value));
      else if (flag == "--seed")
        opt.seed = std::stoull(value);
      else if (flag == "--ttl-ms")
        opt.ttl_ms = std::stol(value);
      else if (flag == "--request-timeout-ms")
        opt.request_timeout_ms = std::stol(value);
      else if (flag == "--raise-ttl-ms")
        opt.raise_ttl_ms = std::stol(value);
      else if (flag == "--long-hold-ms")
        opt.long_hold_ms = std::stol(value);
      else
        throw std::invalid_argument("unknown option " + flag);
    }
    if (opt.id.empty() || opt.server.empty() || opt.store.empty() || opt.events.empty() || opt.keys.empty())
      throw std::invalid_argument("--id, --server, --store, --keys and --events are required");
    if (opt.permits < 2 || opt.permits > 65535)
      throw std::invalid_argument("--permits must be 2 to 65535 (a key of 1 permit is a lock: --keys)");
    if (opt.ttl_ms < 100 || opt.request_timeout_ms < 1)
      throw std::invalid_argument("--ttl-ms must be >= 100");
    if (opt.raise_ttl_ms != 0 && opt.raise_ttl_ms <= opt.ttl_ms)
      throw std::invalid_argument("--raise-ttl-ms must be larger than --ttl-ms");
    if (opt.long_hold_ms != 0 && opt.long_hold_ms <= opt.ttl_ms)
      throw std::invalid_argument("--long-hold-ms must be larger than --ttl-ms");
    auto store_url = boost::urls::parse_absolute_uri(opt.store);
    if (!store_url) throw std::invalid_argument("--store must be http://HOST:PORT");

    event_log log(opt.events, opt.id);
    asio::io_context ioc;
    baton::client_config cfg;
    cfg.server_url = opt.server;
    cfg.identity = opt.id;
    cfg.request_timeout = milliseconds(opt.request_timeout_ms);
    const baton::lease* current = nullptr;
    baton::lease_options lease_opts;
    lease_opts.ttl = milliseconds(opt.ttl_ms);
    cfg.on_event = [&](const baton::lease_event& e) {
      using kind = baton::lease_event::kind;
      if (e.what == kind::renewed) {
        // The server's new expiry is at least (when the renew was sent) + ttl. The lease's local deadline is
        // exactly that instant - safety margin (lease_fsm::on_renew_ok), so this is the renew's send time
        // without any delay between the reply and this callback; the round trip is the fallback.
        std::int64_t sent = now_us() - e.latency.count();
        std::string key(e.key);
        if (current && current->token() == e.token) {
          key = resource_of(*current);
          // The deadline is on lease_clock (CLOCK_BOOTTIME); this log's times are steady_clock's. They differ
          // by the time the host spent suspended, read here as the clocks' offset now.
          auto offset = baton::lease_clock::now().time_since_epoch() -
                        std::chrono::steady_clock::now().time_since_epoch();
          auto since_epoch = current->deadline().time_since_epoch() - offset +
                             lease_opts.effective_safety_margin() - lease_opts.ttl;
          sent = std::chrono::duration_cast<std::chrono::microseconds>(since_epoch).count();
        }
        log.emit("renewed", {{"key", key}, {"token", e.token}, {"sent", sent}});
      } else if (e.what == kind::lost) {
        const bool this_one = current && current->token() == e.token;
        log.emit("lost", {{"key", this_one ? resource_of(*current) : std::string(e.key)},
                          {"token", e.token},
                          {"reason", e.reason}});
      }
    };
    baton::client client(ioc.get_executor(), cfg);
    const auto raw = baton::make_backend(ioc.get_executor(), cfg);
    worker w{opt,
             log,
             client,
             *raw,
             {std::string(store_url->host()), std::string(store_url->port())},
             current,
             std::mt19937_64(opt.seed)};
    asio::signal_set signals(ioc, SIGTERM, SIGINT);
    signals.async_wait([&](const boost::system::error_code& ec, int) {
      if (!ec) w.stopping = true;
    });
    // SIGUSR1 (the runner's stale_write fault): the next write started within 2 s stops the process first.
    asio::signal_set pause_signal(ioc, SIGUSR1);
    std::function<void(const boost::system::error_code&, int)> on_pause =
        [&](const boost::system::error_code& ec, int) {
          if (ec) return;
          w.pause_armed_until = now_us() + 2'000'000;
          pause_signal.async_wait(on_pause);
        };
    pause_signal.async_wait(on_pause);
    log.emit("worker_start",
             {{"pid", static_cast<std::int64_t>(::getpid())}, {"ignore_loss", opt.ignore_loss}});
    asio::co_spawn(ioc, w.run(), [&](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          log.emit("worker_error", {{"error", ex.what()}});
        }
      }
      signals.cancel();
      pause_signal.cancel();
      ioc.stop();
    });
    ioc.run();
    log.emit("worker_stop", {});
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chaos-worker: %s\n", e.what());
    return 2;
  }
}
