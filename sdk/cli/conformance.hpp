#pragma once
// `baton conformance`: checks the guarantees of docs/protocol.md against a lock server from the outside, with
// raw HTTP/1.1 + JSON requests, and prints one PASS/FAIL line per check and a summary.

#include <chrono>
#include <optional>
#include <string>

namespace baton::cli {

/// Runs every check against `server_url` (http://HOST[:PORT]), printing the table on stdout. With
/// `restart_command`, runs it through /bin/sh after the other checks (it must restart the server on the same
/// URL) and checks what survived; without it, those checks are reported as skipped. Returns exit_code::ok
/// when no check failed (skipped ones do not count as passed), exit_code::internal (70) when any failed.
/// Throws cli_error with exit_code::unavailable (69) when the server cannot be reached at all.
int run_conformance(const std::string& server_url, std::chrono::milliseconds request_timeout,
                    const std::optional<std::string>& restart_command);

}  // namespace baton::cli
