// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the etcd backend makes of a member's GET /version answer. Pure; private to the SDK.

#include <string>
#include <string_view>

namespace baton::detail {

struct etcd_version_check {
  enum class verdict {
    supported,
    /// Older than 3.4 (no v3 gateway at /v3/), or no readable version: refused.
    too_old,
    /// etcd 3.4 before 3.4.31, 3.5 before 3.5.13: its leader can revoke live leases after its disk stalls for
    /// longer than a TTL (etcd issues 12528 and 15247); client_config::etcd_lease_revocation_bug decides.
    revokes_live_leases,
  };
  verdict what = verdict::too_old;
  /// `etcdserver` as the member reported it ("3.4.23"); empty when the answer has none.
  std::string version;
};

/// Reads `body`, the JSON a member answers GET /version with (`{"etcdserver":"3.4.23","etcdcluster":
/// "3.4.0"}`). Only `etcdserver` counts: the defect is in the server's code, whatever version the cluster
/// speaks. A version without a patch number (`3.4`) counts as affected.
etcd_version_check check_etcd_version(std::string_view body);

/// The warning (or, with etcd_bug_policy::refuse, the refusal) for `member` running `version`.
std::string lease_revocation_message(std::string_view member, std::string_view version, bool refused);

}  // namespace baton::detail
