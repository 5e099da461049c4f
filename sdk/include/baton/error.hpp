// SPDX-License-Identifier: Apache-2.0
#pragma once
// Errors of the Baton SDK: one enum, one error category, and an exception that carries both the code and the
// server's own explanation (the diagnostic). Every failure of an SDK call, cancellation included, is thrown
// as baton::exception (awaitable forms) or passed as the error_code (completion-token forms). Timeouts
// compare equal to std::errc::timed_out, a refusal for a held lock to std::errc::device_or_resource_busy.

#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <iosfwd>
#include <string>
#include <string_view>
#include <type_traits>

namespace baton {

enum class error {
  held = 1,             // acquire refused: another owner holds the lock
  lease_lost,           // the lease ended before its holder released it (deadline passed or renew refused)
  not_owner,            // release refused: another owner or a newer token holds the lock
  acquire_timeout,      // an acquire request got no answer in time
  release_timeout,      // a release request got no answer in time
  request_timeout,      // any other request got no answer in time
  wait_timeout,         // acquire-and-wait gave up at its wait deadline
  connection_failed,    // could not connect, or the connection broke mid-request
  bad_request,          // the server refused the request as malformed (400): a caller bug
  storage_unavailable,  // 503 storage_unavailable: the server could not make the change durable. Like a lost
                        // reply, the outcome is unknown (the change may surface, after a restart for one);
                        // the SDK retries the same request
  server_error,         // the server answered with an unexpected status
  protocol_error,       // the server's answer does not follow the protocol
  invalid_config,       // a bad URL, option or argument
  released,             // the lease was already released
  tls_failed,           // TLS refused: untrusted certificate, host name mismatch, client certificate refused,
                        // or a server that does not speak TLS. Not transient: retrying does not fix it
  unauthorized,         // the server wants a valid bearer token (401): none was given or it is not known
  forbidden,            // the token is valid but may not use this key, or only read it (403)
  server_busy,          // the server is at a limit (429 rate_limited, 503 too_many_waiters or
                        // too_many_connections): it changed nothing; retry later
  empty_handle,         // the lease or client handle is empty (default-constructed or moved from)
  shut_down,            // the client is shut down (client::shutdown): it takes no new leases
  stale_token,          // a lock record write refused: the record was written with a larger token
  not_held,             // a break found no lease on the key (free, or its lease expired): nothing changed
  token_mismatch,       // a break named another token than the holder's: nothing changed
  permits_mismatch,  // an acquire asked another permit count than the one the key's holders and waiters use
                     // (a lock is a key of 1 permit): nothing changed
};
// Cancellation is reported as boost::asio::error::operation_aborted (compare with it; it is not in this
// enum).

const boost::system::error_category& error_category() noexcept;

/// The enumerator's name ("lease_lost"), for logs and metrics labels; operator<< writes the same. A value
/// outside the enum gives "unknown" (operator<< writes "error(<number>)").
std::string_view to_string(error e) noexcept;
std::ostream& operator<<(std::ostream& os, error e);

inline boost::system::error_code make_error_code(error e) noexcept {
  return {static_cast<int>(e), error_category()};
}

/// True for errors where the request may not have reached the server, its answer was lost, or the server
/// could not act on it for now (a 503 or 429), so a retry is the right reaction (every protocol request is
/// safe to retry). After such an error the request's outcome may be unknown: an acquire may have been
/// granted, a renew may have extended the lease, a release may have freed the lock.
bool is_transient(const boost::system::error_code& ec) noexcept;

/// The exception the SDK's coroutines throw: the error code plus the server's message, if any. what() is
/// "<diagnostic>: <the code's message>", or just one of them when the other is empty or already contains it.
class exception : public boost::system::system_error {
 public:
  exception(boost::system::error_code ec, std::string diagnostic);
  explicit exception(error e, std::string diagnostic = {})
      : exception(make_error_code(e), std::move(diagnostic)) {}
  explicit exception(boost::system::error_code ec) : exception(ec, std::string()) {}

  /// What the server (or the SDK) said about this error, for people; may be empty.
  const std::string& diagnostic() const noexcept { return diagnostic_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string diagnostic_;
  std::string what_;
};

}  // namespace baton

template <>
struct boost::system::is_error_code_enum<baton::error> : std::true_type {};
