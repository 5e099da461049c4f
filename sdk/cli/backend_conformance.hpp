// SPDX-License-Identifier: Apache-2.0
#pragma once
// The checks of `baton conformance` for lock servers it cannot speak docs/protocol.md to (etcd://, etcds://):
// the guarantees that are visible through baton::backend (acquire, renew, release, proclaim, get and
// long-poll), each
// under the name of its HTTP counterpart in an http_*_checks.cpp table. What only the wire shows (statuses,
// bodies, routes, capabilities) has no counterpart here and is reported as skipped.
//
// A library of its own (baton_conformance): the CLI runs it against a URL, and the tests run it against the
// SDK's own test double (baton::testing::memory_backend), which must follow the same rules as a server.

#include "conformance_check.hpp"

#include "baton/backend.hpp"
#include "baton/config.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace baton::cli {

// The backend behind a URL, driven synchronously: run() carries one check's coroutine to its end on an
// io_context of its own. The wrappers turn transport errors into check_failed and note every token issued.
class backend_suite {
 public:
  // Makes a backend (a connection pool, as one client would have) on the suite's executor.
  using backend_factory = std::function<std::shared_ptr<backend>(boost::asio::any_io_executor)>;

  // The backend of `config.server_url` (make_backend()); requests are bounded by at least 10 s.
  backend_suite(const client_config& config, std::optional<std::string> restart_command);
  // The backends `open` makes (one for the suite, one more per open()), requests bounded by
  // `request_timeout`.
  backend_suite(backend_factory open, milliseconds request_timeout,
                std::optional<std::string> restart_command);

  // Runs `check` to its end; rethrows what it threw.
  void run(boost::asio::awaitable<void> check) const;

  std::string key(const std::string& check) const { return prefix_ + "/" + check; }
  // The suite's backend, and another one to the same server, as a second client would have.
  backend& main() const { return *backend_; }
  std::shared_ptr<backend> open() const;

  boost::asio::awaitable<acquire_reply> acquire(const std::string& key, const std::string& owner,
                                                milliseconds ttl, std::string value = {}) const;
  boost::asio::awaitable<acquire_reply> acquire(backend& b, const std::string& key, const std::string& owner,
                                                milliseconds ttl, std::string value = {}) const;
  // An acquire that must be granted.
  boost::asio::awaitable<acquire_reply> must_acquire(const std::string& key, const std::string& owner,
                                                     milliseconds ttl, std::string value = {}) const;
  boost::asio::awaitable<renew_reply> renew(const std::string& key, const std::string& owner,
                                            std::uint64_t token, milliseconds ttl) const;
  // A proclaim the server answered (replaced or lost); check_skipped when the backend does not support it.
  boost::asio::awaitable<proclaim_reply> proclaim(const std::string& key, const std::string& owner,
                                                  std::uint64_t token, std::string value) const;
  // A record write the server answered (written or refused); check_skipped when the backend or server does
  // not keep records.
  boost::asio::awaitable<record_write_reply> write_record(const std::string& key, const std::string& owner,
                                                          std::uint64_t token, std::string value) const;
  // A record read the server answered; check_skipped as write_record.
  boost::asio::awaitable<std::optional<lock_record>> read_record(const std::string& key) const;
  // A batch renewal whose every entry the server answered (renewed or lost).
  boost::asio::awaitable<std::vector<renew_reply>> renew_batch(std::vector<renew_entry> entries) const;
  // A release the server answered (any outcome).
  boost::asio::awaitable<release_outcome> release(const std::string& key, const std::string& owner,
                                                  std::uint64_t token) const;
  // A read the server answered; poll() long-polls for a change from `token`, at most for `bound`.
  boost::asio::awaitable<get_reply> get(const std::string& key) const;
  boost::asio::awaitable<get_reply> poll(backend& b, const std::string& key, std::uint64_t token,
                                         milliseconds bound) const;
  // A long-poll that also answers when the holder's value differs from `value` (feature proclaim).
  boost::asio::awaitable<get_reply> poll_value(backend& b, const std::string& key, std::uint64_t token,
                                               std::string value, milliseconds bound) const;

  std::int64_t max_token() const { return max_token_.load(); }
  const std::optional<std::string>& restart_command() const { return restart_command_; }
  const restart_state& restarted() const;
  void set_restarted(restart_state r) { restart_ = std::move(r); }

  // A remark printed after a passed check's name.
  void note(std::string text) const { note_ = std::move(text); }
  std::string take_note() const { return std::exchange(note_, {}); }

 private:
  void saw_token(std::uint64_t token) const;

  backend_factory open_;
  milliseconds request_timeout_;
  std::string prefix_;
  std::optional<std::string> restart_command_;
  mutable boost::asio::io_context ioc_;
  std::shared_ptr<backend> backend_;
  restart_state restart_;
  mutable std::atomic<std::int64_t> max_token_{0};
  mutable std::string note_;
};

// Whether `url` names a server this mode checks (etcd:// or etcds://).
bool is_backend_url(const std::string& url);

// Reads a key once (conformance's reachability probe): why the server did not answer, or nothing.
std::optional<std::string> unreachable(const backend_suite& s);

// Leaves a lease held and a lock released, runs --restart-command, and waits for the server to answer.
restart_state restart_backend(const backend_suite& s);

// The checks, named after their HTTP counterparts.
namespace on_backend {
using check = boost::asio::awaitable<void> (*)(const backend_suite&);
boost::asio::awaitable<void> concurrent_acquires(const backend_suite& s);
boost::asio::awaitable<void> held_names_holder(const backend_suite& s);
boost::asio::awaitable<void> reacquire_larger_token(const backend_suite& s);
boost::asio::awaitable<void> reacquire_refreshes_expiry(const backend_suite& s);
boost::asio::awaitable<void> renew_wrong_owner(const backend_suite& s);
boost::asio::awaitable<void> renew_wrong_token(const backend_suite& s);
boost::asio::awaitable<void> renew_expired(const backend_suite& s);
boost::asio::awaitable<void> renew_extends(const backend_suite& s);
boost::asio::awaitable<void> shorter_requests_keep_expiry(const backend_suite& s);
boost::asio::awaitable<void> release_conditional(const backend_suite& s);
boost::asio::awaitable<void> superseded_token_refused(const backend_suite& s);
boost::asio::awaitable<void> release_idempotent(const backend_suite& s);
boost::asio::awaitable<void> tokens_increase(const backend_suite& s);
boost::asio::awaitable<void> expiry_on_time(const backend_suite& s);
boost::asio::awaitable<void> never_expires_early(const backend_suite& s);
boost::asio::awaitable<void> long_ttl_held(const backend_suite& s);
boost::asio::awaitable<void> long_poll_release(const backend_suite& s);
boost::asio::awaitable<void> long_poll_expiry(const backend_suite& s);
boost::asio::awaitable<void> long_poll_stale_token(const backend_suite& s);
boost::asio::awaitable<void> value_round_trip(const backend_suite& s);
boost::asio::awaitable<void> renew_batch_mixed(const backend_suite& s);
boost::asio::awaitable<void> renew_batch_superseded(const backend_suite& s);
boost::asio::awaitable<void> proclaim_replaces_value(const backend_suite& s);
boost::asio::awaitable<void> proclaim_refused(const backend_suite& s);
boost::asio::awaitable<void> proclaim_wakes_value_poll(const backend_suite& s);
boost::asio::awaitable<void> record_written(const backend_suite& s);
boost::asio::awaitable<void> record_refused(const backend_suite& s);
boost::asio::awaitable<void> record_outlives_lease(const backend_suite& s);
boost::asio::awaitable<void> record_missing(const backend_suite& s);
boost::asio::awaitable<void> restart_keeps_record(const backend_suite& s);
boost::asio::awaitable<void> restart_keeps_held_lease(const backend_suite& s);
boost::asio::awaitable<void> restart_keeps_proclaim(const backend_suite& s);
boost::asio::awaitable<void> restart_keeps_release(const backend_suite& s);
boost::asio::awaitable<void> restart_tokens_increase(const backend_suite& s);

// Each check under the name of its HTTP counterpart (http_*_checks.cpp), in the order the CLI runs them;
// restart_checks() run after the restart phase.
struct named_check {
  std::string_view name;
  check run;
};
std::span<const named_check> checks();
std::span<const named_check> restart_checks();
// The check named `name` (in either list), or null when the backend's interface cannot express it.
check find(std::string_view name);
}  // namespace on_backend

}  // namespace baton::cli
