// SPDX-License-Identifier: Apache-2.0
// The consumer's executable: Asio of its own, written against Asio's defaults (io_context::work is a
// deprecated feature, there unless BOOST_ASIO_NO_DEPRECATED), running the checks linked in or from a library.
#include "checks.hpp"

#include <boost/asio/io_context.hpp>

#include <cstdio>
#include <optional>

#if defined(BOOST_ASIO_SEPARATE_COMPILATION) || defined(BOOST_ASIO_NO_DEPRECATED)
#error "the consumer must build with Asio's defaults"
#endif

int main(int argc, char** argv) {
  boost::asio::io_context ioc;
  std::optional<boost::asio::io_context::work> work(std::in_place, ioc);
  int failures = -1;
  consumer::start_checks(ioc, argc > 1 ? argv[1] : "http://127.0.0.1:1", [&](int f) {
    failures = f;
    work.reset();
  });
  ioc.run();
  std::printf("consumer: %s\n", failures == 0 ? "passed" : "failed");
  return failures == 0 ? 0 : 1;
}
