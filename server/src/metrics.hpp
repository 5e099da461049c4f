// SPDX-License-Identifier: Apache-2.0
#pragma once
// Prometheus metrics of batond. Every metric is a fixed set of atomics, so the request path never takes a
// lock to count; /metrics renders them in the text exposition format.

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace baton::server {

class histogram {
 public:
  /// `bounds` are the upper bounds of the buckets, ascending; +Inf is implicit.
  explicit histogram(std::vector<double> bounds);
  void observe(double value);
  /// Appends the _bucket, _sum and _count series of this histogram.
  void render(std::string& out, std::string_view name) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::atomic<std::uint64_t>> buckets_;  // one per bound, plus +Inf
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_micro_{0};  // sum in millionths, so it can stay an integer atomic
};

enum class route {
  acquire,
  renew,
  release,
  get,
  wait,
  healthz,
  metrics,
  renew_batch,
  proclaim,
  record_write,
  record_read,
  list,
  break_lease,
  other,
  count_
};
std::string_view to_string(route r);

struct server_metrics {
  static constexpr std::array<int, 10> statuses{200, 400, 401, 404, 405, 409, 413, 429, 500, 503};

  server_metrics();

  void count_request(route r, int status);

  // Operation outcomes.
  std::atomic<std::uint64_t> acquire_granted{0}, acquire_held{0}, acquire_lock_delay{0},
      acquire_permits_mismatch{0};
  /// Acquires refused by --max-locks, and by a client's max_locks quota.
  std::atomic<std::uint64_t> acquire_too_many_locks{0}, acquire_over_quota{0};
  /// Renews, counted per lease: a batch of n entries adds n to these.
  std::atomic<std::uint64_t> renew_ok{0}, renew_lost{0};
  /// Batch renewals answered (POST /v1/renew, after their one wait for the log).
  std::atomic<std::uint64_t> renew_batches{0};
  /// Proclaims (POST /v1/locks/{key}/proclaim): the value replaced, and refused (409 lost).
  std::atomic<std::uint64_t> proclaim_ok{0}, proclaim_lost{0};
  /// Writes of lock records (PUT /v1/locks/{key}/record): written, refused as a renew (409 lost), refused
  /// for a stale token (409 stale_token), refused for the record limit (507 too_many_records).
  std::atomic<std::uint64_t> record_written{0}, record_lost{0}, record_stale{0}, record_too_many{0};
  /// Reads of lock records: found, and 404 no_record.
  std::atomic<std::uint64_t> record_found{0}, record_missing{0};
  std::atomic<std::uint64_t> release_released{0}, release_already_free{0}, release_not_owner{0};
  std::atomic<std::uint64_t> expired{0};
  /// Operators' breaks (POST /v1/locks/{key}/break): a lease ended, a free key (404 not_held), and a key
  /// held with another token than the one named (409 token_mismatch). Listing pages answered.
  std::atomic<std::uint64_t> break_broken{0}, break_not_held{0}, break_token_mismatch{0};
  std::atomic<std::uint64_t> list_pages{0};
  std::atomic<std::int64_t> locks_held{0};
  std::atomic<std::int64_t> waiters{0};
  /// Queued acquires (feature acquire_queue): waiting now; answered with the holder once their wait
  /// passed; gone before their answer (connection closed); and the time from arrival to grant.
  std::atomic<std::int64_t> queued{0};
  std::atomic<std::uint64_t> queue_wait_passed{0}, queue_left{0};
  histogram queue_wait_seconds;
  std::atomic<std::int64_t> connections{0};
  std::atomic<std::uint64_t> storage_errors{0};
  /// 1 while the log accepts writes; 0 once a write, fsync or rename failed (batond then exits).
  std::atomic<int> storage_healthy{1};
  /// SIGHUP reloads of the TLS certificate, key and client CAs: applied, and refused (the old ones kept).
  std::atomic<std::uint64_t> tls_reloads_ok{0}, tls_reloads_failed{0};
  /// notAfter of the certificate new connections get, in seconds since the epoch; 0 without TLS, and then
  /// no TLS series is rendered.
  std::atomic<std::int64_t> tls_certificate_not_after{0};
  /// Size of the write-ahead log file being appended to (it starts again near 0 after each cut).
  std::atomic<std::uint64_t> wal_bytes{0};
  /// The last fencing token issued (recovered at start, then each grant's).
  std::atomic<std::uint64_t> last_token{0};

  // The write-ahead log.
  histogram fsync_batch_records;
  histogram fsync_seconds;
  histogram request_seconds;

  /// The whole exposition text, ending with baton_build_info and the process_* series (process_metrics.hpp).
  std::string render() const;

 private:
  static constexpr std::size_t route_count = static_cast<std::size_t>(route::count_);
  std::array<std::array<std::atomic<std::uint64_t>, statuses.size() + 1>, route_count> requests_{};
};

}  // namespace baton::server
