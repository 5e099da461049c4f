// Links against the installed SDK and exercises it: a bad URL is refused with the SDK's own error, and a
// client on a closed port reports connection_failed.
#include <baton/client.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  boost::asio::io_context ioc;
  try {
    baton::client bad(ioc.get_executor(), {.server_url = "ftp://nowhere"});
    std::puts("consumer: a bad URL was accepted");
    return 1;
  } catch (const baton::exception& e) {
    if (e.code() != baton::error::invalid_config) return 1;
  }
  baton::client_config cfg;
  cfg.server_url = argc > 1 ? argv[1] : "http://127.0.0.1:1";
  cfg.retry.max_attempts = 1;
  baton::client c(ioc.get_executor(), cfg);
  int status = 1;
  boost::asio::co_spawn(ioc, c.get("k"), [&](std::exception_ptr e, std::optional<baton::holder_info>) {
    try {
      if (e) std::rethrow_exception(e);
    } catch (const baton::exception& ex) {
      if (ex.code() == baton::error::connection_failed) status = 0;
      std::printf("consumer: %s\n", ex.what());
    }
  });
  ioc.run();
  return status;
}
