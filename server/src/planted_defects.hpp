// SPDX-License-Identifier: Apache-2.0
#pragma once
// Known defects of batond's past, which the deterministic simulation (tests/sim, `baton-sim --bug NAME`)
// switches back on to show that it finds each one.
//
// They exist only in the simulation's build (docs/design.md, "Planted defects only in the simulation's
// build"): tests/sim/CMakeLists.txt compiles the sources that hold one again with BATON_PLANTED_DEFECTS, and
// links those objects into the simulation in place of baton_server_core's. batond's build has neither the
// switches nor the code they switch on: there BATON_PLANTED(flag) is `false` and `flag` is not compiled.
//
// Only .cpp files (non-inline functions) may use BATON_PLANTED, never a header: the types and the inline
// code of both builds are then the same, and the two copies of a source differ only in function bodies
// (tests/check-planted-defects.sh checks both this and batond's symbols).

#ifdef BATON_PLANTED_DEFECTS

namespace baton::server {

struct planted_defects {
  /// lock_service::renew answers a renew without waiting for the records its lease rests on (an extend
  /// raised by it or by an earlier renew), so a crash can restore the lease with a shorter TTL.
  bool renew_before_durable = false;
  /// lock_service::release frees the key whoever holds it: owner and token are not compared.
  bool release_by_key = false;
  /// journal::open cuts the log at a record that does not decode even when valid records follow it, as
  /// if it were a torn tail: acknowledged records after it are lost, the token counter goes back.
  bool cut_at_damaged_record = false;
  /// journal::open reads a framed log record by record, as before batches were framed: a power cut that
  /// lost a sector inside the last, unacknowledged batch and kept a later one reads as damage, and batond
  /// refuses to start.
  bool ignore_batch_frames = false;
  /// lock_table sets a renewed or same-owner re-acquired lease's expiry to now + the TTL asked, even when
  /// that is earlier than before, and logs the re-acquire with that TTL: a late copy of a shorter request
  /// frees the key while its holder counts on a longer TTL.
  bool shorten_lease = false;
  /// lock_table grants a full key of N permits one permit more, in slot N: the count is not checked.
  bool permit_past_count = false;
};

/// The switches of the simulated batond (the simulation runs one at a time, on one thread): all off until
/// the simulation sets them, before it starts the server.
inline planted_defects planted{};

}  // namespace baton::server

#define BATON_PLANTED(flag) (::baton::server::planted.flag)

#else

#define BATON_PLANTED(flag) false

#endif
