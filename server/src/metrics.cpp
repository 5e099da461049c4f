// SPDX-License-Identifier: Apache-2.0
#include "metrics.hpp"

#include "baton/common/process_metrics.hpp"

#include <algorithm>
#include <cstdio>

namespace baton::server {

histogram::histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), buckets_(bounds_.size() + 1) {}

void histogram::observe(double value) {
  auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);
  buckets_[static_cast<std::size_t>(it - bounds_.begin())].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_micro_.fetch_add(static_cast<std::uint64_t>(std::max(0.0, value) * 1e6), std::memory_order_relaxed);
}

void histogram::render(std::string& out, std::string_view name) const {
  char buf[160];
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    std::snprintf(buf, sizeof buf, "%.*s_bucket{le=\"%g\"} %llu\n", static_cast<int>(name.size()),
                  name.data(), bounds_[i], static_cast<unsigned long long>(cumulative));
    out += buf;
  }
  cumulative += buckets_.back().load(std::memory_order_relaxed);
  std::snprintf(buf, sizeof buf, "%.*s_bucket{le=\"+Inf\"} %llu\n", static_cast<int>(name.size()),
                name.data(), static_cast<unsigned long long>(cumulative));
  out += buf;
  std::snprintf(buf, sizeof buf, "%.*s_sum %.6f\n%.*s_count %llu\n", static_cast<int>(name.size()),
                name.data(), static_cast<double>(sum_micro_.load(std::memory_order_relaxed)) / 1e6,
                static_cast<int>(name.size()), name.data(),
                static_cast<unsigned long long>(count_.load(std::memory_order_relaxed)));
  out += buf;
}

std::string_view to_string(route r) {
  switch (r) {
    case route::acquire:
      return "acquire";
    case route::renew:
      return "renew";
    case route::release:
      return "release";
    case route::get:
      return "get";
    case route::wait:
      return "wait";
    case route::healthz:
      return "healthz";
    case route::metrics:
      return "metrics";
    case route::renew_batch:
      return "renew_batch";
    case route::proclaim:
      return "proclaim";
    case route::record_write:
      return "record_write";
    case route::record_read:
      return "record_read";
    case route::list:
      return "list";
    case route::break_lease:
      return "break";
    case route::other:
    case route::count_:
      break;
  }
  return "other";
}

server_metrics::server_metrics()
    : queue_wait_seconds({0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60}),
      fsync_batch_records({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}),
      fsync_seconds({0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1}),
      request_seconds({0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1, 10, 60}) {}

void server_metrics::count_request(route r, int status) {
  auto it = std::find(statuses.begin(), statuses.end(), status);
  auto idx = static_cast<std::size_t>(it - statuses.begin());  // statuses.size() means "other"
  requests_[static_cast<std::size_t>(r)][idx].fetch_add(1, std::memory_order_relaxed);
}

std::string server_metrics::render() const {
  std::string out;
  out.reserve(8192);
  char buf[200];
  auto gauge = [&](const char* name, const char* help, const char* type, long long v) {
    std::snprintf(buf, sizeof buf, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", name, help, name, type, name, v);
    out += buf;
  };

  out += "# HELP baton_requests_total HTTP requests by route and status code.\n";
  out += "# TYPE baton_requests_total counter\n";
  for (std::size_t r = 0; r < route_count; ++r) {
    for (std::size_t s = 0; s <= statuses.size(); ++s) {
      auto n = requests_[r][s].load(std::memory_order_relaxed);
      if (n == 0) continue;
      std::string code = s < statuses.size() ? std::to_string(statuses[s]) : "other";
      std::snprintf(buf, sizeof buf, "baton_requests_total{route=\"%s\",code=\"%s\"} %llu\n",
                    std::string(to_string(static_cast<route>(r))).c_str(), code.c_str(),
                    static_cast<unsigned long long>(n));
      out += buf;
    }
  }

  out += "# HELP baton_operations_total Lock operation outcomes.\n# TYPE baton_operations_total counter\n";
  auto outcome = [&](const char* op, const char* result, const std::atomic<std::uint64_t>& v) {
    std::snprintf(buf, sizeof buf, "baton_operations_total{op=\"%s\",outcome=\"%s\"} %llu\n", op, result,
                  static_cast<unsigned long long>(v.load(std::memory_order_relaxed)));
    out += buf;
  };
  outcome("acquire", "granted", acquire_granted);
  outcome("acquire", "held", acquire_held);
  outcome("acquire", "lock_delay", acquire_lock_delay);
  outcome("acquire", "permits_mismatch", acquire_permits_mismatch);
  outcome("acquire", "too_many_locks", acquire_too_many_locks);
  outcome("acquire", "lock_quota_exceeded", acquire_over_quota);
  outcome("renew", "ok", renew_ok);
  outcome("renew", "lost", renew_lost);
  outcome("renew_batch", "answered", renew_batches);
  outcome("proclaim", "ok", proclaim_ok);
  outcome("proclaim", "lost", proclaim_lost);
  outcome("record_write", "ok", record_written);
  outcome("record_write", "lost", record_lost);
  outcome("record_write", "stale_token", record_stale);
  outcome("record_write", "too_many_records", record_too_many);
  outcome("record_read", "found", record_found);
  outcome("record_read", "no_record", record_missing);
  outcome("release", "released", release_released);
  outcome("release", "already_free", release_already_free);
  outcome("release", "not_owner", release_not_owner);
  outcome("expire", "expired", expired);
  outcome("break", "broken", break_broken);
  outcome("break", "not_held", break_not_held);
  outcome("break", "token_mismatch", break_token_mismatch);
  outcome("list", "page", list_pages);
  outcome("acquire_queue", "wait_passed", queue_wait_passed);
  outcome("acquire_queue", "left", queue_left);

  gauge("baton_locks_held", "Locks currently held (expired ones count until swept).", "gauge",
        locks_held.load(std::memory_order_relaxed));
  gauge("baton_waiters", "Long-poll requests currently waiting.", "gauge",
        waiters.load(std::memory_order_relaxed));
  gauge("baton_acquire_queue_waiting", "Queued acquires currently waiting for their lock.", "gauge",
        queued.load(std::memory_order_relaxed));
  gauge("baton_connections", "Open client connections.", "gauge",
        connections.load(std::memory_order_relaxed));
  gauge("baton_storage_errors_total", "Write-ahead log write or fsync failures.", "counter",
        static_cast<long long>(storage_errors.load(std::memory_order_relaxed)));
  gauge(
      "baton_storage_healthy",
      "1 while the write-ahead log accepts writes; 0 after a storage failure (batond exits with status 74).",
      "gauge", storage_healthy.load(std::memory_order_relaxed));
  gauge("baton_wal_bytes", "Size of the write-ahead log file being appended to, in bytes.", "gauge",
        static_cast<long long>(wal_bytes.load(std::memory_order_relaxed)));
  gauge("baton_last_token", "The last fencing token issued.", "gauge",
        static_cast<long long>(last_token.load(std::memory_order_relaxed)));

  if (const auto not_after = tls_certificate_not_after.load(std::memory_order_relaxed); not_after != 0) {
    out +=
        "# HELP baton_tls_reloads_total SIGHUP reloads of the TLS files by outcome (failed: the old ones are "
        "kept).\n# TYPE baton_tls_reloads_total counter\n";
    std::snprintf(buf, sizeof buf, "baton_tls_reloads_total{outcome=\"ok\"} %llu\n",
                  static_cast<unsigned long long>(tls_reloads_ok.load(std::memory_order_relaxed)));
    out += buf;
    std::snprintf(buf, sizeof buf, "baton_tls_reloads_total{outcome=\"failed\"} %llu\n",
                  static_cast<unsigned long long>(tls_reloads_failed.load(std::memory_order_relaxed)));
    out += buf;
    out +=
        "# HELP baton_tls_certificate_not_after_seconds End of validity of the certificate new TLS "
        "connections get (seconds since the epoch).\n# TYPE baton_tls_certificate_not_after_seconds gauge\n"
        "baton_tls_certificate_not_after_seconds " +
        std::to_string(not_after) + "\n";
  }

  out += "# HELP baton_wal_fsync_batch_records Records made durable by one fsync (group commit size).\n";
  out += "# TYPE baton_wal_fsync_batch_records histogram\n";
  fsync_batch_records.render(out, "baton_wal_fsync_batch_records");
  out += "# HELP baton_wal_fsync_seconds Time to write and fsync one batch.\n";
  out += "# TYPE baton_wal_fsync_seconds histogram\n";
  fsync_seconds.render(out, "baton_wal_fsync_seconds");
  out +=
      "# HELP baton_acquire_queue_wait_seconds Time a queued acquire waited from its arrival to its grant.\n";
  out += "# TYPE baton_acquire_queue_wait_seconds histogram\n";
  queue_wait_seconds.render(out, "baton_acquire_queue_wait_seconds");
  out += "# HELP baton_request_seconds Time from a request's arrival to its answer (long-polls excluded).\n";
  out += "# TYPE baton_request_seconds histogram\n";
  request_seconds.render(out, "baton_request_seconds");
  out += process_metrics_text();
  return out;
}

}  // namespace baton::server
