// SPDX-License-Identifier: Apache-2.0
// `baton conformance` over HTTP: the lock's record (docs/protocol.md, "record"), run when the server
// advertises lock_record.

#include "http_checks.hpp"

#include <thread>

namespace baton::cli::http_conformance {
namespace {

void record_written(const suite& s) {
  s.require_feature("lock_record");
  auto c = s.open();
  const auto key = s.key("record");
  auto a = s.must_acquire(c, key, "leader-a", 30'000, "addr");
  // The lease's value as the server keeps it: "addr", or "" without feature lease_values.
  const auto value = s.get(c, key).str("value");
  std::this_thread::sleep_for(300ms);
  written(s.write_record(c, key, "leader-a", a.token(), "{\"slot\":1}\n"), a.token(), 1,
          "the holder's write");
  written(s.write_record(c, key, "leader-a", a.token(), "{\"slot\":2}\n"), a.token(), 2, "its second write");
  record_is(s.read_record(c, key), "{\"slot\":2}\n", a.token(), 2, "leader-a", "GET of the record");
  auto g = s.get(c, key);
  s.release(c, key, "leader-a", a.token());
  expect(
      g.status == 200 && g.num("token") == a.token() && g.str("value") == value &&
          g.num("ttl_remaining_ms").value_or(0) <= 29'800,
      "a record write 300 ms into a 30 s lease changed the lease (no renew, no new value): " + g.describe());
}

void record_refused(const suite& s) {
  s.require_feature("lock_record");
  auto c = s.open();
  const auto key = s.key("record-refused");
  expect_lost(s.write_record(c, key, "leader-a", 1, "x"), {"not_held"}, "a record write for a free key");
  auto first = s.must_acquire(c, key, "leader-a", 30'000);
  written(s.write_record(c, key, "leader-a", first.token(), "kept"), first.token(), 1, "the holder's write");
  auto second = s.must_acquire(c, key, "leader-a", 30'000);
  expect_lost(s.write_record(c, key, "leader-a", first.token(), "stale"), {"token_mismatch"},
              "a record write with the superseded token");
  expect_lost(s.write_record(c, key, "other-b", second.token(), "stolen"), {"owner_mismatch"},
              "a record write by another owner");
  auto r = s.read_record(c, key);
  s.release(c, key, "leader-a", second.token());
  record_is(r, "kept", first.token(), 1, "leader-a", "GET of the record after refused writes");
}

void record_outlives_lease(const suite& s) {
  s.require_feature("lock_record");
  auto c = s.open();
  const auto key = s.key("record-outlives");
  auto a = s.must_acquire(c, key, "leader-a", 30'000);
  written(s.write_record(c, key, "leader-a", a.token(), "state"), a.token(), 1, "the holder's write");
  s.release(c, key, "leader-a", a.token());
  record_is(s.read_record(c, key), "state", a.token(), 1, "leader-a", "GET of the record after a release");
  expect_lost(s.write_record(c, key, "leader-a", a.token(), "late"), {"not_held"},
              "a record write after the lease's release");
  auto b = s.must_acquire(c, key, "leader-b", 200);
  std::this_thread::sleep_until(b.sent + 1'200ms);
  expect_lost(s.write_record(c, key, "leader-b", b.token(), "late"), {"not_held"},
              "a record write 1.2 s into a 200 ms lease (nobody else took the key)");
  record_is(s.read_record(c, key), "state", a.token(), 1, "leader-a", "GET of the record after an expiry");
}

void record_missing(const suite& s) {
  s.require_feature("lock_record");
  auto c = s.open();
  suite::expect_error(s.read_record(c, s.key("record-none")), 404, "no_record",
                      "GET of a record never written");
}

constexpr check group[] = {
    {check_name::record_written, record_written},
    {check_name::record_refused, record_refused},
    {check_name::record_outlives_lease, record_outlives_lease},
    {check_name::record_missing, record_missing},
};

}  // namespace

void written(const reply& r, std::int64_t token, std::int64_t version, const std::string& what) {
  expect(r.status == 200 && r.num("token") == token && r.num("version") == version,
         what + ": expected 200 with token " + std::to_string(token) + " and version " +
             std::to_string(version) + ", got " + r.describe());
}

void record_is(const reply& r, const std::string& value, std::int64_t token, std::int64_t version,
               const std::string& owner, const std::string& what) {
  expect(r.status == 200 && r.str("value") == value && r.num("token") == token &&
             r.num("version") == version && r.str("owner") == owner,
         what + ": expected the record \"" + value + "\" (token " + std::to_string(token) + ", version " +
             std::to_string(version) + ", owner " + owner + "), got " + r.describe());
}

std::span<const check> record_checks() {
  return group;
}

}  // namespace baton::cli::http_conformance
