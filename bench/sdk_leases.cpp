// SPDX-License-Identifier: Apache-2.0
// baton-bench-sdk-leases: what holding many leases costs one process, and how fast a lost lease cancels work.
//
// One io_context thread and one baton::client acquire N leases on distinct keys, then hold them while the SDK
// renews them (its defaults: every ttl/3 ± 20%). Over a steady window it reports the client's CPU as a share
// of one core, its memory per lease, and the renews, retries and losses. Then, with --server-pid, it runs
// guarded work under every lease (or a sample) with baton::with_lease, freezes batond with SIGSTOP so every
// lease is lost at its local deadline, and reports how long after that deadline each work saw its
// cancellation (operation_aborted). docs/benchmarks-sdk-agent.md has the method and the figures.
//
// Output: one `phase=... key=value ...` line per phase on stdout, then the targets met or missed. Exit status
// 0 when all leases behaved (no loss in the steady window, every guarded work cancelled), 3 otherwise.

#include "latency_histogram.hpp"
#include "proc_usage.hpp"

#include <baton/client.hpp>
#include <baton/lease.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/program_options.hpp>

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace baton::bench {
namespace {

namespace asio = boost::asio;
using clock = baton::lease_clock;  // the clock of lease deadlines
using std::chrono::milliseconds;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

struct options {
  std::string server;
  std::size_t leases = 10'000;
  milliseconds ttl{15'000};
  milliseconds seconds{60'000};  // the steady window
  std::size_t in_flight = 256;   // acquires at a time
  int server_pid = 0;
  std::vector<int> cpu_pids;           // the server's processes (several etcd members); default: server_pid
  std::size_t cancel_sample = 0;       // guarded works in the cancellation phase; 0: every lease
  milliseconds cycle_seconds{10'000};  // the acquire+release window; 0: skipped
  std::size_t cycle_workers = 16;      // acquire+release loops at a time, each on its own key
  long long batch_window_ms = -1;      // client_config::renew_batch_window; -1: the SDK's default
};

// `15s`, `500ms`, `2m`: one integer and one unit (the agent's richer parser lives in baton::common, which
// this program does not link).
milliseconds parse_duration_flag(const std::string& flag, const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
    ++digits;
  const std::string unit = text.substr(digits);
  if (digits == 0 || digits > 12 || (unit != "ms" && unit != "s" && unit != "m"))
    throw std::invalid_argument("--" + flag + ": expected a duration like 500ms, 15s or 2m, got \"" + text +
                                "\"");
  const long long n = std::stoll(text.substr(0, digits));
  return milliseconds(unit == "ms" ? n : unit == "s" ? n * 1000 : n * 60'000);
}

// ---- What the process and the machine spent --------------------------------------------------------------

double seconds_between(clock::time_point a, clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The shared /proc readers count microseconds; this program reports seconds.
double self_cpu_seconds() {
  return self_cpu_micros() / 1e6;
}
double machine_busy_seconds() {
  return machine_busy_micros().value_or(0) / 1e6;
}
std::optional<double> process_cpu_seconds(int pid) {
  auto us = process_cpu_micros(pid);
  return us ? std::optional<double>(*us / 1e6) : std::nullopt;
}

std::size_t rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmRSS:   1234 kB"
  return 0;
}

// Bytes the program holds in malloc (small blocks and mmapped ones): RSS without the allocator's slack.
std::size_t heap_bytes() {
  auto mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

// TCP connections this network namespace opened (connect()), from /proc/net/snmp: counts the client's new
// connections to batond when nothing else on the machine is connecting.
std::uint64_t tcp_active_opens() {
  std::ifstream in("/proc/net/snmp");
  std::string names, values;
  while (std::getline(in, names) && std::getline(in, values)) {
    if (names.rfind("Tcp:", 0) != 0) continue;
    std::istringstream n(names), v(values);
    std::string name, value;
    while (n >> name && v >> value)
      if (name == "ActiveOpens") return std::stoull(value);
  }
  return 0;
}

struct usage_sample {
  clock::time_point at;
  std::uint64_t connects = 0;
  double self = 0, machine = 0;
  std::optional<double> server;
  client_stats stats;
};

// The server's CPU is the sum over its processes (one batond, or every member of an etcd cluster).
usage_sample sample_usage(const client& c, const std::vector<int>& server_pids) {
  usage_sample s;
  s.at = clock::now();
  s.connects = tcp_active_opens();
  s.self = self_cpu_seconds();
  s.machine = machine_busy_seconds();
  for (int pid : server_pids)
    if (auto cpu = process_cpu_seconds(pid)) s.server = s.server.value_or(0) + *cpu;
  s.stats = c.stats();
  return s;
}

// ---- Percentiles of exact samples -----------------------------------------------------------------------

struct summary {
  double p50 = 0, p99 = 0, max = 0, min = 0;
};

// Nearest rank; `v` is sorted in place.
summary summarise(std::vector<double>& v) {
  summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    auto r = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::clamp<std::size_t>(r, 1, v.size()) - 1];
  };
  s.p50 = rank(0.50);
  s.p99 = rank(0.99);
  s.max = v.back();
  s.min = v.front();
  return s;
}

// ---- The benchmark ---------------------------------------------------------------------------------------

// What the client's event hook records; indexed by lease number, parsed from the key's last segment.
struct event_log {
  bool record_renew_latency = false;
  latency_histogram renew_latency;
  std::vector<clock::time_point> lost_at;
  std::vector<clock::time_point> retry_at;  // the last renew_retry event of each lease
  std::vector<bool> lost_after_retry;       // the loss was declared by a renew that timed out
  std::size_t last_retry_index = static_cast<std::size_t>(-1);

  static std::size_t index_of(std::string_view key) {
    std::size_t i = 0;
    for (char ch : key.substr(key.rfind('/') + 1))
      i = i * 10 + static_cast<std::size_t>(ch - '0');
    return i;
  }

  void on_event(const lease_event& e) {
    const auto now = clock::now();
    switch (e.what) {
      case lease_event::kind::renewed:
        if (record_renew_latency) renew_latency.record(static_cast<std::uint64_t>(e.latency.count()));
        last_retry_index = static_cast<std::size_t>(-1);
        break;
      case lease_event::kind::renew_retry:
        // The SDK emits renew_retry and, if that failure was at the deadline, lost right after it in the
        // same handler: that pairing tells a loss found by a renew timeout from one found by the wake timer.
        last_retry_index = index_of(e.key);
        if (last_retry_index < retry_at.size()) retry_at[last_retry_index] = now;
        break;
      case lease_event::kind::lost: {
        auto i = index_of(e.key);
        if (i < lost_at.size()) {
          lost_at[i] = now;
          lost_after_retry[i] = last_retry_index == i && now - retry_at[i] < std::chrono::milliseconds(1);
        }
        last_retry_index = static_cast<std::size_t>(-1);
        break;
      }
      default:
        last_retry_index = static_cast<std::size_t>(-1);
    }
  }
};

// Runs `count` coroutines made by `make(worker_number)` at once and waits for all; rethrows the first error.
asio::awaitable<void> run_all(std::size_t count,
                              const std::function<asio::awaitable<void>(std::size_t)>& make) {
  auto ex = co_await asio::this_coro::executor;
  std::size_t remaining = count;
  std::exception_ptr first_error;
  asio::steady_timer done(ex, asio::steady_timer::time_point::max());
  for (std::size_t w = 0; w < count; ++w)
    asio::co_spawn(ex, make(w), [&](std::exception_ptr e) {
      if (e && !first_error) first_error = e;
      if (--remaining == 0) done.cancel();
    });
  if (remaining > 0) co_await done.async_wait(use_tuple);
  if (first_error) std::rethrow_exception(first_error);
}

asio::awaitable<void> sleep_for(clock::duration d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(use_tuple);
}

struct cancel_probe {
  clock::time_point cancelled_at{};
  bool aborted = false;     // the work's wait ended with operation_aborted
  bool lease_lost = false;  // with_lease then threw error::lease_lost
  bool finished = false;
};

// Guarded work: a wait that only cancellation ends. The time is taken before anything else can run.
asio::awaitable<void> wait_for_cancellation(cancel_probe& p) {
  asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::hours(1));
  auto [ec] = co_await t.async_wait(use_tuple);
  p.cancelled_at = clock::now();
  p.aborted = ec == asio::error::operation_aborted;
}

class benchmark {
 public:
  explicit benchmark(asio::io_context& ioc, options o)
      : o_(std::move(o)), client_(ioc.get_executor(), config()) {
    events_.lost_at.resize(o_.leases);
    events_.retry_at.resize(o_.leases);
    events_.lost_after_retry.resize(o_.leases);
    leases_.resize(o_.leases);
  }

  asio::awaitable<int> run() {
    int status = 0;
    if (o_.cycle_seconds.count() > 0) co_await measure_cycles();
    const std::size_t rss_before = rss_bytes(), heap_before = heap_bytes();
    co_await acquire_all();

    // Let every lease renew once before measuring: a lease's first renew comes up to renew_every × (1 +
    // jitter) after its acquire, so a window opened sooner would count too few renews.
    lease_options lo;
    lo.ttl = o_.ttl;
    const auto settle =
        std::chrono::duration_cast<milliseconds>(lo.effective_renew_every() * (1.0 + lo.jitter));
    std::printf("phase=settle seconds=%.1f\n", std::chrono::duration<double>(settle).count());
    std::fflush(stdout);
    co_await sleep_for(settle);

    events_.record_renew_latency = true;
    const auto a = sample_usage(client_, server_pids());
    co_await sleep_for(o_.seconds);
    const auto b = sample_usage(client_, server_pids());
    events_.record_renew_latency = false;
    const std::size_t rss_steady = rss_bytes(), heap_steady = heap_bytes();

    const double wall = seconds_between(a.at, b.at);
    const double client_cores = (b.self - a.self) / wall;
    const double server_cores = a.server && b.server ? (*b.server - *a.server) / wall : -1;
    const double other_cores = (b.machine - a.machine) / wall - client_cores - std::max(server_cores, 0.0);
    const auto renews = b.stats.renews - a.stats.renews;
    const auto retries = b.stats.renew_retries - a.stats.renew_retries;
    const auto losses = b.stats.losses;  // since the start, not only in the window: none may be lost
    const double rss_per_lease =
        static_cast<double>(rss_steady - rss_before) / static_cast<double>(o_.leases);
    const double heap_per_lease =
        static_cast<double>(heap_steady - heap_before) / static_cast<double>(o_.leases);
    const double cpu_per_renew_us = renews ? (b.self - a.self) * 1e6 / static_cast<double>(renews) : 0;
    const double server_cpu_per_renew_us =
        renews && server_cores >= 0 ? server_cores * wall * 1e6 / static_cast<double>(renews) : -1;
    std::printf(
        "phase=steady leases=%zu ttl_ms=%lld seconds=%.1f client_cores=%.4f client_cpu_per_renew_us=%.1f "
        "server_cores=%.4f server_cpu_per_renew_us=%.1f other_cores=%.3f renews=%llu renews_per_s=%.1f "
        "renew_retries=%llu renew_retries_since_start=%llu losses=%llu "
        "tcp_connects=%llu "
        "renew_p50_ms=%.3f renew_p99_ms=%.3f renew_max_ms=%.3f rss_before_kib=%zu rss_steady_kib=%zu "
        "rss_per_lease_bytes=%.0f heap_per_lease_bytes=%.0f\n",
        o_.leases, static_cast<long long>(o_.ttl.count()), wall, client_cores, cpu_per_renew_us, server_cores,
        server_cpu_per_renew_us, other_cores, static_cast<unsigned long long>(renews),
        static_cast<double>(renews) / wall, static_cast<unsigned long long>(retries),
        static_cast<unsigned long long>(b.stats.renew_retries), static_cast<unsigned long long>(losses),
        static_cast<unsigned long long>(b.connects - a.connects),
        events_.renew_latency.quantile_micros(0.5) / 1000, events_.renew_latency.quantile_micros(0.99) / 1000,
        static_cast<double>(events_.renew_latency.max_micros()) / 1000, rss_before / 1024, rss_steady / 1024,
        rss_per_lease, heap_per_lease);
    std::fflush(stdout);
    if (losses > 0) status = 3;

    std::optional<summary> cancel;
    if (o_.server_pid) {
      cancel = co_await measure_cancellation(status);
    } else {
      std::printf("phase=cancel skipped=\"no --server-pid: the server cannot be frozen\"\n");
    }

    std::printf("targets: client_cores %.4f <= 0.10 %s; rss_per_lease %.0f B <= 4096 %s; losses %llu == 0 %s",
                client_cores, client_cores <= 0.10 ? "met" : "MISSED", rss_per_lease,
                rss_per_lease <= 4096 ? "met" : "MISSED", static_cast<unsigned long long>(losses),
                losses == 0 ? "met" : "MISSED");
    if (cancel)
      std::printf("; cancel_p99 %.3f ms <= 1 ms %s", cancel->p99, cancel->p99 <= 1.0 ? "met" : "MISSED");
    std::printf("\n");
    std::fflush(stdout);
    co_return status;
  }

 private:
  client_config config() {
    client_config c;
    c.server_url = o_.server;
    if (o_.batch_window_ms >= 0) c.renew_batch_window = milliseconds(o_.batch_window_ms);
    c.on_event = [this](const lease_event& e) { events_.on_event(e); };
    return c;
  }

  std::vector<int> server_pids() const {
    if (!o_.cpu_pids.empty()) return o_.cpu_pids;
    if (o_.server_pid) return {o_.server_pid};
    return {};
  }

  // Lease operations per second: `cycle_workers` loops, each acquiring and releasing its own key for the
  // window (on etcd one acquire is a lease grant and a txn, one release a txn and a revoke; on batond one
  // request each).
  asio::awaitable<void> measure_cycles() {
    lease_options lo;
    lo.ttl = o_.ttl;
    std::size_t cycles = 0;
    latency_histogram cycle_latency;
    const auto a = sample_usage(client_, server_pids());
    const auto until = a.at + o_.cycle_seconds;
    co_await run_all(o_.cycle_workers, [&](std::size_t w) -> asio::awaitable<void> {
      const std::string key = "bench/sdk-cycles/" + std::to_string(::getpid()) + "/" + std::to_string(w);
      while (clock::now() < until) {
        const auto start = clock::now();
        auto l = co_await client_.async_acquire(key, lo, milliseconds(30'000));
        co_await l.async_release();
        cycle_latency.record(static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - start).count()));
        ++cycles;
      }
    });
    const auto b = sample_usage(client_, server_pids());
    const double wall = seconds_between(a.at, b.at);
    const double n = static_cast<double>(std::max<std::size_t>(cycles, 1));
    const double server_us = a.server && b.server ? (*b.server - *a.server) * 1e6 / n : -1;
    std::printf(
        "phase=cycle workers=%zu seconds=%.1f cycles=%zu cycles_per_s=%.0f client_cpu_per_cycle_us=%.1f "
        "server_cpu_per_cycle_us=%.1f cycle_p50_ms=%.3f cycle_p99_ms=%.3f\n",
        o_.cycle_workers, wall, cycles, static_cast<double>(cycles) / wall, (b.self - a.self) * 1e6 / n,
        server_us, cycle_latency.quantile_micros(0.5) / 1000, cycle_latency.quantile_micros(0.99) / 1000);
    std::fflush(stdout);
  }

  std::string key_of(std::size_t i) const {
    return "bench/sdk-leases/" + std::to_string(::getpid()) + "/" + std::to_string(i);
  }

  asio::awaitable<void> acquire_all() {
    lease_options lo;
    lo.ttl = o_.ttl;
    std::size_t next = 0;
    const auto start = clock::now();
    const double cpu_start = self_cpu_seconds();
    co_await run_all(std::min(o_.in_flight, o_.leases), [&](std::size_t) -> asio::awaitable<void> {
      while (next < o_.leases) {
        const std::size_t i = next++;
        leases_[i].emplace(co_await client_.async_acquire(key_of(i), lo, milliseconds(30'000)));
      }
    });
    const double wall = seconds_between(start, clock::now());
    std::printf("phase=acquire leases=%zu in_flight=%zu seconds=%.2f acquires_per_s=%.0f client_cpu_s=%.2f\n",
                o_.leases, o_.in_flight, wall, static_cast<double>(o_.leases) / wall,
                self_cpu_seconds() - cpu_start);
    std::fflush(stdout);
  }

  // Guards every lease of the sample with with_lease, freezes batond, and waits for every guard to end.
  asio::awaitable<summary> measure_cancellation(int& status) {
    const std::size_t k = o_.cancel_sample == 0 ? o_.leases : std::min(o_.cancel_sample, o_.leases);
    std::vector<std::size_t> sample(k);
    for (std::size_t j = 0; j < k; ++j)
      sample[j] = j * o_.leases / k;  // spread over the acquire order
    std::vector<cancel_probe> probes(k);
    auto ex = co_await asio::this_coro::executor;
    std::size_t remaining = k;
    asio::steady_timer all_done(ex, asio::steady_timer::time_point::max());
    for (std::size_t j = 0; j < k; ++j) {
      asio::co_spawn(
          ex,
          [this, &probes, &sample, j]() -> asio::awaitable<void> {
            try {
              co_await with_lease(*leases_[sample[j]], wait_for_cancellation(probes[j]));
            } catch (const exception& e) {
              probes[j].lease_lost = e.code() == error::lease_lost;
            }
          },
          [&, j](std::exception_ptr) {
            probes[j].finished = true;
            if (--remaining == 0) all_done.cancel();
          });
      // In steps, with the client's thread let go between them: renewals falling due meanwhile go out on
      // time, and the leases keep the spread of deadlines they have in the steady state.
      if (j % 256 == 255) co_await sleep_for(milliseconds(1));
    }
    // Every guard is waiting once the posted starts have run (one thread). The freeze must begin from a
    // client renewing as usual: wait until a whole second passes without a renew retry.
    co_await sleep_for(milliseconds(20));
    for (auto retries = client_.stats().renew_retries;;) {
      co_await sleep_for(milliseconds(1000));
      const auto now_retries = client_.stats().renew_retries;
      if (now_retries == retries) break;
      retries = now_retries;
    }

    if (::kill(o_.server_pid, SIGSTOP) != 0)
      throw std::runtime_error("kill(" + std::to_string(o_.server_pid) +
                               ", SIGSTOP): " + std::strerror(errno));
    const auto frozen_at = clock::now();
    const double cpu_frozen = self_cpu_seconds();
    const auto connects_frozen = tcp_active_opens();
    // Each lease is lost by ttl - safety margin after its last confirmed renew; give it that and a margin.
    asio::steady_timer give_up(ex, o_.ttl + milliseconds(10'000));
    using namespace asio::experimental::awaitable_operators;
    co_await (all_done.async_wait(use_tuple) || give_up.async_wait(use_tuple));
    const double freeze_wall = seconds_between(frozen_at, clock::now());
    const double freeze_cpu = self_cpu_seconds() - cpu_frozen;
    const auto freeze_connects = tcp_active_opens() - connects_frozen;
    ::kill(o_.server_pid, SIGCONT);

    // detect: deadline to loss declared, split by what declared it (a renew request timing out at the
    // deadline, or the lease's own wake timer); deliver: loss declared to the work's wait cancelled.
    std::vector<double> delay_ms, detect_ms, detect_timer_ms, deliver_ms;
    std::size_t aborted = 0, lost = 0, unfinished = 0, by_renew_timeout = 0;
    clock::time_point first_deadline = clock::time_point::max(), last_deadline = clock::time_point::min();
    auto ms = [](clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
    for (std::size_t j = 0; j < k; ++j) {
      const auto& p = probes[j];
      const auto i = sample[j];
      if (!p.finished) {
        ++unfinished;
        continue;
      }
      aborted += p.aborted;
      lost += p.lease_lost;
      const auto deadline = leases_[i]->deadline();  // final once the lease is lost
      first_deadline = std::min(first_deadline, deadline);
      last_deadline = std::max(last_deadline, deadline);
      delay_ms.push_back(ms(p.cancelled_at - deadline));
      if (events_.lost_at[i] != clock::time_point{}) {
        detect_ms.push_back(ms(events_.lost_at[i] - deadline));
        deliver_ms.push_back(ms(p.cancelled_at - events_.lost_at[i]));
        by_renew_timeout += events_.lost_after_retry[i];
        if (!events_.lost_after_retry[i]) detect_timer_ms.push_back(detect_ms.back());
      }
    }
    const auto d = summarise(delay_ms), det = summarise(detect_ms), del = summarise(deliver_ms);
    const auto det_timer = summarise(detect_timer_ms);
    std::printf(
        "phase=cancel sample=%zu ttl_ms=%lld cancelled=%zu lease_lost=%zu unfinished=%zu "
        "deadlines_span_s=%.2f freeze_s=%.2f client_cores_while_frozen=%.3f tcp_connects_while_frozen=%llu "
        "delay_p50_ms=%.3f delay_p99_ms=%.3f delay_max_ms=%.3f delay_min_ms=%.3f "
        "detect_p50_ms=%.3f detect_p99_ms=%.3f detect_max_ms=%.3f "
        "deliver_p50_ms=%.3f deliver_p99_ms=%.3f deliver_max_ms=%.3f lost_by_renew_timeout=%zu "
        "lost_by_timer=%zu detect_timer_p50_ms=%.3f detect_timer_max_ms=%.3f\n",
        k, static_cast<long long>(o_.ttl.count()), aborted, lost, unfinished,
        lost ? seconds_between(first_deadline, last_deadline) : 0.0, freeze_wall, freeze_cpu / freeze_wall,
        static_cast<unsigned long long>(freeze_connects), d.p50, d.p99, d.max, d.min, det.p50, det.p99,
        det.max, del.p50, del.p99, del.max, by_renew_timeout, detect_timer_ms.size(), det_timer.p50,
        det_timer.max);
    std::fflush(stdout);
    if (aborted != k || lost != k) status = 3;
    co_return d;
  }

  options o_;
  event_log events_;
  client client_;
  std::vector<std::optional<lease>> leases_;
};

}  // namespace
}  // namespace baton::bench

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  using namespace baton::bench;
  options o;
  std::string ttl_text, seconds_text, cycle_text, cpu_pids_text;
  po::options_description desc("baton-bench-sdk-leases options");
  desc.add_options()("help,h", "show this help")(
      "server", po::value(&o.server)->required(),
      "lock server URL: http://IP:PORT, or etcd://IP:PORT[,IP:PORT...]")(
      "leases", po::value(&o.leases)->default_value(o.leases), "leases held at once, each on its own key")(
      "ttl", po::value(&ttl_text)->default_value("15s"), "lease TTL (renewed every ttl/3 ± 20%)")(
      "seconds", po::value(&seconds_text)->default_value("60s"),
      "length of the measured steady window (a duration: 60s, 2m)")(
      "in-flight", po::value(&o.in_flight)->default_value(o.in_flight), "acquires in flight at a time")(
      "server-pid", po::value(&o.server_pid)->default_value(0),
      "batond's pid: its CPU is reported, and the cancellation phase freezes it (SIGSTOP, then SIGCONT)")(
      "cancel-sample", po::value(&o.cancel_sample)->default_value(0),
      "leases whose guarded work is timed in the cancellation phase; 0: all")(
      "server-cpu-pids", po::value(&cpu_pids_text),
      "comma-separated pids whose CPU is the server's (every etcd member); default: --server-pid")(
      "cycle-seconds", po::value(&cycle_text)->default_value("10s"),
      "length of the acquire+release window before the hold phase; 0: skipped")(
      "cycle-workers", po::value(&o.cycle_workers)->default_value(o.cycle_workers),
      "acquire+release loops at a time, each on its own key")(
      "renew-batch-window-ms", po::value(&o.batch_window_ms)->default_value(-1),
      "renewals falling due within this many ms leave in one batch (0: each alone; -1: the SDK's default)");
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << "usage: baton-bench-sdk-leases --server URL [options]\n" << desc;
      return 0;
    }
    po::notify(vm);
    o.ttl = parse_duration_flag("ttl", ttl_text);
    // A bare number is taken as seconds, like the other bench tools' --seconds.
    o.seconds = seconds_text.find_first_not_of("0123456789") == std::string::npos && !seconds_text.empty()
                    ? milliseconds(std::stoll(seconds_text) * 1000)
                    : parse_duration_flag("seconds", seconds_text);
    o.cycle_seconds = cycle_text == "0" ? milliseconds{0} : parse_duration_flag("cycle-seconds", cycle_text);
    for (std::size_t at = 0; at < cpu_pids_text.size();) {
      const auto comma = std::min(cpu_pids_text.find(',', at), cpu_pids_text.size());
      o.cpu_pids.push_back(std::stoi(cpu_pids_text.substr(at, comma - at)));
      at = comma + 1;
    }
    if (o.cycle_workers < 1) throw std::invalid_argument("--cycle-workers must be at least 1");
    if (o.leases < 1) throw std::invalid_argument("--leases must be at least 1");
    if (o.in_flight < 1) throw std::invalid_argument("--in-flight must be at least 1");
    if (o.seconds.count() <= 0) throw std::invalid_argument("--seconds must be positive");

    boost::asio::io_context ioc(1);
    benchmark bench(ioc, o);
    int status = 1;
    boost::asio::co_spawn(ioc, bench.run(), [&](std::exception_ptr e, int s) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          std::fprintf(stderr, "baton-bench-sdk-leases: %s\n", ex.what());
        }
      } else {
        status = s;
      }
      ioc.stop();  // the leases are not released: batond is stopped next, and lost leases need nothing
    });
    ioc.run();
    return status;
  } catch (const po::error& e) {
    std::fprintf(stderr, "baton-bench-sdk-leases: %s (see --help)\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "baton-bench-sdk-leases: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "baton-bench-sdk-leases: %s\n", e.what());
    return 1;
  }
}
