// SPDX-License-Identifier: Apache-2.0
#pragma once
// The renewals of one client's leases, driven from one ordered index (docs/design.md, "One renewal scheduler
// per client"). Private to the SDK.
//
// Each active lease is filed in the index at the next instant it must be looked at: when its renewal falls
// due, or, while a renew is out or it waits for the server to come back, its local deadline. One timer of the
// client (and one boot-alarm instant) waits for the earliest; when it fires, one pass runs the state machine
// (lease_fsm::poll) of every lease that is due, in instant order: it declares the loss, files the lease
// again, or sends its renew (into the client's batch, or alone). The answer comes back by callback and the
// lease is filed again. No coroutine frame and no timer per lease, and the leases whose deadline is shared
// (those of one batch) are declared lost in one pass.

#include "baton/backend.hpp"
#include "baton/detail/lease_fsm.hpp"
#include "boot_alarm.hpp"
#include "renew_batcher.hpp"
#include "timer.hpp"

#include <boost/asio/cancellation_signal.hpp>

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>

namespace baton::detail {

struct client_shared;
struct lease_core;

class renewal_scheduler {
 public:
  using index = std::multimap<clock::time_point, std::shared_ptr<lease_core>>;
  using probe_list = std::list<lease_core*>;

  /// Where one lease's renewal stands; a member of the lease. Executor only.
  struct slot {
    bool running = false;     // started, not yet ended
    bool requesting = false;  // a renew is out (in a batch or alone)
    bool filed = false;       // `at` is its place in the index
    bool probe_waiting = false;
    index::iterator at;
    probe_list::iterator probe_at;  // its place among the leases waiting for the server, while probe_waiting
    clock::time_point sent{};       // when the renew that is out fell due
    std::optional<renew_batcher::place> place;        // its entry in a batch, while one is out
    boost::asio::cancellation_signal cancel_request;  // the renew out alone, if any
  };

  explicit renewal_scheduler(client_shared& cs) : cs_(cs) {}
  renewal_scheduler(const renewal_scheduler&) = delete;
  renewal_scheduler& operator=(const renewal_scheduler&) = delete;

  /// Starts renewing `c` (just acquired). Executor only.
  void start(const std::shared_ptr<lease_core>& c);
  /// Stops renewing `c`, if it still is: it leaves the index, a renew it has out is withdrawn (the answer is
  /// ignored). Release, abandonment, a loss the server showed. Executor only.
  void stop(lease_core& c);
  /// The answer to `c`'s renew. Executor only.
  void answered(lease_core& c, renew_reply r);
  /// Drops every lease without running anything: the io_context shuts down (nothing runs any more, and the
  /// index must not keep the leases, which keep the client, alive).
  void drop_all();

  /// Leases being renewed.
  std::size_t running() const { return running_; }

 private:
  // One look at `c` at `now` (it is not filed): declare the loss, file it again, or send its renew.
  void step(const std::shared_ptr<lease_core>& c, clock::time_point now);
  // Sends `c`'s renew, due at `now`.
  void send(const std::shared_ptr<lease_core>& c, clock::time_point now);
  // Ends `c`'s renewal: out of the index and the probe list, its renew withdrawn, its roles handed on.
  void end(lease_core& c);
  void file(const std::shared_ptr<lease_core>& c, clock::time_point at);
  void unfile(lease_core& c);
  void probe_wait(lease_core& c);
  void leave_probe_wait(lease_core& c);
  // Every lease waiting for the server looks again now (the server answered).
  void wake_probe_waiters();
  // The waiting lease whose deadline comes last looks again now, to probe in turn; returns it, or null.
  lease_core* wake_latest_probe_waiter();
  // Runs every lease that is due, then waits for the next.
  void run_due();
  // Arms the timer (and the boot alarm) for the earliest filed instant, or disarms both.
  void arm();

  client_shared& cs_;
  index index_;
  probe_list probe_waiters_;
  std::size_t running_ = 0;
  std::optional<timer> timer_;  // made at the first filing
  clock::time_point armed_at_ = clock::time_point::max();
  std::uint64_t generation_ = 0;  // of the timer's current wait; a completion of an older one is stale
  boot_wake boot_;
  bool in_pass_ = false;

 public:
  // The outage (docs/design.md, "One renew at a time in an outage"): the last renew answered came back
  // without an answer. While it lasts, one lease renews (the prober), the others wait for the server to
  // answer or for their deadline. Executor only.
  bool outage = false;
  const lease_core* prober = nullptr;  // the lease probing, or none
  const lease_core* heir = nullptr;    // a waiting lease woken to probe next, until it runs
};

}  // namespace baton::detail
