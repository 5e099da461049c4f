// SPDX-License-Identifier: Apache-2.0
#include "simulation.hpp"

#include "data_files.hpp"
#include "history.hpp"
#include "journal.hpp"
#include "lock_service.hpp"
#include "planted_defects.hpp"
#include "scheduler.hpp"
#include "sim_clock.hpp"
#include "sim_storage.hpp"
#include "sim_wait_timer.hpp"
#include "wal_record.hpp"

#include "baton/detail/lease_fsm.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace baton::sim {
namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using server::time_point;

bool parse_bug(const std::string& name, bug& out) {
  static const std::map<std::string, bug> names{
      {"none", bug::none},
      {"skip-fence", bug::skip_fence},
      {"work-after-loss", bug::work_after_loss},
      {"fsync-lies", bug::fsync_lies},
      {"stays-down", bug::stays_down},
      {"zero-margin", bug::zero_margin},
      {"renew-before-durable", bug::renew_before_durable},
      {"release-by-key", bug::release_by_key},
      {"cut-damaged-record", bug::cut_damaged_record},
      {"ignore-batch-frames", bug::ignore_batch_frames},
      {"shorten-lease", bug::shorten_lease},
      {"start-skips-dir-sync", bug::start_skips_dir_sync},
      {"queue-deadline-from-answer", bug::queue_deadline_from_answer},
      {"permit-past-count", bug::permit_past_count}};
  auto it = names.find(name);
  if (it == names.end()) return false;
  out = it->second;
  return true;
}

namespace {

// Virtual time starts well away from the clocks' epochs, where a zero time_point means "unset".
constexpr nanos epoch = std::chrono::seconds(1'000);

// lock_service takes a plain function as its clock: batond's clock in the run in progress (one per thread,
// one thread). It is the machine's clock, so a restarted batond reads the same one.
const scheduler* current = nullptr;
const sim_clock* server_clock = nullptr;
time_point virtual_now() {
  return time_point(epoch + server_clock->local(current->now()));
}

enum class op { acquire, renew, release, wait, queued };
struct request {
  op kind;
  std::uint64_t id;
  std::string key;
  std::string owner;
  std::uint64_t token = 0;
  milliseconds ttl{0};         // a wait's: how long the long-poll may last
  milliseconds wait{0};        // a queued acquire's: how long it may wait in the queue
  std::uint32_t permits = 1;   // an acquire's permit count (1: a lock)
  milliseconds lock_delay{0};  // an acquire's lock-delay (0: none)
};
enum class status { ok, refused, unavailable };
struct reply {
  op kind = op::acquire;
  std::uint64_t id = 0;
  status st = status::unavailable;
  std::uint64_t token = 0;  // granted, the holder of a refused acquire, or the holder a wait saw (0: free)
  std::string text;         // renew refusal reason, release outcome, "permits_mismatch" for an acquire
  milliseconds queued{0};   // a queued acquire's grant: how long it waited at batond (queued_ms)
  std::uint32_t slot = 0;   // a granted permit's slot
};

// One request through batond's real lock service, as http_server would call it (the HTTP layer aside).
asio::awaitable<reply> serve(server::lock_service& s, request r) {
  reply out;
  out.kind = r.kind;
  out.id = r.id;
  try {
    switch (r.kind) {
      case op::acquire: {
        auto res = co_await s.acquire(r.key, r.owner, r.ttl, {}, std::nullopt, {}, r.lock_delay, r.permits);
        if (auto* g = std::get_if<server::acquire_granted>(&res)) {
          out.st = status::ok;
          out.token = g->token;
          out.slot = g->slot;
        } else if (std::holds_alternative<server::acquire_mismatch>(res)) {
          out.st = status::refused;
          out.text = "permits_mismatch";
        } else {
          out.st = status::refused;
          out.token = std::get<server::acquire_refused>(res).holder.token;
        }
        break;
      }
      case op::renew: {
        // Every other renew goes through the batch route (POST /v1/renew), with a second entry for a key
        // nobody holds, which must be refused without touching the first.
        server::renew_result res;
        if (r.id % 2 == 0) {
          res = co_await s.renew(r.key, r.owner, r.token, r.ttl);
        } else {
          std::vector<server::renew_batch_entry> batch{{r.key, r.owner, r.token, r.ttl},
                                                       {"unheld", r.owner, r.token, r.ttl}};
          auto both = co_await s.renew_batch(batch);
          if (!std::holds_alternative<server::renew_refused>(both.at(1)) ||
              std::get<server::renew_refused>(both[1]).reason != server::lost_reason::not_held)
            throw std::logic_error("a batch renewed a key nobody holds");
          res = both.at(0);
        }
        if (auto* no = std::get_if<server::renew_refused>(&res)) {
          out.st = status::refused;
          out.text = server::to_string(no->reason);
        } else {
          out.st = status::ok;
        }
        break;
      }
      case op::release: {
        auto res = co_await s.release(r.key, r.owner, r.token);
        out.st = status::ok;
        out.text = res.outcome == server::release_outcome::released       ? "released"
                   : res.outcome == server::release_outcome::already_free ? "already_free"
                                                                          : "not_owner";
        break;
      }
      case op::wait: {
        auto view = co_await s.wait(r.key, r.token, r.ttl);
        out.st = status::ok;
        out.token = view ? view->token : 0;
        break;
      }
      case op::queued: {
        // POST /v1/locks/{key}/acquire?wait_ms= (feature acquire_queue).
        auto res = co_await s.acquire_queued(r.key, r.owner, r.ttl, r.wait, {}, std::nullopt, {},
                                             r.lock_delay, r.permits);
        if (!res) {
          out.text = "left";  // cancelled: the connection closed; nobody hears this
          break;
        }
        out.queued = res->queued;
        if (auto* g = std::get_if<server::acquire_granted>(&res->result)) {
          out.st = status::ok;
          out.token = g->token;
          out.slot = g->slot;
        } else if (std::holds_alternative<server::acquire_mismatch>(res->result)) {
          out.st = status::refused;
          out.text = "permits_mismatch";
        } else {
          out.st = status::refused;
          out.token = std::get<server::acquire_refused>(res->result).holder.token;
        }
        break;
      }
    }
  } catch (const server::storage_unavailable& e) {
    out.st = status::unavailable;
    out.text = e.what();
  } catch (const server::waiters_exhausted&) {
    out.st = status::unavailable;  // 503 too_many_waiters
    out.text = "too_many_waiters";
  }
  co_return out;
}

// A batond process: its coroutines' context, the journal over the simulated disk, the real service.
struct server_process {
  process_context ctx;
  server::server_metrics metrics;
  server::journal journal;
  server::lock_service service;
  server_process(scheduler& s, server::journal_options o, server::lock_service::wait_timer_factory timers)
      : ctx(s), journal(o, &metrics), service(journal, metrics, &virtual_now, std::move(timers)) {}
  // Long-polls in progress, each cancellable as http_server cancels one whose connection closed. Declared
  // last, so destroyed first: after a crash has destroyed the waiting coroutines, before their context.
  struct open_wait {
    const void* client = nullptr;
    std::uint64_t client_inc = 0;
    asio::cancellation_signal cancel;
  };
  std::map<std::uint64_t, open_wait> open_waits;
};

// The SDK's timing for the simulated leases (short, so a run sees many lease lifetimes).
const milliseconds lease_ttl{2'000};
const milliseconds request_timeout{250};
const retry_policy retry{milliseconds(20), milliseconds(500), 0.5, 4};
// A client refused a held key long-polls for its change this long (the SDK's wait_ms), then asks again.
const milliseconds long_poll{1'000};

struct client {
  std::string name;
  std::uint64_t inc = 0;  // incarnation: a crash invalidates everything scheduled before it
  bool down = false;
  nanos paused_until{0};
  nanos cut_until{0};  // partitioned from the server until then
  enum class phase { idle, acquiring, holding, releasing } ph = phase::idle;
  std::string key, owner;
  // A key of permits: its count (1: a lock), and the resource a grant fences, key#slot (the key for a lock):
  // the history names a permit by it, so the checker sees each slot as a lock of its own.
  std::uint32_t permits = 1;
  milliseconds lock_delay{0};  // --changing-counts: the acquisition's lock-delay
  std::string res;
  std::uint64_t token = 0;
  milliseconds renew_ttl{0};  // some holders raise their lease's TTL with their renews (an extend record)
  milliseconds renew_sent_ttl{0};  // the TTL of the renew in flight
  std::uint64_t counter = 0;
  int attempt = 0;
  int writes_left = 0;
  bool lost = false;
  std::optional<detail::lease_fsm> fsm;
  std::uint64_t fsm_gen = 0;
  std::uint64_t req_id = 0;  // the acquire or release in flight
  nanos req_sent{0};
  std::uint64_t renew_id = 0;
  nanos renew_sent{0};
  detail::jitter_rng jitter{0};
  sim_clock clock;      // its lease_fsm's clock (lease_clock), and its timers'
  bool queues = false;  // waits for a held key with the queued acquire, as the SDK does against batond
};

class world {
 public:
  explicit world(const options& o)
      : o_(o), rng_(o.seed), fs_(rng_, "sim-data"), quiet_at_(o.duration - o.quiet_period) {
    current = &s_;
    // batond's clock reads 0 at true time 0: the history is stamped with it (see stamp()).
    server_clock_ = sim_clock(sim_clock::drawn(rng_, o.drift).rate(), nanos(0));
    server_clock = &server_clock_;
    fs_.lie_on_sync(o.bug_switch == bug::fsync_lies);
    fs_.skip_start_dir_sync(o.bug_switch == bug::start_skips_dir_sync);
    // Small logs, so that a run cuts and compacts many times (batond's smallest --compact-bytes is 4 KiB;
    // the journal itself takes any size): 256 bytes to 4 KiB, a cut every 4-60 records.
    compact_bytes_ = 256 * (1 + rng_.below(16));
    for (int i = 0; i < o.keys; ++i)
      keys_.push_back("k" + std::to_string(i));
    // Drawn only when asked for, so a run without them draws exactly as before.
    for (int i = 0; i < o.semaphore_keys; ++i) {
      keys_.push_back("s" + std::to_string(i));
      permits_[keys_.back()] = static_cast<std::uint32_t>(2 + rng_.below(3));
    }
    clients_.resize(static_cast<std::size_t>(o.clients));
    for (int i = 0; i < o.clients; ++i) {
      auto& c = clients_[static_cast<std::size_t>(i)];
      c.name = "c" + std::to_string(i);
      c.jitter = detail::jitter_rng(rng_.next());
      c.clock = sim_clock::drawn(rng_, o.drift);
      c.queues = rng_.chance(0.5);
    }
  }

  ~world() {
    if (server_) crash_server_now();
    current = nullptr;
    server_clock = nullptr;
  }

  run_result run() {
    start_server();
    for (auto& c : clients_)
      client_after(c, rng_.between(nanos(0), milliseconds(100)), [this](client& c) { start_acquire(c); });
    s_.after(milliseconds(500), [this] { sweep(); });
    if (o_.faults) schedule_fault();
    s_.at(quiet_at_, [this] { heal(); });
    while (s_.step(end()))
      ++result_.steps;
    check();
    return std::move(result_);
  }

 private:
  // ---- history ---------------------------------------------------------------------------------------
  void emit(const std::string& src, std::string_view ev, json::object fields = {}) {
    json::object o;
    o["t"] = stamp(s_.now());
    o["src"] = src;
    o["ev"] = ev;
    for (auto& [k, v] : fields)
      o[k] = v;
    result_.history.push_back(json::serialize(o));
  }
  void fault(std::string_view kind, json::object fields = {}) {
    fields["kind"] = kind;
    emit("runner", "fault", std::move(fields));
    ++result_.faults;
  }
  bool faulty() const { return o_.faults && s_.now() < quiet_at_; }
  nanos end() const {
    return o_.stop.count() > 0 ? std::min<nanos>(o_.stop, o_.duration) : nanos(o_.duration);
  }
  // Each fault drawn has an ordinal; a shortened run leaves out those it names.
  bool fault_allowed() { return !o_.skip_faults.contains(result_.fault_points++); }
  // The history's times are batond's clock readings, in microseconds: the checker's bounds (a lease lasts at
  // least from its request's sending to that plus its TTL) are batond's, and the map from true time is
  // increasing, so every order in the history is the true one.
  std::int64_t stamp(nanos t) const { return server_clock_.local(t).count() / 1000; }
  static std::int64_t us(nanos t) { return t.count() / 1000; }

  // A client's lease_clock at true time `t`, and the true time its clock reads `at`.
  static detail::clock::time_point local_time(const client& c, nanos t) {
    return detail::clock::time_point(
        std::chrono::duration_cast<detail::clock::duration>(epoch + c.clock.local(t)));
  }
  static nanos true_time(const client& c, detail::clock::time_point at) {
    return c.clock.true_at(std::chrono::duration_cast<nanos>(at.time_since_epoch()) - epoch);
  }

  // ---- server ----------------------------------------------------------------------------------------
  std::unique_ptr<server_process> new_process() {
    // Long-poll waiters sleep on the virtual clock, read as batond reads it.
    auto timers =
        [this](const asio::any_io_executor& ex) -> std::unique_ptr<server::lock_service::wait_timer> {
      return std::make_unique<sim_wait_timer>(
          ex, s_, [this](time_point at) { return server_clock_.true_at(at.time_since_epoch() - epoch); },
          server_paused_until_, wait_timers_);
    };
    // The planted defects of batond's code, in the simulation's build of it (planted_defects.hpp).
    auto& d = server::planted;
    d.renew_before_durable = o_.bug_switch == bug::renew_before_durable;
    d.release_by_key = o_.bug_switch == bug::release_by_key;
    d.cut_at_damaged_record = o_.bug_switch == bug::cut_damaged_record;
    d.ignore_batch_frames = o_.bug_switch == bug::ignore_batch_frames;
    d.shorten_lease = o_.bug_switch == bug::shorten_lease;
    d.permit_past_count = o_.bug_switch == bug::permit_past_count;
    auto p = std::make_unique<server_process>(s_, server::journal_options{fs_.path(), compact_bytes_, &fs_},
                                              std::move(timers));
    // Every other seed runs batond with waiter limits small enough to be reached (503 too_many_waiters).
    if (o_.seed % 2 == 0) p->service.set_waiter_limits(2, 3);
    return p;
  }

  // A damaged sector in the middle of the stopped server's last log, as the chaos run's `bitflip`: one bit of
  // a batch (or bare record) followed by another. batond must refuse to start and leave the file as it was;
  // the bit is then flipped back. False when the log has fewer than two.
  bool start_on_flipped_bit() {
    std::string last;
    for (const auto& name : fs_.names())
      if (name.rfind("wal-", 0) == 0) last = name;  // names() is sorted: the newest log is the last
    const std::string log = fs_.contents(last);
    std::vector<std::size_t> starts;
    for (std::size_t at = 0, used = 0; at < log.size();) {
      auto r = server::decode_record(log.substr(at), used);
      if (!r) break;
      if (r->type == server::record_type::batch) used += r->token;  // the batch's records
      if (used > log.size() - at) break;
      starts.push_back(at);
      at += used;
    }
    // Damage is found by a whole batch after it that is not a guard batch (data_files::next_acknowledged): a
    // guard proves nothing about the batch before it (wal_record.hpp), so damage followed by guards alone
    // reads as a torn tail, rightly cut. Only a batch with another kind after it is flipped. (Without records
    // or lock-delays there are no guards, and the draw is the one it always was.)
    const std::string guard = server::data_files::guard_batch();
    std::size_t last_plain = 0;  // 1 + the index of the last unit that is not a guard batch
    for (std::size_t j = 0; j < starts.size(); ++j)
      if (log.compare(starts[j], guard.size(), guard) != 0) last_plain = j + 1;
    if (last_plain < 2) return false;
    const auto i = rng_.below(last_plain - 1);
    const auto from = starts[i] + server::record_header_size;
    std::string damaged = log;
    damaged[from + rng_.below(starts[i + 1] - from)] ^= static_cast<char>(1u << rng_.below(8));
    fault("bitflip", {{"record", i}});
    fs_.overwrite(last, damaged);
    auto p = new_process();
    try {
      p->journal.open(p->service.table(), virtual_now());
      result_.violations.push_back(
          "VIOLATION damaged_log_accepted: batond started on a log with a flipped bit\n");
    } catch (const server::journal_damaged& e) {
      // The offset, not the message: the message names the directory, which differs from run to run.
      emit("runner", "server_refused_start", {{"damaged_at", e.offset}});
    }
    p->ctx.kill();
    p->journal.stop();
    p.reset();
    fs_.kill();
    if (fs_.contents(last) != damaged)
      result_.violations.push_back("VIOLATION damaged_log_accepted: batond changed the damaged log\n");
    fs_.overwrite(last, log);
    return true;
  }

  void start_server() {
    if (flip_next_start_) {
      flip_next_start_ = false;
      start_on_flipped_bit();
    }
    auto p = new_process();
    fs_.start_begins();
    try {
      // batond's own recovery: torn tail cut, every record replayed, the token counter restored.
      p->journal.open(p->service.table(), virtual_now());
    } catch (const std::exception& e) {
      fs_.kill();
      result_.violations.push_back("VIOLATION recovery_refused: " + std::string(e.what()) + "\n");
      emit("runner", "server_refused_start");
      return;
    }
    fs_.start_ends();
    p->ctx.after_each([this] { schedule_flush(); });
    server_ = std::move(p);
    ++server_inc_;
    emit("runner", "server_start", {{"leases", server_->service.table().size()}});
  }

  void crash_server_now() {
    auto p = std::move(server_);
    // Nothing the process had queued runs, and the journal's waiters and the long-polls die with it.
    p->ctx.kill();
    p->journal.stop();
    p->ctx.kill();
    std::vector<task> parked;
    for (auto* t : wait_timers_)
      if (auto h = t->take_pending()) parked.push_back(std::move(h));
    parked.clear();
    p->ctx.kill();
    p.reset();
    flush_pending_ = false;
    compaction_pending_ = false;
  }

  // How batond goes down: its process alone (kill -9, or its own exit when its journal fails; the page
  // cache stays), or the machine's power (what was not synced is lost, all of it or only some).
  enum class down { process, power_lost_all, power_keep_some };

  void crash_server(std::string_view cause, down how) {
    if (!server_) return;
    emit("runner", "server_kill", {{"cause", cause}});
    crash_server_now();
    if (how == down::process)
      fs_.kill();
    else
      fs_.power_cut(how == down::power_keep_some);
    restart_later();
  }

  void restart_later() {
    s_.after(rng_.between(milliseconds(20), milliseconds(800)), [this] {
      if (!server_ && !(o_.bug_switch == bug::stays_down && !faulty())) start_server();
    });
  }

  bool server_paused() const { return s_.now() < server_paused_until_; }

  // A crashed client's connections close, and batond cancels its long-polls (terminal cancellation of the
  // waiting coroutine, as http_server does when the peer goes away); a paused batond notices when it runs.
  void close_connections(const client& c) {
    if (!server_) return;
    if (server_paused()) {
      s_.at(server_paused_until_, [this, &c, inc = server_inc_] {
        if (server_inc_ == inc) close_connections(c);
      });
      return;
    }
    std::vector<std::uint64_t> ids;
    for (auto& [id, w] : server_->open_waits)
      if (w.client == &c && w.client_inc < c.inc) ids.push_back(id);
    for (auto id : ids)
      if (auto it = server_->open_waits.find(id); it != server_->open_waits.end())
        it->second.cancel.emit(asio::cancellation_type::terminal);
  }

  void schedule_flush() {
    if (!server_ || flush_pending_ || server_->journal.last_appended() <= server_->journal.durable()) return;
    flush_pending_ = true;
    nanos delay = faulty() && rng_.chance(0.03)
                      ? rng_.between(milliseconds(30), milliseconds(400))
                      : rng_.between(std::chrono::microseconds(50), milliseconds(3));
    s_.after(delay, [this, inc = server_inc_] { flush(inc); });
  }

  void flush(std::uint64_t inc) {
    if (!server_ || inc != server_inc_) return;
    if (server_paused()) {
      s_.at(server_paused_until_, [this, inc] { flush(inc); });
      return;
    }
    flush_pending_ = false;
    if (faulty()) {
      const auto draw = rng_.below(100);
      if (draw < 5 && fault_allowed()) {
        switch (draw) {
          case 0:
            fault("disk_eio");
            fs_.fail_next_sync(EIO);
            break;
          case 1:
            fault("disk_full");
            fs_.fail_next_write(ENOSPC);
            break;
          case 2:
            // The process dies inside the batch's write: a prefix of it stays in the page cache.
            fault("kill_server_in_write");
            fs_.die_at_call(1);
            break;
          case 3:
            // The power goes between the batch's write and its fdatasync: the disk keeps any part of it.
            fault("power_cut_in_write");
            fs_.die_at_call(2);
            failure_ = down::power_keep_some;
            break;
          default:
            // The next directory fsync fails: a cut's (its new log's name) or a compaction's (the
            // snapshot's).
            fault("dir_fsync_eio");
            fs_.fail_next_dir_sync(EIO);
            break;
        }
      }
    }
    if (!server_->journal.flush()) return storage_failed();
    schedule_flush();
    schedule_compaction();
  }

  // batond stops when its journal fails (fail-stop); the disk keeps what the failure left.
  void storage_failed() {
    const bool power = failure_ != down::process;
    crash_server(power ? "power_cut" : "storage_failure", std::exchange(failure_, down::process));
  }

  // A cut's compaction runs on batond's compactor thread while group commit goes on: here, a little later.
  void schedule_compaction() {
    if (!server_ || compaction_pending_ || !server_->journal.compaction_due()) return;
    compaction_pending_ = true;
    ++result_.cuts;
    s_.after(rng_.between(milliseconds(1), milliseconds(300)), [this, inc = server_inc_] { compact(inc); });
  }

  void compact(std::uint64_t inc) {
    if (!server_ || inc != server_inc_) return;
    if (server_paused()) {
      s_.at(server_paused_until_, [this, inc] { compact(inc); });
      return;
    }
    compaction_pending_ = false;
    if (faulty() && rng_.chance(0.05) && fault_allowed()) {
      // Killed, or the power lost, somewhere inside the compaction: writing the snapshot, syncing it,
      // renaming it into place, syncing the directory, removing the logs it covers.
      const auto at = 1 + rng_.below(8);
      failure_ = rng_.chance(0.5) ? down::process : down::power_keep_some;
      fault("crash_in_compaction", {{"call", at}, {"power", failure_ != down::process}});
      fs_.die_at_call(at);
    }
    if (!server_->journal.compact_now()) return storage_failed();
    ++result_.compactions;
    fs_.die_at_call(0);  // a crash armed past the compaction's last call does not happen
    failure_ = down::process;
  }

  void sweep() {
    if (server_ && !server_paused()) {
      server_->service.sweep_step();
      schedule_flush();
    }
    s_.after(milliseconds(500), [this] { sweep(); });
  }

  void deliver_to_server(client& c, std::uint64_t cinc, request r) {
    if (!server_) return;  // connection refused: the client's timeout answers
    if (server_paused()) {
      s_.at(server_paused_until_,
            [this, &c, cinc, r = std::move(r)]() mutable { deliver_to_server(c, cinc, std::move(r)); });
      return;
    }
    const bool wait = r.kind == op::wait || r.kind == op::queued;  // both wait, and close with the client
    auto done = [this, &c, cinc, wait, r, arrived = virtual_now()](std::exception_ptr e, reply rep) {
      if (e) std::rethrow_exception(e);  // a defect of the simulation or the service
      if (wait && cinc != c.inc) {       // cancelled: the client's connection closed when it crashed
        ++result_.waits_cancelled;
        return;
      }
      if (wait && rep.st == status::unavailable && rep.text == "too_many_waiters") ++result_.waits_refused;
      if (r.kind == op::wait && rep.st == status::ok) check_long_poll(r, rep, arrived);
      send(c, [this, &c, cinc, rep = std::move(rep)] { on_reply(c, cinc, rep); });
    };
    if (!wait) return asio::co_spawn(executor(server_->ctx), serve(server_->service, r), std::move(done));
    const auto id = ++next_wait_;
    auto& w = server_->open_waits[id];
    w.client = &c;
    w.client_inc = cinc;
    asio::co_spawn(
        executor(server_->ctx), serve(server_->service, r),
        asio::bind_cancellation_slot(w.cancel.slot(), [this, id, inc = server_inc_, done = std::move(done)](
                                                          std::exception_ptr e, reply rep) mutable {
          // Forgotten once the coroutine has let go of its slot.
          s_.after(nanos(0), [this, id, inc] {
            if (server_ && server_inc_ == inc) server_->open_waits.erase(id);
          });
          done(std::move(e), std::move(rep));
        }));
  }

  // A long-poll answers before its time only with a change: a holder other than the one it waited on.
  void check_long_poll(const request& r, const reply& rep, time_point arrived) {
    ++result_.waits;
    if (rep.token != r.token) ++result_.waits_woken;
    if (rep.token != r.token || virtual_now() >= arrived + r.ttl) return;
    result_.violations.push_back(
        "VIOLATION long_poll_woke_early: a wait on " + r.key + "/" + std::to_string(r.token) +
        " answered at t=" + std::to_string(stamp(s_.now())) + " us with the same holder, before its " +
        std::to_string(r.ttl.count()) + " ms\n");
  }

  // ---- network ---------------------------------------------------------------------------------------
  // Client <-> server messages: delayed, sometimes much later (reordered), dropped, duplicated, and cut by
  // partitions. A duplicate may come up to 1.5 s after the original, as from a retrying proxy: later than the
  // next renew (docs/design.md, "No request shortens a lease").
  template <class F>
  void send(client& c, F deliver) {
    if (c.cut_until > s_.now()) return;
    if (faulty() && rng_.chance(0.01)) return;
    int copies = faulty() && rng_.chance(0.01) ? 2 : 1;
    for (int i = 0; i < copies; ++i) {
      const bool late = faulty() && rng_.chance(0.03);
      nanos delay = i == 1 ? rng_.between(milliseconds(late ? 300 : 5), milliseconds(late ? 1500 : 300))
                    : late ? rng_.between(milliseconds(5), milliseconds(300))
                           : rng_.between(std::chrono::microseconds(100), milliseconds(3));
      s_.after(delay, deliver);
    }
  }

  void send_request(client& c, request r) {
    send(c, [this, &c, cinc = c.inc, r = std::move(r)] { deliver_to_server(c, cinc, r); });
  }

  // ---- clients ---------------------------------------------------------------------------------------
  // A client's events run only in its current incarnation, and wait while it is paused (a GC pause).
  template <class F>
  void client_at(client& c, nanos when, F f) {
    s_.at(when, [this, &c, inc = c.inc, f = std::move(f)]() mutable { client_run(c, inc, std::move(f)); });
  }
  // `delay` is counted on the client's clock.
  template <class F>
  void client_after(client& c, nanos delay, F f) {
    client_at(c, c.clock.true_at(c.clock.local(s_.now()) + delay), std::move(f));
  }
  template <class F>
  void client_run(client& c, std::uint64_t inc, F f) {
    if (c.down || c.inc != inc) return;
    if (c.paused_until > s_.now()) {
      s_.at(c.paused_until,
            [this, &c, inc, f = std::move(f)]() mutable { client_run(c, inc, std::move(f)); });
      return;
    }
    f(c);
  }

  void start_acquire(client& c) {
    c.ph = client::phase::acquiring;
    c.key = keys_[rng_.below(keys_.size())];
    c.permits = permits_.contains(c.key) ? permits_[c.key] : 1;
    draw_count(c);
    c.res = c.key;
    c.owner = c.name + "-" + std::to_string(c.inc) + "-" + std::to_string(++c.counter);
    c.attempt = 0;
    send_acquire(c);
  }

  // --changing-counts: an acquisition of a key of permits draws its count and its lock-delay.
  void draw_count(client& c) {
    if (!o_.changing_counts || !permits_.contains(c.key)) return;
    c.permits = static_cast<std::uint32_t>(2 + rng_.below(4));
    c.lock_delay =
        rng_.chance(0.5) ? milliseconds(50 + 50 * static_cast<int>(rng_.below(6))) : milliseconds(0);
  }

  void send_acquire(client& c) {
    emit(c.name, "acquire_req", {{"key", c.key}});
    ++result_.ops;
    c.req_id = ++next_id_;
    c.req_sent = s_.now();
    send_request(c, request{op::acquire, c.req_id, c.key, c.owner, 0, lease_ttl, milliseconds(0), c.permits,
                            c.lock_delay});
    client_after(c, request_timeout, [id = c.req_id, this](client& c) {
      if (c.req_id != id || c.ph != client::phase::acquiring) return;
      emit(c.name, "acquire_failed", {{"key", c.key}, {"sent", stamp(c.req_sent)}, {"error", "timeout"}});
      retry_acquire(c);
    });
  }

  void retry_acquire(client& c) {
    c.req_id = 0;
    // The SDK's backoff between tries (sdk/src/lease_fsm.cpp): the same rule, the same code.
    client_after(c, detail::backoff(retry, ++c.attempt, c.jitter), [this](client& c) { send_acquire(c); });
  }

  void on_reply(client& c, std::uint64_t cinc, const reply& r) {
    client_run(c, cinc, [this, r](client& c) {
      if (r.id == c.req_id && c.ph == client::phase::acquiring)
        return r.kind == op::wait ? on_wait_reply(c, r) : on_acquire_reply(c, r);
      if (r.id == c.renew_id && c.ph == client::phase::holding && !c.lost) return on_renew_reply(c, r);
      if (r.id == c.req_id && c.ph == client::phase::releasing) {
        c.req_id = 0;
        if (r.st == status::ok)
          emit(c.name, "released", {{"key", c.res}, {"token", c.token}, {"outcome", r.text}});
        else
          emit(c.name, "release_failed", {{"key", c.res}, {"token", c.token}, {"error", r.text}});
        go_idle(c);
      }
      // Anything else is a late or duplicated answer the SDK no longer waits for.
    });
  }

  void on_acquire_reply(client& c, const reply& r) {
    if (r.st == status::ok) {
      c.req_id = 0;
      json::object granted{
          {"key", c.key}, {"token", r.token}, {"sent", stamp(c.req_sent)}, {"ttl_ms", lease_ttl.count()}};
      if (c.permits > 1) {
        c.res = c.key + "#" + std::to_string(r.slot);
        granted["key"] = c.res;
        granted["base"] = c.key;
        granted["permits"] = c.permits;
        granted["slot"] = r.slot;
      }
      emit(c.name, "acquire_granted", std::move(granted));
      c.token = r.token;
      c.renew_ttl = rng_.chance(0.3) ? 2 * lease_ttl : lease_ttl;
      c.lost = false;
      lease_options lo;
      lo.ttl = lease_ttl;
      lo.safety_margin = o_.margin;
      auto timing = detail::lease_fsm::timing::from(lo, retry);
      if (o_.bug_switch == bug::zero_margin) timing.safety_margin = milliseconds(0);
      // A queued grant's TTL ran from the grant: counted, as the SDK counts it (sdk/src/client.cpp), from the
      // send time plus the server's queued_ms less 2% for clock rate.
      auto start = local_time(c, c.req_sent) + (r.queued - r.queued / 50);
      // The tempting mistake: the grant is recent, so count from when its answer came (a late answer then
      // leaves the client a deadline past batond's expiry).
      if (o_.bug_switch == bug::queue_deadline_from_answer && r.queued.count() > 0)
        start = local_time(c, s_.now());
      c.fsm.emplace(timing, start, c.jitter());
      check_deadline(c);
      c.ph = client::phase::holding;
      c.writes_left = 2 + static_cast<int>(rng_.below(10));
      schedule_write(c);
      arm_fsm(c);
      return;
    }
    if (r.st == status::refused && r.text == "permits_mismatch") {
      // The key is in use with another count: back off and try again with a count drawn anew.
      emit(c.name, "acquire_refused",
           {{"key", c.key}, {"sent", stamp(c.req_sent)}, {"holder_token", 0}, {"error", r.text}});
      draw_count(c);
      return retry_acquire(c);
    }
    if (r.st == status::refused) {
      emit(c.name, "acquire_refused",
           {{"key", c.key}, {"sent", stamp(c.req_sent)}, {"holder_token", r.token}});
      return c.queues ? send_queued(c) : send_wait(c, r.token);
    }
    emit(c.name, "acquire_failed", {{"key", c.key}, {"sent", stamp(c.req_sent)}, {"error", r.text}});
    retry_acquire(c);
  }

  // A held key, for a client that queues: one queued acquire, answered with the grant in its turn or, when
  // its wait passes, with the holder (then it queues again). No answer: retried as a failed acquire.
  void send_queued(client& c) {
    emit(c.name, "acquire_req", {{"key", c.key}, {"queued", "true"}});
    ++result_.ops;
    c.req_id = ++next_id_;
    c.req_sent = s_.now();
    send_request(
        c, request{op::queued, c.req_id, c.key, c.owner, 0, lease_ttl, long_poll, c.permits, c.lock_delay});
    client_after(c, long_poll + request_timeout, [id = c.req_id, this](client& c) {
      if (c.req_id != id || c.ph != client::phase::acquiring) return;
      emit(c.name, "acquire_failed", {{"key", c.key}, {"sent", stamp(c.req_sent)}, {"error", "timeout"}});
      retry_acquire(c);
    });
  }

  // A held key: wait for its holder to change (the long-poll, lock_service::wait, as http_server calls it),
  // then ask again at once. A wait that gets no answer is retried as a failed acquire.
  void send_wait(client& c, std::uint64_t holder) {
    emit(c.name, "wait_req", {{"key", c.key}, {"holder_token", holder}});
    ++result_.ops;
    c.req_id = ++next_id_;
    c.req_sent = s_.now();
    send_request(c, request{op::wait, c.req_id, c.key, c.owner, holder, long_poll});
    client_after(c, long_poll + request_timeout, [id = c.req_id, this](client& c) {
      if (c.req_id != id || c.ph != client::phase::acquiring) return;
      emit(c.name, "wait_failed", {{"key", c.key}, {"sent", stamp(c.req_sent)}, {"error", "timeout"}});
      retry_acquire(c);
    });
  }

  void on_wait_reply(client& c, const reply& r) {
    if (r.st != status::ok) {
      emit(c.name, "wait_failed", {{"key", c.key}, {"sent", stamp(c.req_sent)}, {"error", r.text}});
      return retry_acquire(c);
    }
    emit(c.name, "wait_answered", {{"key", c.key}, {"holder_token", r.token}});
    c.attempt = 0;
    send_acquire(c);
  }

  void schedule_write(client& c) {
    client_after(c, rng_.between(milliseconds(10), milliseconds(300)), [this](client& c) { write(c); });
  }

  // One chunk of work on the fenced resource. Like lease::active(), the SDK's deadline is looked at first.
  void write(client& c) {
    if (c.ph != client::phase::holding) return;
    if (!c.lost && c.fsm->poll(local_time(c, s_.now())) == detail::lease_fsm::action::declare_lost) lose(c);
    if (c.lost && o_.bug_switch != bug::work_after_loss) return;
    if (c.ph != client::phase::holding) return;
    emit(c.name, "write_start", {{"key", c.res}, {"token", c.token}});
    ++result_.ops;
    // A permit's resource is fenced per slot (docs/fencing.md).
    send(c, [this, key = c.res, token = c.token] { store_write(key, token); });
    if (--c.writes_left > 0) return schedule_write(c);
    if (c.lost) return go_idle(c);
    release(c);
  }

  void arm_fsm(client& c) {
    if (c.ph != client::phase::holding || c.lost) return;
    // While a renew is in flight its timeout acts; the deadline still does.
    auto at = c.renew_id != 0 ? c.fsm->deadline() : c.fsm->wake_at();
    client_at(c, true_time(c, at), [this, gen = ++c.fsm_gen](client& c) {
      if (gen != c.fsm_gen || c.ph != client::phase::holding || c.lost) return;
      switch (c.fsm->poll(local_time(c, s_.now()))) {
        case detail::lease_fsm::action::declare_lost:
          return lose(c);
        case detail::lease_fsm::action::renew:
          if (c.renew_id == 0) send_renew(c);
          break;
        case detail::lease_fsm::action::wait:
          break;
      }
      arm_fsm(c);
    });
  }

  void send_renew(client& c) {
    c.renew_id = ++next_id_;
    c.renew_sent = s_.now();
    // A raising holder renews every third time with the grant's TTL: a late copy of such a renew reaching
    // batond after a raised one must not shorten the lease (docs/design.md, "No request shortens a lease").
    // Chosen from the request id, not the random stream, so the rest of a seed's run draws as before.
    c.renew_sent_ttl = c.renew_ttl != lease_ttl && c.renew_id % 3 == 0 ? lease_ttl : c.renew_ttl;
    send_request(c, request{op::renew, c.renew_id, c.key, c.owner, c.token, c.renew_sent_ttl});
    client_after(c, request_timeout, [this, id = c.renew_id](client& c) {
      if (c.renew_id != id || c.ph != client::phase::holding || c.lost) return;
      c.renew_id = 0;
      c.fsm->on_renew_failed(local_time(c, s_.now()));
      if (c.fsm->state() != lease_state::active) return lose(c);
      arm_fsm(c);
    });
  }

  void on_renew_reply(client& c, const reply& r) {
    c.renew_id = 0;
    if (r.st == status::ok) {
      if (c.fsm->on_renew_ok(local_time(c, c.renew_sent), local_time(c, s_.now())) ==
          detail::lease_fsm::renew_outcome::too_late)
        return lose(c);
      check_deadline(c);
      // The SDK keeps its deadline on the TTL it was granted; the server's lease may last longer.
      json::object f{{"key", c.res}, {"token", c.token}, {"sent", stamp(c.renew_sent)}};
      if (c.renew_sent_ttl != lease_ttl) f["ttl_ms"] = c.renew_sent_ttl.count();
      emit(c.name, "renewed", std::move(f));
    } else if (r.st == status::refused) {
      c.fsm->on_renew_refused(r.text);
      return lose(c);
    } else {
      c.fsm->on_renew_failed(local_time(c, s_.now()));
      if (c.fsm->state() != lease_state::active) return lose(c);
    }
    arm_fsm(c);
  }

  void lose(client& c) {
    c.lost = true;
    ++c.fsm_gen;
    emit(c.name, "lost", {{"key", c.res}, {"token", c.token}, {"reason", c.fsm->loss_reason()}});
    if (o_.bug_switch != bug::work_after_loss) go_idle(c);
  }

  void release(client& c) {
    emit(c.name, "release_req", {{"key", c.res}, {"token", c.token}});
    ++result_.ops;
    c.fsm->on_released();
    ++c.fsm_gen;
    c.ph = client::phase::releasing;
    c.req_id = ++next_id_;
    c.req_sent = s_.now();
    send_request(c, request{op::release, c.req_id, c.key, c.owner, c.token, milliseconds(0)});
    client_after(c, request_timeout, [this, id = c.req_id](client& c) {
      if (c.req_id != id || c.ph != client::phase::releasing) return;
      emit(c.name, "release_failed", {{"key", c.res}, {"token", c.token}, {"error", "timeout"}});
      go_idle(c);  // the lease then expires on the server
    });
  }

  void go_idle(client& c) {
    c.ph = client::phase::idle;
    c.req_id = c.renew_id = 0;
    c.lost = false;
    c.fsm.reset();
    ++c.fsm_gen;
    client_after(c, rng_.between(milliseconds(1), milliseconds(200)),
                 [this](client& c) { start_acquire(c); });
  }

  // The rule the safety margin exists for: a holder's local deadline falls before batond's expiry of its
  // lease, whatever the two clocks' rates (within the drift the design assumes). Checked whenever a grant or
  // a renew moves the deadline, against the real lock table, while batond runs (a restarted batond restores
  // each lease with at least its remaining time). The lease may have been replaced by a grant to the same
  // owner (a late acquire of that owner): it is still this holder's.
  void check_deadline(const client& c) {
    if (!server_) return;
    const nanos deadline = true_time(c, c.fsm->deadline());
    if (deadline <= s_.now()) return;  // lost at its next look (a very late answer)
    auto held = server_->service.table().get(c.key, virtual_now());
    // A permit: its own lease among the key's holders.
    if (held && held->permits > 1) {
      auto mine = std::find_if(held->holders.begin(), held->holders.end(),
                               [&](const server::permit_holder& h) { return h.owner == c.owner; });
      if (mine == held->holders.end()) {
        held.reset();
      } else {
        held->owner = mine->owner;
        held->expires = mine->expires;
      }
    }
    const time_point believed(epoch + server_clock_.local(deadline));
    if (held && held->owner == c.owner && held->expires >= believed) return;
    if (!late_holders_.insert(c.token).second) return;  // one report a lease
    std::ostringstream v;
    v << "VIOLATION held_after_expiry: " << c.name << " holds " << c.res << "/" << c.token
      << " until t=" << stamp(deadline) << " us by its lease_fsm (clock rate " << c.clock.rate()
      << ", batond's " << server_clock_.rate() << "), but batond's lease "
      << (held && held->owner == c.owner
              ? "ends at t=" + std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                                                  held->expires.time_since_epoch() - epoch)
                                                  .count())
              : std::string("is already gone"))
      << " (at t=" << stamp(s_.now()) << ")\n";
    result_.violations.push_back(v.str());
  }

  // ---- fenced resources ------------------------------------------------------------------------------
  void store_write(const std::string& key, std::uint64_t token) {
    auto& highest = fence_[key];
    bool accepted = token >= highest || o_.bug_switch == bug::skip_fence;  // docs/fencing.md
    if (accepted) highest = std::max(highest, token);
    emit("store", "store_write", {{"key", key}, {"token", token}, {"accepted", accepted}});
  }

  // ---- faults ----------------------------------------------------------------------------------------
  void schedule_fault() {
    s_.after(rng_.between(milliseconds(100), milliseconds(1'500)), [this] {
      if (!faulty()) return;
      inject_fault();
      schedule_fault();
    });
  }

  void inject_fault() {
    auto& c = clients_[rng_.below(clients_.size())];
    const auto kind = rng_.below(7);
    if (kind < 6 && !fault_allowed()) return;
    switch (kind) {
      case 0: {
        auto d = rng_.between(milliseconds(50), milliseconds(3'000));
        fault("pause_client", {{"client", c.name}, {"ms", d.count() / 1'000'000}});
        c.paused_until = std::max(c.paused_until, s_.now() + d);
        break;
      }
      case 1: {
        fault("crash_client", {{"client", c.name}});
        c.down = true;
        ++c.inc;
        close_connections(c);
        c.ph = client::phase::idle;
        c.fsm.reset();
        c.req_id = c.renew_id = 0;
        s_.after(rng_.between(milliseconds(50), milliseconds(1'000)), [this, &c] {
          c.down = false;
          c.paused_until = nanos(0);
          client_after(c, nanos(0), [this](client& c) { start_acquire(c); });
        });
        break;
      }
      case 2: {
        auto d = rng_.between(milliseconds(50), milliseconds(3'000));
        fault("partition", {{"client", c.name}, {"ms", d.count() / 1'000'000}});
        c.cut_until = std::max(c.cut_until, s_.now() + d);
        break;
      }
      case 3: {
        // kill -9: the page cache, and so every write batond made, outlives it.
        fault("kill_server");
        crash_server("kill", down::process);
        flip_next_start_ = rng_.chance(0.25);
        break;
      }
      case 5: {
        // The machine loses power, running batond or not (a kill -9 followed later by a power cut), and
        // boots again: what was not synced is gone, all of it or only some.
        const bool keep_some = rng_.chance(0.5);
        fault("power_cut", {{"keep_some", keep_some}});
        if (server_) {
          crash_server("power_cut", keep_some ? down::power_keep_some : down::power_lost_all);
        } else {
          fs_.power_cut(keep_some);
        }
        flip_next_start_ = rng_.chance(0.25);
        break;
      }
      case 4: {
        auto d = rng_.between(milliseconds(50), milliseconds(2'000));
        fault("pause_server", {{"ms", d.count() / 1'000'000}});
        server_paused_until_ = std::max(server_paused_until_, s_.now() + d);
        break;
      }
      default:
        break;  // a quiet interval
    }
  }

  void heal() {
    emit("runner", "heal");
    for (auto& c : clients_) {
      c.cut_until = nanos(0);
      c.paused_until = std::min(c.paused_until, s_.now());
    }
    server_paused_until_ = std::min(server_paused_until_, s_.now());
    if (o_.bug_switch == bug::stays_down) return crash_server("kill", down::process);
    if (!server_) start_server();
  }

  // ---- checking --------------------------------------------------------------------------------------
  void check() {
    std::string text;
    for (const auto& line : result_.history)
      text += line + "\n";
    std::istringstream in(text);
    auto events = chaos::parse_events(in, "simulation");
    auto r = chaos::check_history(events);
    for (const auto& v : r.violations)
      result_.violations.push_back(chaos::describe(v, events));
    check_liveness(events);
  }

  // With every fault healed, a key somebody asks for is granted again: an acquire asked for once the
  // healed system settled (a lease's TTL and the longest backoff) is followed by a grant of its key within
  // the longest a holder keeps a key (its writes) plus a TTL for a lease whose holder vanished.
  void check_liveness(const std::vector<chaos::event>& events) {
    if ((!o_.faults && o_.quiet_period.count() == 0) || end() < o_.duration) return;
    const std::int64_t settle = stamp(quiet_at_ + lease_ttl + 2 * retry.max_backoff);
    const std::int64_t window = us(milliseconds(12 * 300) + lease_ttl + 2 * retry.max_backoff);
    const std::int64_t last = stamp(o_.duration);
    std::map<std::string, std::int64_t> first_ask;  // per key: the first request after settling
    for (const auto& e : events)
      if (e.ev == "acquire_req" && e.t >= settle && e.t <= last - window) first_ask.emplace(e.key, e.t);
    for (const auto& [key, asked] : first_ask) {
      bool granted = false;
      for (const auto& e : events)
        if (e.ev == "acquire_granted" && e.t > asked &&
            (e.raw.contains("base") ? std::string_view(e.raw.at("base").as_string()) : e.key) == key)
          granted = true;
      if (!granted)
        result_.violations.push_back("VIOLATION no_progress: " + key +
                                     " was asked for at t=" + std::to_string(asked) +
                                     " us, with every fault healed, and never granted\n");
    }
  }

  const options& o_;
  scheduler s_;
  rng rng_;
  sim_storage fs_;
  sim_clock server_clock_;
  nanos quiet_at_;
  std::uint64_t compact_bytes_ = 0;
  down failure_ = down::process;           // how batond goes down when its journal fails next
  std::set<sim_wait_timer*> wait_timers_;  // before server_: its waiters' timers leave this set
  std::unique_ptr<server_process> server_;
  std::uint64_t server_inc_ = 0;
  bool flush_pending_ = false;
  bool compaction_pending_ = false;
  bool flip_next_start_ = false;
  nanos server_paused_until_{0};
  std::vector<std::string> keys_;
  std::map<std::string, std::uint32_t> permits_;  // the keys of permits, and their counts
  std::vector<client> clients_;
  std::map<std::string, std::uint64_t> fence_;
  std::set<std::uint64_t> late_holders_;  // tokens with a held_after_expiry reported
  std::uint64_t next_id_ = 0;
  std::uint64_t next_wait_ = 0;
  run_result result_;
};

}  // namespace

run_result run(const options& o) {
  world w(o);
  return w.run();
}

}  // namespace baton::sim
