// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the SDK's own code reads of a client that its users do not: the backend, which the public API keeps
// to itself (a user who needs the protocol without a lease makes a backend with make_backend()).

#include "baton/client.hpp"
#include "lease_core.hpp"

namespace baton::detail {

struct client_access {
  static const std::shared_ptr<backend>& backend_of(const client& c) { return c.shared()->backend; }
};

}  // namespace baton::detail
