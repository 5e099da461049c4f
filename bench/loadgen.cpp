// SPDX-License-Identifier: Apache-2.0
// baton-loadgen: load generator for batond and, for comparison, etcd's v3 JSON gateway and Redis.
//
// C keep-alive connections each run one request at a time; every operation (acquire, renew, release, cycle)
// is measured on its own for a fixed time after a warm-up, with a per-request latency histogram. By default
// the loop is closed (a connection sends its next request as soon as the answer arrives); with --rate R the
// requests follow a fixed schedule of R per second over all connections and latency is counted from each
// request's intended send time (open_loop.hpp), so a server stall is not hidden. It shares
// a small machine with the server under test, so it is built to be cheap per request: raw Asio sockets on
// one thread by default, requests formatted into reused buffers, responses framed by Content-Length (or
// chunks) without a general HTTP or JSON parser.
//
// Output: one line per operation on stdout,
//   target=batond op=acquire conns=64 ops=... ops_per_s=... p50_ms=... p99_ms=... p999_ms=... errors=0 ...
// (with --rate also rate=, late=, late_wakeups=, max_start_delay_ms= and unsent=)
// and the same as a JSON object per line in --json FILE.
// With --acquire-count N it only fills the server: N acquires of distinct keys over all connections, closed
// loop, no time limit, and exits with the locks held (bench/scale.sh).

#include "http_response.hpp"
#include "latency_histogram.hpp"
#include "open_loop.hpp"
#include "proc_usage.hpp"
#include "target.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/program_options.hpp>

#include <atomic>

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

namespace baton::bench {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using tcp = asio::ip::tcp;
using clock = std::chrono::steady_clock;

struct phase_plan {
  op_kind op;
  clock::time_point measure_from;  // operations started earlier are warm-up: done, not recorded
  clock::time_point stop_at;       // no operation starts at or after this
  clock::time_point give_up;       // connections still busy now are cut off and count a timeout
  bool once = false;               // setup: exactly one operation per connection
  // Open loop (--rate): requests per second over all connections, scheduled from `start`; 0: closed loop.
  double rate = 0;
  clock::time_point start;
  std::size_t conns = 1;
  clock::duration late_after{};
  // Fill (--acquire-count): operations over all connections until `claimed` reaches `count` (0: no fill).
  std::uint64_t count = 0;
  std::atomic<std::uint64_t>* claimed = nullptr;
};

struct phase_stats {
  latency_histogram latency;
  std::uint64_t ops = 0;
  std::uint64_t warmup_ops = 0;
  std::uint64_t exhausted = 0;  // connections that ran out of work (release with no locks left)
  // Open loop only: measured requests sent more than late_after after their intended time, the largest
  // such delay, and requests due before the end of the phase that were never sent.
  std::uint64_t late = 0;
  std::uint64_t late_wakeups = 0;  // of those, sent late because this process's timer woke late
  std::uint64_t max_start_delay_us = 0;
  std::uint64_t unsent = 0;
  std::map<std::string_view, std::uint64_t> errors;
  std::string first_error;
  std::optional<clock::time_point> last_done;

  std::uint64_t error_count() const {
    std::uint64_t n = 0;
    for (const auto& [label, count] : errors)
      n += count;
    return n;
  }

  void merge(const phase_stats& o) {
    latency.merge(o.latency);
    ops += o.ops;
    warmup_ops += o.warmup_ops;
    exhausted += o.exhausted;
    late += o.late;
    late_wakeups += o.late_wakeups;
    max_start_delay_us = std::max(max_start_delay_us, o.max_start_delay_us);
    unsent += o.unsent;
    for (const auto& [label, count] : o.errors)
      errors[label] += count;
    if (first_error.empty()) first_error = o.first_error;
    if (o.last_done && (!last_done || *o.last_done > *last_done)) last_done = o.last_done;
  }
};

// One keep-alive connection driving the target's state machine, one request at a time.
class connection {
 public:
  connection(asio::io_context& ioc, tcp::endpoint endpoint, target& t, std::size_t id)
      : socket_(ioc), timer_(ioc), endpoint_(endpoint), target_(t), in_(16 * 1024) {
    state_.id = id;
    state_.owner = "bench-" + std::to_string(id);
  }

  /// Connects if not connected; returns false (and remembers why) when the server refuses.
  bool ensure_connected() {
    if (socket_.is_open()) return true;
    boost::system::error_code ec;
    socket_.connect(endpoint_, ec);
    if (!ec) socket_.set_option(tcp::no_delay(true), ec);  // requests are single small writes
    if (!ec) socket_.non_blocking(true, ec);
    if (ec) {
      connect_error_ = ec.message();
      socket_.close(ec);
      return false;
    }
    in_len_ = 0;
    return true;
  }
  const std::string& connect_error() const { return connect_error_; }

  /// Runs `plan` until its stop time (or until this connection has nothing left to do), then calls
  /// `finished` on this connection's io_context thread.
  void start(const phase_plan& plan, std::function<void()> finished) {
    plan_ = &plan;
    finished_ = std::move(finished);
    stats_ = {};
    busy_ = true;
    aborted_ = false;
    did_once_ = false;
    state_.cycle_step = 0;
    pacer_.reset();
    if (plan.rate > 0 && !plan.once)
      pacer_.emplace(plan.start, plan.rate, plan.conns, state_.id, plan.late_after);
    if (!ensure_connected()) {
      count_error("connect", connect_error_);
      finish();
      return;
    }
    begin_op();
  }

  /// The phase's deadline passed with a request still in flight: cut it off.
  void abort() {
    if (!busy_) return;
    aborted_ = true;
    timer_.cancel();  // an open-loop connection may be waiting for its next intended time
    boost::system::error_code ignored;
    socket_.close(ignored);  // the pending operation completes with operation_aborted
  }

  const phase_stats& stats() const { return stats_; }

 private:
  void begin_op() {
    auto now = clock::now();
    if (pacer_) return begin_paced_op(now);
    if (plan_->once ? did_once_ : now >= plan_->stop_at) return finish();
    if (plan_->count && plan_->claimed->fetch_add(1, std::memory_order_relaxed) >= plan_->count)
      return finish();
    did_once_ = true;
    op_started_ = now;
    send_next();
  }

  // Open loop: wait for the next intended time if it is ahead, send at once if it has passed.
  void begin_paced_op(clock::time_point now) {
    const auto at = pacer_->send_at(now);
    if (pacer_->next_intended() >= plan_->stop_at) return finish();
    if (at > now) {
      timer_.expires_at(at);
      timer_.async_wait([this](boost::system::error_code ec) {
        if (ec) return finish();  // aborted: nothing was in flight
        send_paced(clock::now(), true);
      });
      return;
    }
    send_paced(now, false);
  }

  // A late request either waited for the previous answer (the server was behind) or, after waiting for
  // its slot, was woken late (the load generator did not get a CPU in time: on a shared machine that is
  // the load generator's own delay, and it is counted apart).
  void send_paced(clock::time_point now, bool woken) {
    const auto sent = pacer_->on_send(now);
    op_started_ = sent.intended;  // coordinated-omission correction: latency counts from here
    if (sent.intended >= plan_->measure_from) {
      if (sent.late) ++stats_.late;
      if (sent.late && woken) ++stats_.late_wakeups;
      stats_.max_start_delay_us = std::max(stats_.max_start_delay_us, latency_micros(sent.intended, now));
    }
    send_next();
  }

  // Sends are plain non-blocking writes: the request is small and the socket's send buffer is empty in a
  // closed loop, so it goes out in one call and no completion has to travel through the scheduler.
  void send_next() {
    if (!target_.next_request(plan_->op, state_, out_)) {
      ++stats_.exhausted;
      return finish();
    }
    out_sent_ = 0;
    write_more();
  }

  void write_more() {
    boost::system::error_code ec;
    while (out_sent_ < out_.size()) {
      out_sent_ += socket_.write_some(asio::buffer(out_.data() + out_sent_, out_.size() - out_sent_), ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) {
        socket_.async_wait(tcp::socket::wait_write, [this](boost::system::error_code ec) {
          if (ec) return io_failed(ec);
          write_more();
        });
        return;
      }
      if (ec) return io_failed(ec);
    }
    wait_readable();
  }

  // Plain async_read_some. Asio first tries a speculative recv, which finds nothing this soon after the
  // request; waiting for readiness instead (async_wait) avoids that recv but makes Asio re-arm epoll with an
  // epoll_ctl per wait, which measured no cheaper.
  void wait_readable() {
    if (in_len_ == in_.size()) in_.resize(in_.size() * 2);
    socket_.async_read_some(asio::buffer(in_.data() + in_len_, in_.size() - in_len_),
                            [this](boost::system::error_code ec, std::size_t n) {
                              if (ec) return io_failed(ec);  // including end of stream
                              in_len_ += n;
                              on_bytes();
                            });
  }

  void on_bytes() {
    http_response res;
    switch (target_.parse_response({in_.data(), in_len_}, chunked_body_, res)) {
      case parse_status::need_more:
        return wait_readable();
      case parse_status::malformed:
        count_error("bad_reply", {in_.data(), std::min<std::size_t>(in_len_, 200)});
        return reconnect_and_continue();
      case parse_status::complete:
        break;
    }
    auto result = target_.on_response(plan_->op, state_, res.status, res.body);
    if (result.what == step_result::kind::failed) count_error(result.error, res.body);
    // In a closed loop nothing follows the response, so this normally empties the buffer; keep any excess
    // anyway, so a misbehaving server shows up as a parse error rather than as silently dropped bytes.
    in_len_ -= res.consumed;
    if (in_len_ > 0) std::memmove(in_.data(), in_.data() + res.consumed, in_len_);
    if (res.close) {
      boost::system::error_code ignored;
      socket_.close(ignored);
      if (!ensure_connected()) {
        count_error("connect", connect_error_);
        return finish();
      }
    }
    switch (result.what) {
      case step_result::kind::more:
        return send_next();
      case step_result::kind::done:
        record_done();
        break;
      case step_result::kind::failed:
        break;
    }
    begin_op();
  }

  void record_done() {
    auto now = clock::now();
    if (op_started_ < plan_->measure_from) {
      ++stats_.warmup_ops;
      return;
    }
    stats_.latency.record(latency_micros(op_started_, now));
    ++stats_.ops;
    stats_.last_done = now;
  }

  void io_failed(boost::system::error_code ec) {
    if (aborted_) {
      count_error("timeout", "no answer before the phase deadline");
      return finish();
    }
    count_error("io", ec.message());
    reconnect_and_continue();
  }

  void reconnect_and_continue() {
    boost::system::error_code ignored;
    socket_.close(ignored);
    state_.cycle_step = 0;
    if (!ensure_connected()) {
      count_error("connect", connect_error_);
      return finish();
    }
    begin_op();
  }

  void count_error(std::string_view label, std::string_view detail) {
    ++stats_.errors[label];
    if (stats_.first_error.empty()) stats_.first_error = std::string(label) + ": " + std::string(detail);
  }

  void finish() {
    if (pacer_) {
      const auto due = pacer_->due_before(plan_->stop_at);
      stats_.unsent = due > pacer_->sent() ? due - pacer_->sent() : 0;
    }
    busy_ = false;
    auto f = std::move(finished_);
    f();
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  tcp::endpoint endpoint_;
  target& target_;
  connection_state state_;
  std::string out_;
  std::size_t out_sent_ = 0;
  std::vector<char> in_;
  std::size_t in_len_ = 0;
  std::string chunked_body_;
  std::string connect_error_;

  const phase_plan* plan_ = nullptr;
  std::function<void()> finished_;
  phase_stats stats_;
  clock::time_point op_started_;  // closed loop: when the request went out; open loop: its intended time
  std::optional<open_loop_schedule> pacer_;
  bool busy_ = false;
  bool aborted_ = false;
  bool did_once_ = false;
};

// One io_context per load generator thread; connections are spread over them round robin.
struct worker {
  asio::io_context ioc{1};  // one thread per context: Asio can skip its internal locking
  std::vector<std::unique_ptr<connection>> connections;

  void run_phase(const phase_plan& plan) {
    ioc.restart();
    asio::steady_timer deadline(ioc);
    std::size_t active = connections.size();
    for (auto& c : connections)
      c->start(plan, [&] {
        if (--active == 0) deadline.cancel();
      });
    if (active == 0) return;
    deadline.expires_at(plan.give_up);
    deadline.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      for (auto& c : connections)
        c->abort();
    });
    ioc.run();
  }
};

struct options {
  std::string target_name;
  std::string url;
  std::size_t conns = 16;
  unsigned threads = 1;
  double seconds = 5;
  double warmup = 1;
  double timeout = 10;
  double rate = 0;
  double late_ms = 1;
  std::uint64_t acquire_count = 0;
  std::vector<op_kind> ops;
  int server_pid = 0;
  std::string json_path;
  target_options target;
};

// "http://HOST:PORT[/]" (or redis://) with an IP address host: the benchmark only ever runs on loopback.
tcp::endpoint parse_url(const std::string& url, std::string& host_header) {
  std::string_view rest = url;
  if (rest.starts_with("http://"))
    rest.remove_prefix(7);
  else if (rest.starts_with("redis://"))
    rest.remove_prefix(8);
  else
    throw std::invalid_argument("--url must start with http:// or redis://, got " + url);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  auto colon = rest.rfind(':');
  if (colon == std::string_view::npos)
    throw std::invalid_argument("--url needs an explicit port, got " + url);
  std::string host(rest.substr(0, colon));
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) throw std::invalid_argument("--url host must be an IP address, got " + host);
  unsigned long port = 0;
  try {
    port = std::stoul(std::string(rest.substr(colon + 1)));
  } catch (const std::exception&) {
    port = 0;
  }
  if (port == 0 || port > 65535) throw std::invalid_argument("--url port must be 1 to 65535, got " + url);
  host_header = std::string(rest);
  return {address, static_cast<unsigned short>(port)};
}

std::vector<op_kind> parse_ops(const std::string& text) {
  std::vector<op_kind> ops;
  bool acquired = false;
  std::stringstream in(text);
  for (std::string name; std::getline(in, name, ',');) {
    op_kind op;
    if (name == "acquire")
      op = op_kind::acquire;
    else if (name == "renew")
      op = op_kind::renew;
    else if (name == "release")
      op = op_kind::release;
    else if (name == "cycle")
      op = op_kind::cycle;
    else
      throw std::invalid_argument("--ops: unknown operation \"" + name + "\"");
    // renew and release work on the locks an earlier acquire phase left held.
    if ((op == op_kind::renew || op == op_kind::release) && !acquired)
      throw std::invalid_argument("--ops: " + name + " needs an earlier acquire");
    acquired = acquired || op == op_kind::acquire;
    ops.push_back(op);
  }
  if (ops.empty()) throw std::invalid_argument("--ops must name at least one operation");
  return ops;
}

std::string format_ms(double micros) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", micros / 1000);
  return buf;
}

class load_generator {
 public:
  explicit load_generator(options o) : o_(std::move(o)) {
    auto endpoint = parse_url(o_.url, o_.target.host_header);
    if (o_.target_name == "batond")
      target_ = make_batond_target(o_.target);
    else if (o_.target_name == "etcd")
      target_ = make_etcd_target(o_.target);
    else if (o_.target_name == "redis")
      target_ = make_redis_target(o_.target);
    else
      throw std::invalid_argument("--target must be batond, etcd or redis, got " + o_.target_name);
    const unsigned threads = static_cast<unsigned>(std::min<std::size_t>(o_.threads, o_.conns));
    for (unsigned i = 0; i < threads; ++i)
      workers_.push_back(std::make_unique<worker>());
    for (std::size_t i = 0; i < o_.conns; ++i) {
      auto& w = *workers_[i % workers_.size()];
      w.connections.push_back(std::make_unique<connection>(w.ioc, endpoint, *target_, i));
      if (!w.connections.back()->ensure_connected())
        throw std::runtime_error("cannot connect to " + o_.url + ": " +
                                 w.connections.back()->connect_error());
    }
  }

  /// Returns the number of failed requests over all phases.
  std::uint64_t run() {
    // Per-connection setup (etcd: one lease each). Not measured, but it must succeed.
    auto setup = run_phase(op_kind::setup, true);
    if (auto n = setup.stats.error_count())
      throw std::runtime_error("setup failed on " + std::to_string(n) +
                               " connections: " + setup.stats.first_error);

    if (o_.acquire_count)
      return report(op_kind::acquire, run_phase(op_kind::acquire, false, o_.acquire_count));
    std::uint64_t errors = 0;
    for (auto op : o_.ops)
      errors += report(op, run_phase(op, false));
    return errors;
  }

 private:
  struct phase_result {
    phase_stats stats;
    std::optional<double> server_cpu_us;
    double loadgen_cpu_us = 0;
    std::optional<double> machine_busy_us;
    double cpu_window_s = 0;
    clock::time_point measure_from;
  };

  // `count` > 0: a fill, exactly that many operations over all connections, measured from the start and
  // bounded by a day rather than by --seconds.
  phase_result run_phase(op_kind op, bool once, std::uint64_t count = 0) {
    using seconds = std::chrono::duration<double>;
    auto now = clock::now();
    std::atomic<std::uint64_t> claimed{0};
    phase_plan plan;
    plan.op = op;
    plan.once = once;
    plan.count = count;
    plan.claimed = &claimed;
    const bool timed = !once && !count;
    plan.measure_from = now + std::chrono::duration_cast<clock::duration>(seconds(timed ? o_.warmup : 0));
    plan.stop_at =
        plan.measure_from + std::chrono::duration_cast<clock::duration>(seconds(once    ? 0
                                                                                : count ? 86400.0
                                                                                        : o_.seconds));
    plan.give_up = plan.stop_at + std::chrono::duration_cast<clock::duration>(seconds(o_.timeout));
    plan.rate = timed ? o_.rate : 0;
    plan.start = now;
    plan.conns = o_.conns;
    plan.late_after =
        std::chrono::duration_cast<clock::duration>(std::chrono::duration<double, std::milli>(o_.late_ms));

    std::vector<std::thread> threads;
    for (auto& w : workers_)
      threads.emplace_back([&plan, wp = w.get()] { wp->run_phase(plan); });

    // CPU is sampled over the measured window only, so warm-up work is not charged to the measured ops.
    std::this_thread::sleep_until(plan.measure_from);
    auto server_before = o_.server_pid ? process_cpu_micros(o_.server_pid) : std::nullopt;
    double self_before = self_cpu_micros();
    auto machine_before = machine_busy_micros();
    auto cpu_from = clock::now();
    for (auto& t : threads)
      t.join();
    auto server_after = o_.server_pid ? process_cpu_micros(o_.server_pid) : std::nullopt;
    auto machine_after = machine_busy_micros();

    phase_result r;
    r.measure_from = plan.measure_from;
    r.loadgen_cpu_us = self_cpu_micros() - self_before;
    if (server_before && server_after) r.server_cpu_us = *server_after - *server_before;
    if (machine_before && machine_after) r.machine_busy_us = *machine_after - *machine_before;
    r.cpu_window_s = std::chrono::duration<double>(clock::now() - cpu_from).count();
    for (auto& w : workers_)
      for (auto& c : w->connections)
        r.stats.merge(c->stats());
    return r;
  }

  std::uint64_t report(op_kind op, const phase_result& r) {
    const auto& s = r.stats;
    const double seconds =
        s.last_done ? std::chrono::duration<double>(*s.last_done - r.measure_from).count() : 0.0;
    const double ops_per_s = seconds > 0 ? static_cast<double>(s.ops) / seconds : 0.0;
    const std::uint64_t errors = s.error_count();
    auto per_op = [&](double micros) { return s.ops ? micros / static_cast<double>(s.ops) : 0.0; };

    char line[512];
    std::snprintf(line, sizeof line,
                  "target=%s op=%s conns=%zu ops=%llu seconds=%.3f ops_per_s=%.0f p50_ms=%s p99_ms=%s "
                  "p999_ms=%s max_ms=%s errors=%llu",
                  o_.target_name.c_str(), std::string(to_string(op)).c_str(), o_.conns,
                  static_cast<unsigned long long>(s.ops), seconds, ops_per_s,
                  format_ms(s.latency.quantile_micros(0.50)).c_str(),
                  format_ms(s.latency.quantile_micros(0.99)).c_str(),
                  format_ms(s.latency.quantile_micros(0.999)).c_str(),
                  format_ms(static_cast<double>(s.latency.max_micros())).c_str(),
                  static_cast<unsigned long long>(errors));
    std::string text = line;
    if (o_.rate > 0) {
      std::snprintf(line, sizeof line,
                    " rate=%.0f late=%llu late_wakeups=%llu max_start_delay_ms=%s unsent=%llu", o_.rate,
                    static_cast<unsigned long long>(s.late), static_cast<unsigned long long>(s.late_wakeups),
                    format_ms(static_cast<double>(s.max_start_delay_us)).c_str(),
                    static_cast<unsigned long long>(s.unsent));
      text += line;
    }
    if (r.server_cpu_us) {
      std::snprintf(line, sizeof line, " server_cpu_us_per_op=%.1f", per_op(*r.server_cpu_us));
      text += line;
    }
    std::snprintf(line, sizeof line, " loadgen_cpu_us_per_op=%.1f exhausted_conns=%llu",
                  per_op(r.loadgen_cpu_us), static_cast<unsigned long long>(s.exhausted));
    text += line;
    // Cores busy with anything but the server and this process: near zero means the figures are clean.
    std::optional<double> other_cores;
    if (r.machine_busy_us && r.cpu_window_s > 0.5)  // shorter windows are mostly tick rounding
      other_cores =
          (*r.machine_busy_us - r.server_cpu_us.value_or(0) - r.loadgen_cpu_us) / (r.cpu_window_s * 1e6);
    if (other_cores) {
      std::snprintf(line, sizeof line, " other_cores=%.2f", *other_cores);
      text += line;
    }
    std::cout << text << std::endl;
    if (s.ops == 0 && s.exhausted > 0)
      std::cout
          << "  WARNING: every connection ran out of locks during the warm-up; measure acquire for longer"
          << std::endl;
    if (errors > 0) {
      std::cout << "  WARNING: " << errors << " failed requests in this phase (warm-up included):";
      for (const auto& [label, count] : s.errors)
        std::cout << ' ' << label << '=' << count;
      std::cout << "; first: " << s.first_error << std::endl;
    }

    if (!o_.json_path.empty()) {
      json::object j;
      j["target"] = o_.target_name;
      j["op"] = to_string(op);
      j["conns"] = o_.conns;
      j["ops"] = s.ops;
      j["seconds"] = seconds;
      j["ops_per_s"] = ops_per_s;
      j["p50_ms"] = s.latency.quantile_micros(0.50) / 1000;
      j["p99_ms"] = s.latency.quantile_micros(0.99) / 1000;
      j["p999_ms"] = s.latency.quantile_micros(0.999) / 1000;
      if (o_.rate > 0) {
        j["rate"] = o_.rate;
        j["late"] = s.late;
        j["late_wakeups"] = s.late_wakeups;
        j["max_start_delay_ms"] = static_cast<double>(s.max_start_delay_us) / 1000;
        j["unsent"] = s.unsent;
      }
      j["max_ms"] = static_cast<double>(s.latency.max_micros()) / 1000;
      j["errors"] = errors;
      json::object by_label;
      for (const auto& [label, count] : s.errors)
        by_label[label] = count;
      j["error_labels"] = std::move(by_label);
      if (!s.first_error.empty()) j["first_error"] = s.first_error;
      if (r.server_cpu_us) j["server_cpu_us_per_op"] = per_op(*r.server_cpu_us);
      j["loadgen_cpu_us_per_op"] = per_op(r.loadgen_cpu_us);
      j["exhausted_conns"] = s.exhausted;
      if (other_cores) j["other_cores"] = *other_cores;
      std::ofstream out(o_.json_path, std::ios::app);
      out << json::serialize(j) << '\n';
      if (!out) throw std::runtime_error("cannot write " + o_.json_path);
    }
    return errors;
  }

  options o_;
  std::unique_ptr<target> target_;
  std::vector<std::unique_ptr<worker>> workers_;
};

}  // namespace
}  // namespace baton::bench

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  using namespace baton::bench;
  options o;
  std::string ops_text;
  po::options_description desc("baton-loadgen options");
  // One option per line reads better than the chained call clang-format would make of it.
  // clang-format off
  desc.add_options()
    ("help,h", "show this help")
    ("target", po::value(&o.target_name)->default_value("batond"), "server dialect: batond, etcd or redis")
    ("url", po::value(&o.url)->required(), "server address, http://IP:PORT (redis://IP:PORT for redis)")
    ("conns", po::value(&o.conns)->default_value(16), "keep-alive connections, each with one request in flight")
    ("threads", po::value(&o.threads)->default_value(1), "load generator threads (connections are spread over them)")
    ("ops", po::value(&ops_text)->default_value("acquire,renew,release,cycle"),
     "operations to measure, in order; renew and release use the locks acquire left held")
    ("seconds", po::value(&o.seconds)->default_value(5), "measured duration of each operation")
    ("warmup", po::value(&o.warmup)->default_value(1), "unmeasured warm-up before each operation, seconds")
    ("timeout", po::value(&o.timeout)->default_value(10),
     "seconds past the end of a phase before a request counts as timed out")
    ("rate", po::value(&o.rate)->default_value(0),
     "open loop: requests per second over all connections at fixed intended times, latency counted from "
     "the intended time; 0: closed loop")
    ("acquire-count", po::value(&o.acquire_count)->default_value(0),
     "fill only: acquire this many distinct keys over all connections (closed loop, no time limit), keep "
     "them held and exit; --ops, --seconds and --rate do not apply")
    ("late-ms", po::value(&o.late_ms)->default_value(1),
     "open loop: a request sent more than this after its intended time counts as started late")
    ("ttl-ms", po::value(&o.target.ttl_ms)->default_value(3'600'000), "lease TTL; long, so acquired locks stay held")
    ("key-prefix", po::value(&o.target.key_prefix)->default_value("bench"), "first component of every key")
    ("server-pid", po::value(&o.server_pid)->default_value(0),
     "measure this process's CPU per operation (/proc/PID/stat)")
    ("json", po::value(&o.json_path), "append one JSON object per operation to this file");
  // clang-format on
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << "usage: baton-loadgen --target batond|etcd|redis --url URL [options]\n" << desc;
      return 0;
    }
    po::notify(vm);
    o.ops = parse_ops(ops_text);
    if (o.conns < 1) throw std::invalid_argument("--conns must be at least 1");
    if (o.threads < 1) throw std::invalid_argument("--threads must be at least 1");
    if (!(o.seconds > 0)) throw std::invalid_argument("--seconds must be positive");
    if (!(o.warmup >= 0)) throw std::invalid_argument("--warmup must not be negative");
    if (!(o.timeout > 0)) throw std::invalid_argument("--timeout must be positive");
    if (!(o.rate >= 0)) throw std::invalid_argument("--rate must not be negative");
    if (!(o.late_ms >= 0)) throw std::invalid_argument("--late-ms must not be negative");
    if (o.target.ttl_ms < 1000) throw std::invalid_argument("--ttl-ms must be at least 1000");
    load_generator gen(std::move(o));
    // Exit status 3 tells scripts the figures are real but some requests failed.
    return gen.run() > 0 ? 3 : 0;
  } catch (const po::error& e) {
    std::fprintf(stderr, "baton-loadgen: %s (see --help)\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "baton-loadgen: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "baton-loadgen: %s\n", e.what());
    return 1;
  }
}
