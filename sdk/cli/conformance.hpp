#pragma once
// `baton conformance`: checks the guarantees of docs/protocol.md against a lock server from the outside, with
// raw HTTP/1.1 + JSON requests, and prints one PASS/FAIL line per check and a summary.

#include <chrono>
#include <string>

namespace baton::cli {

/// Runs every check against `server_url` (http://HOST[:PORT]), printing the table on stdout. Returns
/// exit_code::ok when every check passed, exit_code::internal (70) when any failed. Throws cli_error with
/// exit_code::unavailable (69) when the server cannot be reached at all.
int run_conformance(const std::string& server_url, std::chrono::milliseconds request_timeout);

}  // namespace baton::cli
