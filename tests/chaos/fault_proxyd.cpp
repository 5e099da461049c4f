// SPDX-License-Identifier: Apache-2.0
// fault-proxy: the fault-injecting proxy of tests/support/fault_proxy as a process, driven by commands on
// stdin, so a runner in any language can put it between clients and a server.
//
//   fault-proxy --upstream-port P [--listen ADDR]   prints "fault-proxy listening on ADDR:PORT"
//
// Commands, one per line; each answers one line, "ok" or "error: <reason>":
//   delay MS                  delay every chunk by MS (0: none)
//   drop-replies N hang|reset swallow the next N replies
//   drop-requests N           swallow the next N requests
//   duplicate N MS            send each of the next N requests again MS later on a fresh connection
//   reset                     reset every open connection
//   blackhole on|off          partition: discard everything, pass on no close
//   refuse on|off             reset new connections at once
//   upstream P                new connections go to 127.0.0.1:P
//   stats                     one JSON line of counters
// End of input stops the proxy.

#include "fault_proxy.hpp"

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

namespace {

using baton::test::drop_style;
using baton::test::fault_proxy;

std::string stats_line(const fault_proxy& p) {
  std::ostringstream o;
  o << "{\"accepted\":" << p.connections_accepted() << ",\"refused\":" << p.connections_refused()
    << ",\"reset\":" << p.connections_reset() << ",\"requests_forwarded\":" << p.requests_forwarded()
    << ",\"responses_forwarded\":" << p.responses_forwarded()
    << ",\"requests_dropped\":" << p.requests_dropped() << ",\"responses_dropped\":" << p.responses_dropped()
    << ",\"requests_duplicated\":" << p.requests_duplicated()
    << ",\"bytes_blackholed\":" << p.bytes_blackholed() << "}";
  return o.str();
}

bool parse_on_off(const std::string& word, bool& on) {
  if (word == "on")
    on = true;
  else if (word == "off")
    on = false;
  else
    return false;
  return true;
}

// Applies one command; returns the answer line.
std::string run_command(fault_proxy& p, const std::string& line) {
  std::istringstream in(line);
  std::string cmd, word;
  long a = 0, b = 0;
  bool on = false;
  in >> cmd;
  if (cmd == "delay" && in >> a && a >= 0) {
    p.set_delay(std::chrono::milliseconds(a));
  } else if (cmd == "drop-replies" && in >> a >> word && (word == "hang" || word == "reset")) {
    p.drop_responses(static_cast<int>(a), word == "hang" ? drop_style::hang : drop_style::reset);
  } else if (cmd == "drop-requests" && in >> a) {
    p.drop_requests(static_cast<int>(a));
  } else if (cmd == "duplicate" && in >> a >> b && b >= 0) {
    p.duplicate_requests(static_cast<int>(a), std::chrono::milliseconds(b));
  } else if (cmd == "reset") {
    p.reset_all();
  } else if (cmd == "blackhole" && in >> word && parse_on_off(word, on)) {
    p.set_blackhole(on);
  } else if (cmd == "refuse" && in >> word && parse_on_off(word, on)) {
    p.set_refuse(on);
  } else if (cmd == "upstream" && in >> a && a > 0 && a < 65536) {
    p.set_upstream_port(static_cast<unsigned short>(a));
  } else if (cmd == "stats") {
    return stats_line(p);
  } else {
    return "error: unknown or malformed command: " + line;
  }
  return "ok";
}

}  // namespace

int main(int argc, char** argv) {
  long upstream = -1;
  std::string listen = "127.0.0.1";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string opt = argv[i];
    if (opt == "--upstream-port")
      upstream = std::strtol(argv[i + 1], nullptr, 10);
    else if (opt == "--listen")
      listen = argv[i + 1];
    else
      upstream = -1, i = argc;
  }
  if (upstream <= 0 || upstream > 65535 || argc % 2 == 0) {
    std::fprintf(stderr, "usage: fault-proxy --upstream-port PORT [--listen ADDRESS]\n");
    return 2;
  }
  try {
    fault_proxy proxy(static_cast<unsigned short>(upstream), listen);
    std::printf("fault-proxy listening on %s:%u\n", listen.c_str(), proxy.port());
    std::fflush(stdout);
    for (std::string line; std::getline(std::cin, line);) {
      if (line.empty()) continue;
      std::printf("%s\n", run_command(proxy, line).c_str());
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fault-proxy: %s\n", e.what());
    return 1;
  }
}
