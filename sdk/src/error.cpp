// SPDX-License-Identifier: Apache-2.0
#include "baton/error.hpp"

namespace baton {
namespace {

class category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "baton"; }
  std::string message(int ev) const override {
    switch (static_cast<error>(ev)) {
      case error::held:
        return "the lock is held by another owner";
      case error::lease_lost:
        return "the lease was lost";
      case error::not_owner:
        return "the lock is held by another owner or token";
      case error::acquire_timeout:
        return "acquire timed out";
      case error::release_timeout:
        return "release timed out";
      case error::request_timeout:
        return "request timed out";
      case error::wait_timeout:
        return "gave up waiting for the lock";
      case error::connection_failed:
        return "connection to the lock server failed";
      case error::bad_request:
        return "the lock server refused the request as malformed";
      case error::storage_unavailable:
        return "the lock server could not store the change (it may still take effect)";
      case error::server_error:
        return "unexpected answer from the lock server";
      case error::protocol_error:
        return "the lock server's answer does not follow the protocol";
      case error::invalid_config:
        return "invalid configuration";
      case error::released:
        return "the lease was released";
      case error::tls_failed:
        return "TLS connection to the lock server failed";
      case error::unauthorized:
        return "the lock server refused the bearer token (missing or not valid)";
      case error::forbidden:
        return "the bearer token does not allow this operation on this key";
      case error::server_busy:
        return "the lock server is at a limit (rate, connections or waiters)";
      case error::empty_handle:
        return "empty handle (default-constructed or moved from)";
      case error::shut_down:
        return "the client is shut down";
      case error::stale_token:
        return "the lock's record was written with a larger token";
      case error::not_held:
        return "the lock is not held";
      case error::token_mismatch:
        return "the lock is held with another token";
      case error::permits_mismatch:
        return "the key is in use with another permit count";
    }
    return "unknown baton error";
  }

  boost::system::error_condition default_error_condition(int ev) const noexcept override {
    namespace errc = boost::system::errc;
    switch (static_cast<error>(ev)) {
      case error::acquire_timeout:
      case error::release_timeout:
      case error::request_timeout:
      case error::wait_timeout:
        return boost::system::errc::make_error_condition(errc::timed_out);
      case error::held:
      case error::not_owner:
      case error::permits_mismatch:
        return boost::system::errc::make_error_condition(errc::device_or_resource_busy);
      case error::connection_failed:
        return boost::system::errc::make_error_condition(errc::connection_refused);
      case error::unauthorized:
      case error::forbidden:
        return boost::system::errc::make_error_condition(errc::permission_denied);
      case error::invalid_config:
      case error::bad_request:
      case error::empty_handle:
        return boost::system::errc::make_error_condition(errc::invalid_argument);
      case error::server_busy:
        return boost::system::errc::make_error_condition(errc::resource_unavailable_try_again);
      case error::tls_failed:
      case error::protocol_error:
        return boost::system::errc::make_error_condition(errc::protocol_error);
      default:
        return {ev, *this};
    }
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
    case error::release_timeout:
    case error::request_timeout:
    case error::connection_failed:
    case error::storage_unavailable:
    case error::server_busy:
    case error::server_error:
      return true;
    default:
      return false;
  }
}

exception::exception(boost::system::error_code ec, std::string diagnostic)
    : boost::system::system_error(ec), diagnostic_(std::move(diagnostic)) {
  const std::string message = ec.message();
  if (diagnostic_.empty())
    what_ = message;
  else if (diagnostic_.find(message) != std::string::npos)
    what_ = diagnostic_;
  else
    what_ = diagnostic_ + ": " + message;
}

}  // namespace baton
