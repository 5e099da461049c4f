// SPDX-License-Identifier: Apache-2.0
#pragma once
// Known defects of batond's past, which the deterministic simulation (tests/sim, `baton-sim --bug NAME`)
// switches back on to show that it finds each one. batond never sets any of them: every flag is false
// unless a simulation run asks for it.

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

}  // namespace baton::server
