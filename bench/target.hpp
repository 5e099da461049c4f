// SPDX-License-Identifier: Apache-2.0
#pragma once
// How each server under test spells the four benchmarked lock operations (batond's protocol v1, the
// equivalent lease-and-transaction recipe on etcd's v3 JSON gateway, and SET NX PX on Redis), as pure
// functions of one connection's state: format the next request, interpret the answer. No sockets here, so the
// driver in loadgen.cpp is the same for every server and the comparison measures the servers, not different
// clients. Redis speaks RESP instead of HTTP; its target brings its own reply framing (parse_response).

#include "http_response.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace baton::bench {

enum class op_kind {
  setup,    // once per connection before the first phase (etcd: grant the connection's lease)
  acquire,  // acquire a fresh key, keep it held
  renew,    // renew held locks round robin
  release,  // release each held lock exactly once
  cycle,    // acquire then release one per-connection key: one op = both requests
};

std::string_view to_string(op_kind op);

struct held_lock {
  std::uint64_t key_number;  // the n of key "<prefix>/<connection>/<n>"
  std::uint64_t token;       // batond: fencing token; etcd: the key's create_revision; Redis: none (0)
};

/// Everything one connection knows; only that connection's thread touches it.
struct connection_state {
  std::size_t id = 0;
  std::string owner;     // "bench-<id>"
  std::string lease_id;  // etcd: this connection's lease, as the decimal string the gateway wants
  std::vector<held_lock> held;
  std::uint64_t next_key = 0;
  std::size_t renew_cursor = 0;
  std::size_t release_cursor = 0;
  int cycle_step = 0;  // 0: next request is the acquire, 1: the release
  std::uint64_t cycle_token = 0;
};

/// What an answer means for the operation in progress.
struct step_result {
  enum class kind { done, more, failed };
  kind what;
  /// For failed: a short label the report counts by ("http_409", "refused", "bad_body").
  std::string_view error = {};
};

class target {
 public:
  virtual ~target() = default;

  /// Formats the next HTTP request of `op` for this connection into `out` (replacing its content).
  /// Returns false when the connection has nothing left to do in this phase (release ran out of locks,
  /// renew has none to renew, setup not needed).
  virtual bool next_request(op_kind op, connection_state& s, std::string& out) = 0;

  /// Interprets the answer to the request `next_request` formatted last.
  virtual step_result on_response(op_kind op, connection_state& s, int status, std::string_view body) = 0;

  /// Frames one answer from the start of `in`. HTTP by default; the Redis target reads a RESP reply and
  /// passes its type byte as `status` (see make_redis_target). `scratch` is the caller's reused buffer.
  virtual parse_status parse_response(std::string_view in, std::string& scratch, http_response& out) {
    return parse_http_response(in, scratch, out);
  }
};

struct target_options {
  std::string host_header;  // "127.0.0.1:7070"
  std::string key_prefix = "bench";
  std::uint64_t ttl_ms = 3'600'000;
};

std::unique_ptr<target> make_batond_target(target_options options);
std::unique_ptr<target> make_etcd_target(target_options options);

/// Redis with the usual single-instance lock recipe: acquire is SET key owner NX PX ttl, release an EVAL of
/// a compare-and-delete script, renew an EVAL of a compare-and-pexpire script (Redis has no fencing token;
/// the owner string is what proves a holder). Its on_response takes the RESP reply type as `status`
/// ('+', '-', ':', '$', or '_' for nil) and the reply's payload as `body`.
std::unique_ptr<target> make_redis_target(target_options options);

}  // namespace baton::bench
