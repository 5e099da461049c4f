// SPDX-License-Identifier: Apache-2.0
#include "exit_code.hpp"

#include "baton/error.hpp"

namespace baton::cli {

int exit_code_for(const boost::system::error_code& ec) {
  if (ec.category() != error_category()) return exit_code::internal;
  // What the SDK retries and still failed means the server was not there for us.
  if (is_transient(ec)) return exit_code::unavailable;
  switch (static_cast<error>(ec.value())) {
    case error::held:
    case error::wait_timeout:
    case error::permits_mismatch:  // the key is held or awaited with another permit count
      return exit_code::not_acquired;
    case error::lease_lost:
    case error::released:
      return exit_code::lease_lost;
    case error::not_owner:
    case error::not_held:        // a break of a free key
    case error::token_mismatch:  // a break naming another lease
      return exit_code::not_owner;
    case error::bad_request:
      return exit_code::refused_request;
    case error::invalid_config:
      return exit_code::usage;
    case error::tls_failed:  // the server could not be used: its certificate, or ours, was refused
      return exit_code::unavailable;
    case error::unauthorized:
    case error::forbidden:
      return exit_code::access_denied;
    default:
      return exit_code::internal;
  }
}

std::string describe(const std::string& what, const boost::system::error_code& ec,
                     const std::string& diagnostic) {
  std::string line = what + ": " + ec.message();
  if (!diagnostic.empty()) line += ": " + diagnostic;
  return line;
}

}  // namespace baton::cli
