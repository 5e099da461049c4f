// SPDX-License-Identifier: Apache-2.0
#pragma once
// The exit statuses of `baton`, and the one error type the commands throw to end with one of them.
// The numbers follow sysexits.h where one fits, so scripts can tell "try again later" from "fix the call";
// docs/cli.md and `baton --help` list them.

#include <boost/system/error_code.hpp>

#include <stdexcept>
#include <string>

namespace baton::cli {

namespace exit_code {
constexpr int ok = 0;
constexpr int usage = 64;            // EX_USAGE: bad arguments or options
constexpr int refused_request = 65;  // EX_DATAERR: the server refused a value (key, TTL out of its bounds)
constexpr int unavailable = 69;      // EX_UNAVAILABLE: the server could not be reached or cannot store now
constexpr int internal = 70;         // EX_SOFTWARE: an answer that breaks the protocol, or a bug
constexpr int os_error = 71;         // EX_OSERR: fork, pipe or another system call failed
constexpr int not_acquired = 75;     // EX_TEMPFAIL: the lock is held by someone else (or the wait timed out)
constexpr int lease_lost = 76;       // the lease ended before the command did (or a renew was refused)
constexpr int not_owner = 77;        // release refused: another owner or a newer token holds the lock
constexpr int access_denied = 78;    // EX_CONFIG: no valid token (401) or the token may not do this (403)
constexpr int cannot_execute = 126;  // exec: CMD exists but could not be run (as in sh, env, timeout)
constexpr int command_not_found = 127;  // exec: CMD was not found
}  // namespace exit_code

/// Ends a command: `message` becomes the one line `baton: <message>` on stderr, `code` the exit status.
class cli_error : public std::runtime_error {
 public:
  cli_error(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/// The exit status for an error the SDK reported.
int exit_code_for(const boost::system::error_code& ec);

/// `what: <ec message>[: diagnostic]` on one line, for an error the SDK reported.
std::string describe(const std::string& what, const boost::system::error_code& ec,
                     const std::string& diagnostic);

}  // namespace baton::cli
