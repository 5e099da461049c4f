// SPDX-License-Identifier: Apache-2.0
#include "etcd_version.hpp"

#include <boost/json/parse.hpp>

#include <charconv>

namespace baton::detail {

etcd_version_check check_etcd_version(std::string_view body) {
  etcd_version_check out;
  boost::system::error_code ec;
  auto v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return out;
  auto* server = v.as_object().if_contains("etcdserver");
  if (!server || !server->is_string()) return out;
  out.version = std::string(server->as_string());
  // major.minor[.patch], anything after the patch (a pre-release suffix) ignored.
  int part[3] = {0, 0, -1};
  const char* p = out.version.data();
  const char* end = p + out.version.size();
  for (int i = 0; i < 3; ++i) {
    auto [next, e] = std::from_chars(p, end, part[i]);
    if (e != std::errc()) {
      if (i < 2) return out;  // not a version
      part[i] = -1;
      break;
    }
    p = next;
    if (i < 2) {
      if (p == end || *p != '.') {
        if (i == 0) return out;
        break;  // "3.4": no patch
      }
      ++p;
    }
  }
  const int major = part[0], minor = part[1], patch = part[2];
  if (major < 3 || (major == 3 && minor < 4)) return out;
  // Fixed in 3.4.31 and 3.5.13 (etcd PRs 17465 and 17425); 3.6 and later never had it.
  const bool affected = major == 3 && ((minor == 4 && patch < 31) || (minor == 5 && patch < 13));
  out.what =
      affected ? etcd_version_check::verdict::revokes_live_leases : etcd_version_check::verdict::supported;
  return out;
}

std::string lease_revocation_message(std::string_view member, std::string_view version, bool refused) {
  std::string out = "etcd " + std::string(member) + " runs etcd " + std::string(version) +
                    ", whose leader can revoke live leases after its disk stalls for longer than a lease's "
                    "TTL (etcd issues 12528 and 15247, fixed in 3.4.31 and 3.5.13): another client can then "
                    "acquire a lock this one still holds";
  // The setting by its one name (client_config, baton-agent's YAML; the CLI's flag is its kebab-case form).
  if (refused) return out + "; refused, as etcd_lease_revocation_bug is refuse";
  return out +
         ", until the key watch or the next renew sees the loss. Upgrade etcd, or keep off such "
         "members with etcd_lease_revocation_bug = refuse (baton: --etcd-lease-revocation-bug=refuse)";
}

}  // namespace baton::detail
