// SPDX-License-Identifier: Apache-2.0
// baton: the command-line client of the Baton lock protocol (docs/cli.md).

#include "command_line.hpp"
#include "conformance.hpp"
#include "exec_command.hpp"
#include "exit_code.hpp"
#include "lock_commands.hpp"

#include "baton/client.hpp"
#include "baton/config.hpp"
#include "baton/error.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>

namespace {

namespace asio = boost::asio;
using namespace baton::cli;

// Every error is exactly one line, whatever a server put into its message, and shows no URL's password (an
// etcd URL may carry one, and the URL is quoted by usage errors and by the SDK's messages alike).
int report(int code, std::string message) {
  message = baton::without_credentials(message);
  std::replace_if(
      message.begin(), message.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  std::fprintf(stderr, "baton: %s\n", message.c_str());
  return code;
}

asio::awaitable<int> dispatch(baton::client& c, const command& what) {
  if (auto* a = std::get_if<acquire_command>(&what)) co_return co_await run_acquire(c, *a);
  if (auto* r = std::get_if<renew_command>(&what)) co_return co_await run_renew(c, *r);
  if (auto* r = std::get_if<release_command>(&what)) co_return co_await run_release(c, *r);
  if (auto* g = std::get_if<get_command>(&what)) co_return co_await run_get(c, *g);
  if (auto* p = std::get_if<proclaim_command>(&what)) co_return co_await run_proclaim(c, *p);
  if (auto* r = std::get_if<record_get_command>(&what)) co_return co_await run_record_get(c, *r);
  if (auto* l = std::get_if<ls_command>(&what)) co_return co_await run_ls(c, *l);
  if (auto* b = std::get_if<break_command>(&what)) co_return co_await run_break(c, *b);
  co_return co_await run_exec(c, std::get<exec_command>(what));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto call = parse_command_line(std::vector<std::string>(argv + 1, argv + argc),
                                   std::getenv("BATON_SERVER"), std::getenv("BATON_TOKEN"));
    if (call.token_file) call.client.bearer_token = token_from_file(*call.token_file);
    if (auto* help = std::get_if<help_request>(&call.what)) {
      std::cout << help->text << std::flush;
      return exit_code::ok;
    }
    if (auto* conf = std::get_if<conformance_command>(&call.what))
      return run_conformance(call.client, conf->restart_command);
    asio::io_context ioc;
    baton::client c(ioc.get_executor(), call.client);
    int code = exit_code::internal;
    std::exception_ptr failure;
    asio::co_spawn(ioc, dispatch(c, call.what), [&](std::exception_ptr e, int result) {
      failure = e;
      code = result;
      // Renewal and idle connections may still hold work; the command's end is the process's end.
      ioc.stop();
    });
    ioc.run();
    if (failure) std::rethrow_exception(failure);
    return code;
  } catch (const cli_error& e) {
    return report(e.code(), e.what());
  } catch (const baton::exception& e) {
    return report(exit_code_for(e.code()), describe("error", e.code(), e.diagnostic()));
  } catch (const std::exception& e) {
    return report(exit_code::internal, e.what());
  }
}
