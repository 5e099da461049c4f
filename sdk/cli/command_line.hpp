// SPDX-License-Identifier: Apache-2.0
#pragma once
// What `baton` was asked to do: the command line parsed into one command with checked values, or the help
// text to print. Pure (the environment's BATON_SERVER is passed in), so parsing has no side effects and the
// usage errors are decided in one place.

#include "baton/config.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace baton::cli {

using std::chrono::milliseconds;

/// `--help` or `--version`: print `text` on stdout, exit 0.
struct help_request {
  std::string text;
};

struct acquire_command {
  std::string key;
  milliseconds ttl{0};
  std::optional<std::string> owner;  // empty: `<identity>#<random>`
  bool wait = false;
  std::optional<milliseconds> wait_timeout;
  milliseconds lock_delay{0};  // --lock-delay; 0: none
  std::uint32_t permits = 1;   // --permits; more than 1: a permit of a semaphore of that many
};

struct renew_command {
  std::string key;
  std::string owner;
  std::uint64_t token = 0;
  milliseconds ttl{0};
};

struct release_command {
  std::string key;
  std::string owner;
  std::uint64_t token = 0;
};

/// Replaces the value a held lease publishes, keeping its token and expiry (docs/protocol.md, "proclaim").
struct proclaim_command {
  std::string key;
  std::string owner;
  std::uint64_t token = 0;
  std::string value;  // may be empty: clears the value
};

struct get_command {
  std::string key;
};

/// `baton record get KEY`: prints the lock's record (docs/protocol.md, "record").
struct record_get_command {
  std::string key;
};

/// `baton ls [PREFIX]`: the held locks under PREFIX (docs/protocol.md, "list"), as a table or JSON lines.
struct ls_command {
  std::string prefix;        // empty: every key
  std::string after;         // --after: start after this key
  std::size_t limit = 1000;  // --limit: the most locks printed (fetched in pages of up to 1,000)
  bool json = false;
};

/// `baton break KEY [--token N]`: an operator ends the lease on KEY (docs/protocol.md, "break").
struct break_command {
  std::string key;
  std::uint64_t token = 0;  // 0: whichever lease holds it
};

struct exec_command {
  std::string key;
  lease_options lease;  // validated
  bool wait = false;
  std::optional<milliseconds> wait_timeout;
  /// SIGTERM to SIGKILL. Fits the time a lost lease leaves (exec_grace()).
  milliseconds grace{5'000};
  std::uint32_t permits = 1;      // --permits; more than 1: a permit of a semaphore of that many
  std::vector<std::string> argv;  // CMD and its arguments, never empty
};

/// Checks the server against docs/protocol.md (the server is the invocation's client.server_url).
struct conformance_command {
  std::optional<std::string> restart_command;  // --restart-command: run through /bin/sh to restart the server
};

using command =
    std::variant<help_request, acquire_command, renew_command, release_command, get_command, exec_command,
                 conformance_command, proclaim_command, record_get_command, ls_command, break_command>;

struct invocation {
  client_config client;  // server_url, request_timeout and bearer_token from the options; validated
  command what;
  /// --token-file: the caller reads it (token_from_file) into client.bearer_token.
  std::optional<std::string> token_file;
};

/// exec's grace for a validated `lease`: `requested` (--grace) when it fits the time a lost lease leaves
/// between SIGTERM at the local deadline and the earliest server-side expiry (baton::grace_fits); without
/// --grace, 5 s or that time, whichever is shorter. Throws cli_error(exit_code::usage) naming what would fit
/// when `requested` does not.
milliseconds exec_grace(const lease_options& lease, std::optional<milliseconds> requested);

/// Parses `args` (argv without the program name). `env_server` is $BATON_SERVER (null when unset); --server
/// wins over it. Throws cli_error(exit_code::usage) with a one-line message for anything it cannot accept.
/// `env_token` is $BATON_TOKEN (null when unset); --token-file wins over it.
invocation parse_command_line(const std::vector<std::string>& args, const char* env_server,
                              const char* env_token = nullptr);

/// The bearer token in `path` (baton::read_token_file). Throws cli_error(exit_code::usage) when the file
/// cannot be read, is empty, or holds more than one word; the message never contains the token.
std::string token_from_file(const std::string& path);

}  // namespace baton::cli
