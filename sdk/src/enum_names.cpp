// SPDX-License-Identifier: Apache-2.0
// The names of the SDK's public enums, for logs, metrics labels and test output. Each switch lists every
// enumerator and has no default, so a new one without a name is a compiler warning (-Wswitch).

#include "baton/backend.hpp"
#include "baton/config.hpp"
#include "baton/error.hpp"
#include "baton/lease_state.hpp"

#include <ostream>
#include <type_traits>

namespace baton {

namespace {

// Writes the name, or `type(<number>)` for a value outside the enum.
template <class E>
std::ostream& write_name(std::ostream& os, E e, std::string_view type) {
  const auto name = to_string(e);
  if (name != "unknown") return os << name;
  return os << type << '(' << static_cast<long long>(static_cast<std::underlying_type_t<E>>(e)) << ')';
}

}  // namespace

std::string_view to_string(error e) noexcept {
  switch (e) {
    case error::held:
      return "held";
    case error::lease_lost:
      return "lease_lost";
    case error::not_owner:
      return "not_owner";
    case error::acquire_timeout:
      return "acquire_timeout";
    case error::release_timeout:
      return "release_timeout";
    case error::request_timeout:
      return "request_timeout";
    case error::wait_timeout:
      return "wait_timeout";
    case error::connection_failed:
      return "connection_failed";
    case error::bad_request:
      return "bad_request";
    case error::storage_unavailable:
      return "storage_unavailable";
    case error::server_error:
      return "server_error";
    case error::protocol_error:
      return "protocol_error";
    case error::invalid_config:
      return "invalid_config";
    case error::released:
      return "released";
    case error::tls_failed:
      return "tls_failed";
    case error::unauthorized:
      return "unauthorized";
    case error::forbidden:
      return "forbidden";
    case error::server_busy:
      return "server_busy";
    case error::empty_handle:
      return "empty_handle";
    case error::shut_down:
      return "shut_down";
    case error::stale_token:
      return "stale_token";
    case error::not_held:
      return "not_held";
    case error::token_mismatch:
      return "token_mismatch";
    case error::permits_mismatch:
      return "permits_mismatch";
  }
  return "unknown";
}

std::string_view to_string(lease_state s) noexcept {
  switch (s) {
    case lease_state::active:
      return "active";
    case lease_state::lost:
      return "lost";
    case lease_state::released:
      return "released";
  }
  return "unknown";
}

std::string_view to_string(release_outcome o) noexcept {
  switch (o) {
    case release_outcome::released:
      return "released";
    case release_outcome::already_free:
      return "already_free";
    case release_outcome::not_owner:
      return "not_owner";
  }
  return "unknown";
}

std::string_view to_string(lease_event::kind k) noexcept {
  switch (k) {
    case lease_event::kind::acquired:
      return "acquired";
    case lease_event::kind::acquire_refused:
      return "acquire_refused";
    case lease_event::kind::acquire_retry:
      return "acquire_retry";
    case lease_event::kind::acquire_abandoned:
      return "acquire_abandoned";
    case lease_event::kind::renewed:
      return "renewed";
    case lease_event::kind::renew_retry:
      return "renew_retry";
    case lease_event::kind::lost:
      return "lost";
    case lease_event::kind::released:
      return "released";
    case lease_event::kind::server_warning:
      return "server_warning";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, error e) {
  return write_name(os, e, "error");
}
std::ostream& operator<<(std::ostream& os, lease_state s) {
  return write_name(os, s, "lease_state");
}
std::ostream& operator<<(std::ostream& os, release_outcome o) {
  return write_name(os, o, "release_outcome");
}
std::ostream& operator<<(std::ostream& os, lease_event::kind k) {
  return write_name(os, k, "lease_event::kind");
}

}  // namespace baton
