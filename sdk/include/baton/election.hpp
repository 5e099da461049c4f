// SPDX-License-Identifier: Apache-2.0
#pragma once
// Leader election on one lock key: whoever holds the key leads, and publishes a value (its address, say)
// with the lease for the others to read.
//
//   baton::election e(c, "services/scheduler");
//   baton::lease l = co_await e.campaign("10.0.0.7:8080");  // waits until this process leads
//   co_await baton::with_lease(l, lead());                   // stops leading when the lease is lost
//   co_await e.resign();
//
//   // elsewhere: follow the leader
//   baton::leader_stream leaders = e.follow();
//   for (;;) route_to(co_await leaders.next());               // now, then each new leader (empty: none)

#include "baton/client.hpp"
#include "baton/config.hpp"
#include "baton/lease.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace baton {

namespace detail {
struct election_state;
struct leader_stream_position;
}

/// A leader as the lock server reports it.
struct leader_info {
  /// The owner string of the leader's lease.
  std::string owner;
  /// The leader's fencing token: a new leader (or the same process elected again) has a larger one.
  std::uint64_t token = 0;
  /// What the leader published with campaign() (empty if nothing).
  std::string value{};
};

/// A follower's view of an election (election::follow()). The first next() returns the leader as it is then
/// (empty when nobody leads); each later next() returns the first leader that differs from the one it
/// returned last (another token, or empty), waiting on the server's long-poll for as long as it takes. The
/// stream remembers what it returned, so a loop over next() never misses the current leader: a change made
/// while the caller was busy between two calls is returned at once by the next one. Leaders that came and
/// went between two calls are reported as the latest of them (the server reports its holder now, not a
/// history). Errors, retries and cancellation as election::observe(). Copies share their position; the
/// election's client must outlive the stream's operations.
class leader_stream {
 public:
  boost::asio::awaitable<std::optional<leader_info>> next();

 private:
  friend class election;
  leader_stream(std::shared_ptr<detail::election_state> s, std::shared_ptr<detail::leader_stream_position> p);
  std::shared_ptr<detail::election_state> state_;
  std::shared_ptr<detail::leader_stream_position> position_;
};

/// An election on `key` through `client`: campaign() to lead, resign() to step down, leader() and observe()
/// to follow. Leadership is a lease, so it ends when the lease is lost (a leader must act only while its
/// lease is active, e.g. under with_lease) and every leader has a larger fencing token than the one before.
///
/// The value needs a server that keeps values (docs/protocol.md, "value"): batond, or etcd. Against a server
/// from before values, leader() and observe() report an empty value.
///
/// Errors are thrown as baton::exception; cancellation as
/// baton::exception(boost::asio::error::operation_aborted). Every operation runs on the client's executor and
/// completes on the caller's. Threads: the operations may be awaited from any thread; the election object
/// itself may be moved but is meant for one campaigner at a time. Lifetime: the client must outlive the
/// election and its operations; the election object itself may be destroyed or moved while its operations run
/// (they share its state). A moved-from election throws baton::exception(error::empty_handle).
class election {
 public:
  election(client& c, std::string key);
  ~election();
  election(election&&) noexcept;
  election& operator=(election&&) noexcept;
  election(const election&) = delete;
  election& operator=(const election&) = delete;

  const std::string& key() const;

  /// Waits until this process leads, then returns the leadership lease with `value` published with it:
  /// client::acquire of the key with `options.value = value` (`options` as for any lease; its owner is new
  /// for each campaign unless set). Between tries it long-polls the key, so it wakes the moment the leader
  /// resigns or loses its lease. Cancellable like client::acquire: a cancelled campaign leaves no lease
  /// behind. Throws error::invalid_config for a bad value or options, and when this election already holds
  /// an active lease from an earlier campaign (resign first).
  boost::asio::awaitable<lease> campaign(std::string value, lease_options options);
  boost::asio::awaitable<lease> campaign(std::string value);

  /// Steps down: releases the lease the last campaign() of this object returned, if it is still held (the
  /// lease handle then reads `released`, and its guarded work sees it released). Does nothing when there is
  /// none. Shielded from cancellation like lease::release. Throws baton::exception when the server cannot be
  /// reached within the retries (the lease is then freed by its TTL).
  boost::asio::awaitable<void> resign();

  /// The current leader, or empty when nobody leads. Retries transient errors like client::get.
  boost::asio::awaitable<std::optional<leader_info>> leader();

  /// Completes at the next change of leader: a leader whose token differs from `known_token` (0: nobody), or
  /// empty when the leader is gone. Without `known_token`, the change is counted from the leader current when
  /// observe() is called. Waits on the server's long-poll (an etcd watch), never by polling; transient errors
  /// are retried with the client's backoff, for as long as it takes. Cancellable: terminal cancellation ends
  /// the wait and throws operation_aborted.
  boost::asio::awaitable<std::optional<leader_info>> observe(std::optional<std::uint64_t> known_token);
  boost::asio::awaitable<std::optional<leader_info>> observe();

  /// A stream of this election's leaders: the current one, then every change (leader_stream). The simplest
  /// way to follow: it keeps the last token for you.
  leader_stream follow();

 private:
  std::shared_ptr<detail::election_state> state_;
};

}  // namespace baton
