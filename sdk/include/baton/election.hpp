// SPDX-License-Identifier: Apache-2.0
#pragma once
// Leader election on one lock key: whoever holds the key leads, and publishes a value (its address, say)
// with the lease for the others to read.
//
//   baton::election e(c, "services/scheduler");
//   baton::lease l = co_await e.async_campaign("10.0.0.7:8080");  // waits until this process leads
//   co_await baton::with_lease(l, lead());                         // stops leading when the lease is lost
//   co_await e.async_resign();
//
//   // elsewhere: follow the leader
//   baton::leader_stream leaders = e.observe();
//   for (;;) route_to(co_await leaders.async_next());   // now, then at each change (empty: nobody leads)

#include "baton/client.hpp"
#include "baton/completion.hpp"
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
}  // namespace detail

/// A leader as the lock server reports it.
struct leader_info {
  /// The owner string of the leader's lease.
  std::string owner;
  /// The leader's fencing token: a new leader (or the same process elected again) has a larger one.
  std::uint64_t token = 0;
  /// What the leader published with async_campaign() or async_proclaim() (empty if nothing).
  std::string value{};
};

/// The leaders of one election, as they change (election::observe()). The first async_next() completes at
/// once with the current leader; each later one completes at the next change after the leader the previous
/// call returned: another leader (a different token), nobody (empty), or the same leader with another value.
/// The stream keeps its position, so no change is missed between two calls: a change made while nobody was
/// waiting is reported by the next call. Changes that come and go between two reads are folded into the
/// newest (a reader that is slow sees the current leader, not each one between): what a router needs.
/// Waits on the server's long-poll (an etcd watch), never by polling; transient errors are retried with the
/// client's backoff, for as long as it takes. Copies share their position. The stream keeps the client's
/// state alive, not the client object.
class leader_stream {
 public:
  /// `void(error_code, std::optional<leader_info>)`. Cancellable (terminal, partial or total: the wait ends
  /// with operation_aborted and the stream keeps its position). One call at a time.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, std::optional<leader_info>))
                Token = default_token_t>
  auto async_next(Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::optional<leader_info>)>(
        [](auto handler, std::shared_ptr<detail::election_state> s,
           std::shared_ptr<detail::leader_stream_position> p) {
          auto* diag = detail::diagnostic_slot(handler);
          start_next(std::move(s), std::move(p), diag, std::move(handler));
        },
        token, state_, position_);
  }

 private:
  friend class election;
  leader_stream(std::shared_ptr<detail::election_state> s, std::shared_ptr<detail::leader_stream_position> p);
  static void start_next(
      std::shared_ptr<detail::election_state> s, std::shared_ptr<detail::leader_stream_position> p,
      std::string* diag,
      boost::asio::any_completion_handler<void(boost::system::error_code, std::optional<leader_info>)> h);
  std::shared_ptr<detail::election_state> state_;
  std::shared_ptr<detail::leader_stream_position> position_;
};

/// Leader election on `key` of a client. Each operation runs on the client's executor and completes like the
/// client's (completion.hpp): one function async_x(args..., token), errors through the handler. The election
/// keeps the client's state alive, not the client object: it may outlive a moved client.
class election {
 public:
  election(client& c, std::string key);
  ~election();
  election(election&&) noexcept;
  election& operator=(election&&) noexcept;
  election(const election&) = delete;
  election& operator=(const election&) = delete;

  const std::string& key() const;

  /// Waits until this process leads, then completes with the leadership lease, `value` published with it:
  /// `void(error_code, lease)`. It is client::async_acquire of the key with `options.value = value`
  /// (`options` as for any lease; its owner is new for each campaign unless set). Between tries it
  /// long-polls the key, so it wakes the moment the leader resigns or loses its lease. Cancellable like
  /// async_acquire: a cancelled campaign leaves no lease behind. error::invalid_config for a bad value or
  /// options, and when this election already holds an active lease from an earlier campaign (resign first).
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, lease)) Token = default_token_t>
  auto async_campaign(std::string value, lease_options options, Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, lease)>(
        [](auto handler, std::shared_ptr<detail::election_state> s, std::string v, lease_options o) {
          auto* diag = detail::diagnostic_slot(handler);
          start_campaign(std::move(s), std::move(v), o, diag, std::move(handler));
        },
        token, state_, std::move(value), options);
  }
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, lease)) Token>
  auto async_campaign(std::string value, Token&& token) {
    return async_campaign(std::move(value), lease_options{}, std::forward<Token>(token));
  }
  boost::asio::awaitable<lease> async_campaign(std::string value);

  /// Steps down: `void(error_code)`. Releases the lease the last campaign of this object returned, if it is
  /// still held (the lease handle then reads `released`, and its guarded work sees it released). Does
  /// nothing when there is none. Shielded from cancellation like lease::async_release. An error means the
  /// server could not be reached within the retries (the lease is then freed by its TTL; resign may be
  /// called again).
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code)) Token = default_token_t>
  auto async_resign(Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [](auto handler, std::shared_ptr<detail::election_state> s) {
          auto* diag = detail::diagnostic_slot(handler);
          start_resign(std::move(s), diag, std::move(handler));
        },
        token, state_);
  }

  /// Publishes `value` in place of the one the leadership lease carries, keeping the lease and its fencing
  /// token (etcd's Election.Proclaim): `void(error_code)`. Followers' streams report it as a change; the
  /// lease's value() returns it. Conditional on the lease's owner and token, like a renew:
  /// error::lease_lost when the server no longer holds it for this leader (nothing changed there).
  /// error::invalid_config when this election does not lead (no campaign, resigned, or its lease no longer
  /// active), for a value the protocol refuses, and when the server does not support proclaim
  /// (docs/protocol.md, "proclaim"; nothing is sent then). Transport errors are retried (a proclaim is
  /// idempotent) up to retry_policy.max_attempts. Cancellable; a request already sent may still take effect.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code)) Token = default_token_t>
  auto async_proclaim(std::string value, Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [](auto handler, std::shared_ptr<detail::election_state> s, std::string v) {
          auto* diag = detail::diagnostic_slot(handler);
          start_proclaim(std::move(s), std::move(v), diag, std::move(handler));
        },
        token, state_, std::move(value));
  }

  /// The current leader, or empty when nobody leads: `void(error_code, std::optional<leader_info>)`.
  /// Retries transient errors like client::async_get.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, std::optional<leader_info>))
                Token = default_token_t>
  auto async_leader(Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::optional<leader_info>)>(
        [](auto handler, std::shared_ptr<detail::election_state> s) {
          auto* diag = detail::diagnostic_slot(handler);
          start_leader(std::move(s), diag, std::move(handler));
        },
        token, state_);
  }

  /// A stream of this election's leaders: the current one, then every change (leader_stream).
  leader_stream observe();

 private:
  static void start_campaign(std::shared_ptr<detail::election_state> s, std::string value,
                             lease_options options, std::string* diag,
                             boost::asio::any_completion_handler<void(boost::system::error_code, lease)> h);
  static void start_resign(std::shared_ptr<detail::election_state> s, std::string* diag,
                           boost::asio::any_completion_handler<void(boost::system::error_code)> h);
  static void start_proclaim(std::shared_ptr<detail::election_state> s, std::string value, std::string* diag,
                             boost::asio::any_completion_handler<void(boost::system::error_code)> h);
  static void start_leader(
      std::shared_ptr<detail::election_state> s, std::string* diag,
      boost::asio::any_completion_handler<void(boost::system::error_code, std::optional<leader_info>)> h);
  std::shared_ptr<detail::election_state> state_;
};

inline boost::asio::awaitable<lease> election::async_campaign(std::string value) {
  return async_campaign(std::move(value), lease_options{}, default_token);
}

}  // namespace baton
