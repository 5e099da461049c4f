// SPDX-License-Identifier: Apache-2.0
#pragma once
// acquire, renew, release and get: one protocol request each (plus the SDK's retries), the server's answer
// printed as one JSON line on stdout. No lease object: these commands exit at once, and a lease handle would
// release the lock when it goes away, so they speak to the client's backend directly.

#include "command_line.hpp"

#include "baton/client.hpp"

#include <boost/asio/awaitable.hpp>

namespace baton::cli {

/// Each runs its command on the client's executor and returns the exit status (0). Failures throw
/// cli_error with the exit status and the line for stderr. Terminal cancellation throws operation_aborted.
boost::asio::awaitable<int> run_acquire(client& c, const acquire_command& cmd);
boost::asio::awaitable<int> run_renew(client& c, const renew_command& cmd);
boost::asio::awaitable<int> run_proclaim(client& c, const proclaim_command& cmd);
boost::asio::awaitable<int> run_release(client& c, const release_command& cmd);
boost::asio::awaitable<int> run_get(client& c, const get_command& cmd);
boost::asio::awaitable<int> run_record_get(client& c, const record_get_command& cmd);
boost::asio::awaitable<int> run_ls(client& c, const ls_command& cmd);
boost::asio::awaitable<int> run_break(client& c, const break_command& cmd);

/// `"key" is held by OWNER (token N, T ms left)`, for a refused acquire.
std::string held_by(const std::string& key, const holder_info& holder);

}  // namespace baton::cli
