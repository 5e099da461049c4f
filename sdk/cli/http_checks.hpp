// SPDX-License-Identifier: Apache-2.0
#pragma once
// `baton conformance` over HTTP: the checks of docs/protocol.md, one file per group named after what it
// checks (http_<group>_checks.cpp). Each group lists its checks in the order they run; checks()
// (http_checks.cpp) runs the groups in turn. Also here: what more than one group uses. Private to the CLI.

#include "http_suite.hpp"

#include <boost/json/array.hpp>

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

namespace baton::cli::http_conformance {

// The groups, in the order checks() runs them.
std::span<const check> lease_checks();         // acquire, renew, release, GET, long-poll, value
std::span<const check> capabilities_checks();  // GET /v1/capabilities
std::span<const check> renew_batch_checks();   // feature renew_batch
std::span<const check> proclaim_checks();      // feature proclaim
std::span<const check> record_checks();        // feature lock_record
std::span<const check> queue_checks();         // feature acquire_queue
std::span<const check> operator_checks();      // features list_locks and break_lease
std::span<const check> lock_delay_checks();    // feature lock_delay
std::span<const check> semaphore_checks();     // feature semaphores
std::span<const check> bad_input_checks();     // errors for bad requests; the server still serves

// docs/protocol.md, Time: a lease acquired by a request sent at client time a is held until at least a + ttl;
// a read answered within `expiry_tolerance` of that instant is not judged (the protocol's TTLs are whole
// milliseconds).
inline constexpr auto expiry_tolerance = 1ms;

// Why a check of batond's operator routes has no counterpart through baton::backend.
inline constexpr const char* no_operators =
    "the listing and the break are batond's routes; the etcd backend's are checked by its own tests";

// A 409 lost whose reason is one of `reasons`, or why not.
void expect_lost(const reply& r, std::initializer_list<const char*> reasons, const std::string& what);

// Bad inputs: each on a fresh connection (the server may close it after an error).
reply bad(const suite& s, http::verb method, const std::string& target, std::string body = {});

// A record write's 200 {"key","token","version"} with the expected version, or why not
// (http_record_checks.cpp).
void written(const reply& r, std::int64_t token, std::int64_t version, const std::string& what);
// The record as GET shows it, or why not (http_record_checks.cpp).
void record_is(const reply& r, const std::string& value, std::int64_t token, std::int64_t version,
               const std::string& owner, const std::string& what);

// The results array of a 200 batch answer with one result per entry (http_renew_batch_checks.cpp).
const json::array& batch_results(const reply& r, std::size_t entries, const std::string& what);
// One result as a reply of its own, so a result is judged with the single renew's words.
reply result_reply(const json::value& v);

}  // namespace baton::cli::http_conformance
