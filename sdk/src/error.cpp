#include "baton/error.hpp"

namespace baton {
namespace {

class category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "baton"; }
  std::string message(int ev) const override {
    switch (static_cast<error>(ev)) {
      case error::held: return "the lock is held by another owner";
      case error::lease_lost: return "the lease was lost";
      case error::not_owner: return "the lock is held by another owner or token";
      case error::acquire_timeout: return "acquire timed out";
      case error::renew_timeout: return "renew timed out";
      case error::release_timeout: return "release timed out";
      case error::request_timeout: return "request timed out";
      case error::wait_timeout: return "gave up waiting for the lock";
      case error::connection_failed: return "connection to the lock server failed";
      case error::bad_request: return "the lock server refused the request as malformed";
      case error::storage_unavailable:
        return "the lock server could not store the change (it may still take effect)";
      case error::server_error: return "unexpected answer from the lock server";
      case error::protocol_error: return "the lock server's answer does not follow the protocol";
      case error::invalid_config: return "invalid configuration";
      case error::released: return "the lease was released";
      case error::tls_failed: return "TLS connection to the lock server failed";
      case error::unauthorized: return "the lock server refused the bearer token (missing or not valid)";
      case error::forbidden: return "the bearer token does not allow this operation on this key";
      case error::server_busy: return "the lock server is at a limit (rate, connections or waiters)";
    }
    return "unknown baton error";
  }
};

}  // namespace

const boost::system::error_category& error_category() noexcept {
  static const category instance;
  return instance;
}

bool is_transient(const boost::system::error_code& ec) noexcept {
  if (ec.category() != error_category()) return false;
  switch (static_cast<error>(ec.value())) {
    case error::acquire_timeout:
    case error::renew_timeout:
    case error::release_timeout:
    case error::request_timeout:
    case error::connection_failed:
    case error::storage_unavailable:
    case error::server_busy:
    case error::server_error: return true;
    default: return false;
  }
}

}  // namespace baton
