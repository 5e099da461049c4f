// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: lease options in one line.

#include "baton/config.hpp"

namespace baton::test {

inline baton::lease_options lease_opts(baton::milliseconds ttl,
                                       baton::milliseconds every = baton::milliseconds{0},
                                       baton::milliseconds margin = baton::milliseconds{0}) {
  baton::lease_options o;
  o.ttl = ttl;
  o.renew_every = every;
  o.safety_margin = margin;
  return o;
}

}  // namespace baton::test
