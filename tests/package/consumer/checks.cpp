// SPDX-License-Identifier: Apache-2.0
// Uses the installed SDK next to Asio code of its own, both header-only with Asio's defaults: a bad URL is
// refused with the SDK's own error, a client on a closed port reports connection_failed, and the version
// header says the package's version.
#include "checks.hpp"

#include <baton/client.hpp>
#include <baton/version.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

// The package must leave Asio's configuration to the program.
#if defined(BOOST_ASIO_SEPARATE_COMPILATION) || defined(BOOST_BEAST_SEPARATE_COMPILATION) || \
    defined(BOOST_ASIO_NO_DEPRECATED)
#error "baton::sdk imposed an Asio configuration on the program"
#endif

namespace consumer {
namespace {

int fail(const std::string& what) {
  std::printf("consumer: %s\n", what.c_str());
  return 1;
}

int check_version() {
  if (std::string_view(BATON_VERSION_STRING) != BATON_EXPECTED_VERSION)
    return fail(std::string("baton/version.hpp says ") + BATON_VERSION_STRING + ", the package " +
                BATON_EXPECTED_VERSION);
  return 0;
}

int check_bad_url(boost::asio::io_context& ioc) {
  try {
    baton::client bad(ioc.get_executor(), {.server_url = "ftp://nowhere"});
    return fail("a bad URL was accepted");
  } catch (const baton::exception& e) {
    if (e.code() != baton::error::invalid_config) return fail(std::string("a bad URL: ") + e.what());
  }
  return 0;
}

// The program's own timer and the SDK's request share the io_context.
boost::asio::awaitable<int> check_closed_port(std::string url) {
  auto ex = co_await boost::asio::this_coro::executor;
  boost::asio::steady_timer own_timer(ex, std::chrono::milliseconds(1));
  co_await own_timer.async_wait(boost::asio::use_awaitable);
  baton::client_config cfg;
  cfg.server_url = url;
  cfg.retry.max_attempts = 1;
  baton::client c(ex, cfg);
  try {
    co_await c.async_get("k");
    co_return fail("a closed port answered");
  } catch (const baton::exception& e) {
    std::printf("consumer: %s\n", e.what());
    if (e.code() != baton::error::connection_failed) co_return 1;
  }
  co_return 0;
}

}  // namespace

void start_checks(boost::asio::io_context& ioc, const char* server_url, std::function<void(int)> done) {
  int failures = check_version() + check_bad_url(ioc);
  boost::asio::co_spawn(ioc, check_closed_port(server_url),
                        [failures, done](std::exception_ptr e, int f) { done(failures + f + (e ? 1 : 0)); });
}

}  // namespace consumer
