// SPDX-License-Identifier: Apache-2.0
#pragma once
// The consumer's use of the SDK, compiled into the consumer executable and into a shared library.

#include <boost/asio/io_context.hpp>

#include <functional>

namespace consumer {

/// Starts the checks on `ioc` against `server_url` (a closed port); calls `done(failures)` when they end.
void start_checks(boost::asio::io_context& ioc, const char* server_url, std::function<void(int)> done);

}  // namespace consumer
