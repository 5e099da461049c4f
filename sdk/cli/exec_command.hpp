// SPDX-License-Identifier: Apache-2.0
#pragma once
// `baton exec`: runs a command under a lock, like `consul lock` or `etcdctl lock`, but stops the command's
// whole process group the moment the lease is lost, not after the fact.

#include "command_line.hpp"

#include "baton/client.hpp"

#include <boost/asio/awaitable.hpp>

namespace baton::cli {

/// Acquires the lease (renewed by the SDK), runs the command in its own process group, supervises it and
/// releases the lease when it ends. Returns the exit status documented in docs/cli.md. Failures before the
/// command starts throw cli_error. Must run on the client's executor, in the only thread that forks.
boost::asio::awaitable<int> run_exec(client& c, const exec_command& cmd);

}  // namespace baton::cli
