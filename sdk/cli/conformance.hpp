// SPDX-License-Identifier: Apache-2.0
#pragma once
// `baton conformance`: checks the guarantees of docs/protocol.md against a lock server from the outside, with
// raw HTTP/1.1 + JSON requests (or through the SDK's backend for etcd), and prints one PASS/FAIL/SKIP line
// per check and a summary.

#include "baton/config.hpp"

#include <optional>
#include <string>

namespace baton::cli {

/// Runs every check against `client.server_url`, printing the table on stdout: http:// and
/// https://HOST[:PORT] are checked on the wire (https:// with `client.tls`; `client.bearer_token`, when set,
/// goes with every request); etcd:// and etcds:// through the SDK's backend, where the checks only the wire
/// can make are reported as skipped (docs/cli.md, conformance). With `restart_command`, runs it through
/// /bin/sh after the other checks (it must restart the server on the same URL) and checks what survived;
/// without it, those checks are reported as skipped. Returns exit_code::ok when no check failed (skipped ones
/// do not count as passed), exit_code::internal (70) when any failed. Throws cli_error with
/// exit_code::unavailable (69) when the server cannot be reached at all (or its TLS connection is refused),
/// exit_code::access_denied (78) when its first lock request is answered 401 or 403.
int run_conformance(const client_config& client, const std::optional<std::string>& restart_command);

}  // namespace baton::cli
