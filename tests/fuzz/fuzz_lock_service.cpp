// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the lock service behind batond's handler, over its real write-ahead journal (group
// commit, cuts and background compaction) in a data directory on tmpfs, on a clock the input advances.
//
// The input is a script of at most 64 operations: requests (acquire, renew, release, get) on a few keys,
// owners, clients, tokens and TTLs, so that they collide, written as HTTP and decoded as http_server does
// (a mutated byte or raw bytes make them malformed); clock advances; sweep steps; a disk that stalls (a
// journal whose writer has not started: appended records are not durable and answers that need them wait);
// the disk catching up; and crashes, each followed by recovery from the directory, the stalled records
// lost and sometimes a torn record left at the end of the log.
//
// A model keeps what the answers told clients, in the order the service took them (the log's order). After
// every step it checks docs/design.md's promises against the service:
// - a grant's token is above every token ever acknowledged, and within a lifetime tokens only grow, one per
//   grant; after a restart the counter is at least every acknowledged token, and a torn record's token is
//   not adopted;
// - one holder per key: no answer grants a key to another holder while the acknowledged holder's TTL runs;
// - a lease acknowledged as held (grant or renew answered) is held with its token, at least until the time
//   its holder was told, before and after any restart; a release acknowledged stays released;
// - the service never reports a holder the answers did not make (renew, release, get, a refusal);
// - an answer that needs a record waits for it: a crash may take back only unanswered requests;
// - a malformed request changes nothing.
//
// The input is read with FuzzedDataProvider; tests/fuzz/lock_service_seeds.py writes the seeds from scripts
// in these terms.

#include "fuzz_support.hpp"
#include "journal.hpp"
#include "lock_service.hpp"
#include "protocol.hpp"
#include "wal_record.hpp"

#include "baton/common/log.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace fs = std::filesystem;
using namespace baton::server;
using baton::fuzz::require;

namespace {

// Server time, moved only by the input. The service reads it through its clock seam.
time_point virtual_now;
time_point read_virtual_now() {
  return virtual_now;
}

// One data directory per fuzzing process, on tmpfs where there is one (fsync is then almost free).
const fs::path& data_dir() {
  static const fs::path dir = [] {
    fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    auto d = base / ("baton-fuzz-lock-service-" + std::to_string(::getpid()));
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(data_dir(), ec);
    });
    return d;
  }();
  return dir;
}

// Small sets, so that requests collide. "jobs/nightly" travels percent-encoded in the target.
constexpr std::array<const char*, 3> keys = {"a", "b", "jobs/nightly"};
constexpr std::array<const char*, 3> owners = {"o1", "o2", "o3"};
constexpr std::array<const char*, 2> clients = {"", "team"};
constexpr std::array<std::int64_t, 5> ttls_ms = {100, 250, 1000, 5000, 3'600'000};
constexpr std::array<std::int64_t, 8> advances_ms = {1, 99, 100, 150, 250, 999, 1000, 60'000};
// Small enough that a handful of records cut the log, so compaction and snapshots are part of every run.
constexpr std::uint64_t compact_bytes = 256;

std::string encode_key(std::string_view key) {
  std::string out;
  for (char c : key)
    out += c == '/' ? std::string("%2F") : std::string(1, c);
  return out;
}

enum class op_kind { acquire, renew, release, get };

struct request {
  op_kind kind;
  std::string key;
  std::string owner;
  std::string client;
  std::uint64_t token = 0;
  milliseconds ttl{0};
};

using answer_type =
    std::variant<std::monostate, acquire_result, renew_result, release_result, std::optional<lease_view>>;

// A request handed to the service, and its answer once it has one.
struct in_flight {
  request req;
  time_point issued;  // the service's "now" when it took the request
  bool done = false;
  bool failed = false;  // completed with an exception: the client got no answer
  answer_type answer;
};

// What the answers told: the holder of a key, as its holder believes it.
struct told_lease {
  std::string owner;
  std::string client;
  std::uint64_t token;
  time_point until;  // the holder was told it holds the key until here
};

// One server lifetime: a journal recovered from the directory and the service over it.
struct server {
  server_metrics metrics;
  journal log;
  lock_service service;
  bool disk_running = false;
  recovery_stats recovered;

  explicit server(time_point now)
      : log(journal_options{data_dir(), compact_bytes}, &metrics), service(log, metrics, &read_virtual_now) {
    recovered = log.open(service.table(), now);
  }
};

class harness {
 public:
  explicit harness(FuzzedDataProvider& in) : in_(in) {}

  void run() {
    start_server(in_.ConsumeBool());
    for (int step = 0; step < 64 && in_.remaining_bytes() > 0; ++step) {
      switch (in_.ConsumeIntegralInRange<int>(0, 9)) {
        case 0:
        case 1:
        case 2:
        case 3:
          send(build_request());
          break;
        case 4:
          send(in_.ConsumeRandomLengthString(512));
          break;
        case 5:
          virtual_now += milliseconds(in_.PickValueInArray(advances_ms));
          break;
        case 6:
          srv_->service.sweep_step();
          break;
        case 7:
          disk_catches_up();
          break;
        case 8:
          crash_and_restart();
          break;
        case 9:
          virtual_now += milliseconds(in_.ConsumeIntegralInRange<std::int64_t>(0, 5000));
          break;
      }
      if (flight_.empty()) check_table();
    }
    // End of input: let the disk catch up, then one last restart must restore what was told.
    disk_catches_up();
    crash_and_restart();
    stop_server();
  }

 private:
  // --- building and decoding requests -------------------------------------------------------------------

  std::uint64_t pick_token(const std::string& key) {
    auto told = told_.find(key);
    std::uint64_t current = told != told_.end() && told->second ? told->second->token : 1;
    auto held = srv_->service.table().get(key, virtual_now);
    switch (in_.ConsumeIntegralInRange<int>(0, 5)) {
      case 0:
        return current;
      case 1:
        return held ? held->token : current;
      case 2:
        return current > 1 ? current - 1 : 1;
      case 3:
        return srv_->service.table().last_token() + 1;
      case 4:
        return 1;
      default:
        return static_cast<std::uint64_t>(INT64_MAX);
    }
  }

  // A well-formed request, written as a client would, and sometimes one byte of it changed. Two bytes pick
  // the request (key, owner and client; kind and TTL), so that long scripts stay short inputs.
  std::string build_request() {
    const auto who =
        in_.ConsumeIntegralInRange<std::size_t>(0, keys.size() * owners.size() * clients.size() - 1);
    const std::string key = keys[who % keys.size()];
    const std::string owner = owners[who / keys.size() % owners.size()];
    const std::string client = clients[who / (keys.size() * owners.size())];
    const auto what = in_.ConsumeIntegralInRange<std::size_t>(0, 4 * ttls_ms.size() - 1);
    const auto ttl = ttls_ms[what / 4];
    std::string target = "/v1/locks/" + encode_key(key);
    std::string body;
    std::string method = "POST";
    switch (what % 4) {
      case 0:
        target += "/acquire";
        body = R"({"owner":")" + owner + R"(","ttl_ms":)" + std::to_string(ttl) + "}";
        break;
      case 1:
        target += "/renew";
        body = R"({"owner":")" + owner + R"(","token":)" + std::to_string(pick_token(key)) + R"(,"ttl_ms":)" +
               std::to_string(ttl) + "}";
        break;
      case 2:
        target += "/release";
        body = R"({"owner":")" + owner + R"(","token":)" + std::to_string(pick_token(key)) + "}";
        break;
      default:
        method = "GET";
        break;
    }
    std::string text = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\n";
    // The client is the authenticated name the handler would pass; it rides in a header of the fuzzer's own.
    if (!client.empty()) text += "X-Fuzz-Client: " + client + "\r\n";
    if (method == "POST")
      text += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    text += "\r\n" + body;
    // One request in eight has a byte changed; 0, as at the input's end, changes none.
    if (in_.ConsumeIntegral<std::uint8_t>() >= 224) {
      auto at = in_.ConsumeIntegralInRange<std::size_t>(0, text.size() - 1);
      text[at] = static_cast<char>(in_.ConsumeIntegral<std::uint8_t>());
    }
    return text;
  }

  // What http_server checks and decodes before it calls the service; nullopt for anything it refuses.
  static std::optional<request> decode(std::string_view text) {
    const ttl_bounds bounds;
    const auto message = baton::fuzz::parse_http_request(text);
    if (!message) return std::nullopt;
    const auto& req = *message;
    if (req.count(http::field::origin) != 0) return std::nullopt;
    if (req.count(http::field::host) != 0 && !is_loopback_host(req[http::field::host])) return std::nullopt;
    if (req.method() == http::verb::post && !is_json_content_type(req[http::field::content_type]))
      return std::nullopt;
    auto parsed = parse_target(req.target());
    auto* t = std::get_if<lock_target>(&parsed);
    if (!t || with_method(t->what, req.method_string()) != t->what) return std::nullopt;
    request r;
    r.key = t->key;
    // Any other name (a changed byte) is no client: the counts check_table compares know only these two.
    r.client = req["X-Fuzz-Client"] == "team" ? "team" : "";
    switch (t->what) {
      case lock_target::kind::acquire: {
        auto body = parse_acquire(req.body(), bounds);
        auto* a = std::get_if<acquire_request>(&body);
        if (!a) return std::nullopt;
        r.kind = op_kind::acquire;
        r.owner = a->owner;
        r.ttl = a->ttl;
        return r;
      }
      case lock_target::kind::renew: {
        auto body = parse_renew(req.body(), bounds);
        auto* a = std::get_if<renew_request>(&body);
        if (!a) return std::nullopt;
        r.kind = op_kind::renew;
        r.owner = a->owner;
        r.token = a->token;
        r.ttl = a->ttl;
        return r;
      }
      case lock_target::kind::release: {
        auto body = parse_release(req.body());
        auto* a = std::get_if<release_request>(&body);
        if (!a) return std::nullopt;
        r.kind = op_kind::release;
        r.owner = a->owner;
        r.token = a->token;
        return r;
      }
      case lock_target::kind::get:
        if (t->wait_ms) return std::nullopt;  // long-polls time out on steady_clock, not on this one
        r.kind = op_kind::get;
        return r;
      default:
        return std::nullopt;
    }
  }

  // --- driving the service ------------------------------------------------------------------------------

  struct state_print {
    std::vector<snapshot_entry> leases;
    std::uint64_t last_token;
    std::uint64_t last_appended;
    bool operator==(const state_print& o) const {
      if (last_token != o.last_token || last_appended != o.last_appended || leases.size() != o.leases.size())
        return false;
      for (std::size_t i = 0; i < leases.size(); ++i)
        if (leases[i].key != o.leases[i].key || leases[i].token != o.leases[i].token ||
            leases[i].owner != o.leases[i].owner || leases[i].restore_ttl != o.leases[i].restore_ttl)
          return false;
      return true;
    }
  };
  state_print print() {
    auto& table = srv_->service.table();
    auto leases = table.snapshot();
    std::sort(leases.begin(), leases.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
    return {std::move(leases), table.last_token(), srv_->log.last_appended()};
  }

  void send(std::string_view text) {
    const auto before = print();
    auto r = decode(text);
    if (!r) {
      require(print() == before, "a malformed request changes nothing");
      return;
    }
    auto f = std::make_shared<in_flight>();
    f->req = std::move(*r);
    f->issued = virtual_now;
    auto& s = srv_->service;
    auto done = [f](std::exception_ptr e, auto v) {
      f->done = true;
      if (e)
        f->failed = true;
      else
        f->answer = std::move(v);
    };
    const auto& q = f->req;
    switch (q.kind) {
      case op_kind::acquire:
        asio::co_spawn(ioc_, s.acquire(q.key, q.owner, q.ttl, q.client), done);
        break;
      case op_kind::renew:
        asio::co_spawn(ioc_, s.renew(q.key, q.owner, q.token, q.ttl, q.client), done);
        break;
      case op_kind::release:
        asio::co_spawn(ioc_, s.release(q.key, q.owner, q.token, q.client), done);
        break;
      case op_kind::get:
        asio::co_spawn(ioc_, s.get(q.key), done);
        break;
    }
    ioc_.poll();  // the service takes the request, and answers it if it needs no record written
    const auto after = srv_->service.table().last_token();
    require(after == before.last_token || (q.kind == op_kind::acquire && after == before.last_token + 1),
            "only a grant takes a token, the next one");
    issued_max_token_ = std::max(issued_max_token_, after);
    flight_.push_back(std::move(f));
    if (srv_->disk_running) settle();
  }

  // Waits for every request in flight to be answered (or to fail), then applies the answers in the order the
  // service took them. Only called when they can all complete: the disk runs, or the journal has stopped.
  void settle() {
    for (const auto& f : flight_)
      while (!f->done)
        ioc_.run_one();
    for (const auto& f : flight_) {
      if (f->failed) {
        require(!srv_->disk_running, "a request fails only when its record never reached the disk");
        continue;
      }
      apply(*f);
    }
    flight_.clear();
  }

  // Checks one answer against what earlier answers told, and records what it tells.
  void apply(const in_flight& f) {
    const auto& q = f.req;
    const time_point n = f.issued;
    auto& told = told_[q.key];
    const bool told_running = told && n < told->until;
    auto is_caller = [&](const auto& h) { return h.owner == q.owner && h.client == q.client; };
    switch (q.kind) {
      case op_kind::acquire:
        if (auto* g = std::get_if<acquire_granted>(&std::get<acquire_result>(f.answer))) {
          require(g->token > acked_max_token_, "a grant's token is above every token ever acknowledged");
          require(!told_running || is_caller(*told),
                  "a key is granted to a second holder while the acknowledged holder's TTL runs");
          told = told_lease{q.owner, q.client, g->token, n + q.ttl};
          acked_max_token_ = g->token;
        } else {
          const auto& h = std::get<acquire_refused>(std::get<acquire_result>(f.answer)).holder;
          require(!is_caller(h), "a holder's own acquire is never refused");
          require(told && told->token == h.token && told->owner == h.owner,
                  "a refusal names the holder the answers made");
        }
        break;
      case op_kind::renew:
        if (std::holds_alternative<renew_ok>(std::get<renew_result>(f.answer))) {
          require(told && is_caller(*told) && told->token == q.token,
                  "only the acknowledged holder with its token renews");
          told->until = n + q.ttl;
        } else {
          require(!(told_running && is_caller(*told) && told->token == q.token),
                  "the holder's renew is refused before its acknowledged TTL has passed");
        }
        break;
      case op_kind::release:
        switch (std::get<release_result>(f.answer).outcome) {
          case release_outcome::released:
            require(told && is_caller(*told) && told->token == q.token,
                    "only the acknowledged holder with its token releases");
            told.reset();
            break;
          case release_outcome::already_free:
            require(!told_running, "a lease is reported free before its acknowledged TTL has passed");
            told.reset();
            break;
          case release_outcome::not_owner:
            require(told && !(is_caller(*told) && told->token == q.token),
                    "not_owner is answered only when someone else holds the key");
            break;
        }
        break;
      case op_kind::get: {
        const auto& view = std::get<std::optional<lease_view>>(f.answer);
        if (told_running) require(view && view->token == told->token, "get shows the acknowledged holder");
        if (view) require(told && view->token == told->token, "get shows only a holder the answers made");
        break;
      }
    }
  }

  // The table against what the answers told (nothing in flight).
  void check_table() {
    auto& table = srv_->service.table();
    require(table.size_of("") + table.size_of("team") == table.size(),
            "the per-client counts match the table");
    for (const auto& [key, told] : told_) {
      auto view = table.get(key, virtual_now);
      if (told && virtual_now < told->until)
        require(
            view && view->token == told->token && view->owner == told->owner && view->expires >= told->until,
            "an acknowledged lease is held with its token until the time its holder was told");
      if (view) require(told && view->token == told->token, "the table holds only leases the answers made");
    }
    for (const auto& e : table.snapshot())
      require(told_.count(e.key) != 0, "the table holds only keys requests named");
  }

  // --- lifetimes ----------------------------------------------------------------------------------------

  void start_server(bool disk_running) {
    srv_ = std::make_unique<server>(virtual_now);
    const auto last = srv_->service.table().last_token();
    require(last >= acked_max_token_, "recovery restores a token counter at least every acknowledged token");
    // A cut torn tail raises the counter past any token its bytes could have held (a damaged last batch
    // reads the same, docs/design.md): at most one per 33 bytes cut. Beyond that, no token that was never
    // issued is adopted (the torn record's own, far above, is not).
    const auto torn_grants = (srv_->recovered.torn_bytes + 32) / 33;
    // Raised from the counter as recovered, which may already hold an earlier floor: floors stack.
    floor_max_ = std::max(issued_max_token_, floor_max_) + torn_grants;  // logged: later starts keep it
    require(last <= std::max(issued_max_token_, floor_max_),
            "recovery adopts no token that was never issued");
    if (disk_running) disk_catches_up();
    check_table();
  }

  void stop_server() {
    // A stalled disk never writes what is queued: stop() fails the waiting answers, as a crash would.
    srv_->log.stop();
    const bool was_running = srv_->disk_running;
    srv_->disk_running = false;
    settle();
    if (was_running) require(flight_.empty(), "nothing is in flight on a running disk");
    srv_.reset();
  }

  void disk_catches_up() {
    if (srv_->disk_running) return;
    srv_->disk_running = true;
    srv_->log.start();
    settle();
  }

  void crash_and_restart() {
    const bool torn = in_.ConsumeBool();
    stop_server();
    if (torn) leave_torn_record();
    virtual_now += milliseconds(in_.PickValueInArray(advances_ms));
    start_server(in_.ConsumeBool());
  }

  // A crash in the middle of a write: the first bytes of a grant that was never acknowledged, with a token
  // no grant has taken, at the end of the newest log.
  void leave_torn_record() {
    fs::path newest;
    for (const auto& e : fs::directory_iterator(data_dir())) {
      auto name = e.path().filename().string();
      if (name.starts_with("wal-") && name.ends_with(".log") && (newest.empty() || e.path() > newest))
        newest = e.path();
    }
    if (newest.empty()) return;
    std::string record;
    encode_record(record_type::acquire, issued_max_token_ + 1000, 1000, "a", "torn", record);
    auto keep = in_.ConsumeIntegralInRange<std::size_t>(1, record.size() - 1);
    std::ofstream(newest, std::ios::binary | std::ios::app).write(record.data(), static_cast<long>(keep));
  }

  FuzzedDataProvider& in_;
  asio::io_context ioc_;
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(ioc_);
  std::unique_ptr<server> srv_;
  std::vector<std::shared_ptr<in_flight>> flight_;
  std::map<std::string, std::optional<told_lease>> told_;
  std::uint64_t acked_max_token_ = 0;
  std::uint64_t issued_max_token_ = 0;
  std::uint64_t floor_max_ = 0;  // the highest floor a recovery may have raised the counter to
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  baton::log::set_level(baton::log::level::error);  // torn tails and compactions are expected here
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::error_code ec;
  fs::remove_all(data_dir(), ec);
  virtual_now = time_point{} + std::chrono::hours(1000);
  FuzzedDataProvider in(data, size);
  harness(in).run();
  return 0;
}
