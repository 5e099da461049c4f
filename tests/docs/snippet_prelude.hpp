// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the snippets of docs/sdk.md take as given, declared so that they compile (tests/docs/snippets.py): the
// user's own work and resources, never defined. The snippets themselves use only the SDK's public headers.

#include "baton/client.hpp"
#include "baton/election.hpp"
#include "baton/testing.hpp"

#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/test/unit_test.hpp>  // BOOST_TEST, in the snippets that are run

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace snippet_prelude {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// The work a lease guards: a report written with the lease's fencing token, a leader's job.
asio::awaitable<int> write_report(std::uint64_t token);
asio::awaitable<void> run_scheduler();
// Where a follower sends requests.
void route_to(const std::string& address);
// The user's log.
template <class... Fields>
void log(Fields&&... fields);
// A database that checks the fencing token in its own statement (docs/fencing.md).
struct database {
  template <class... Args>
  void execute(std::string_view sql, Args&&... args);
};
extern database db;

}  // namespace snippet_prelude
