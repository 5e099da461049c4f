// SPDX-License-Identifier: Apache-2.0
#pragma once
// `baton-agent run-now NAME --config FILE`: asks the agent running with that configuration, through its
// sidecar API (POST /v1/jobs/{name}/run), to start a run of a job now.

#include "config.hpp"

#include <chrono>
#include <string>

namespace baton::agent {

/// What run-now prints and exits with (docs/agent.md).
struct run_now_answer {
  /// 0: a run started; 1: the agent refused (unknown job, a run going, per-job mode, a wrong token) or
  /// could not be asked; 3: the agent does not lead (the message names the leader).
  int exit_status = 1;
  /// One line for stdout (started) or stderr (everything else).
  std::string message;
};

/// Calls the sidecar at `config.listen` (0.0.0.0 and [::] are reached on loopback) with the configuration's
/// resign token, bounded by `timeout`. Blocking; never throws for what the agent answers or a failed
/// connection, only for a `listen` that names no reachable port (port 0: std::invalid_argument).
run_now_answer run_now_via_sidecar(const agent_config& config, const std::string& job,
                                   std::chrono::milliseconds timeout);

}  // namespace baton::agent
