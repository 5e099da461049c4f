// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE etcd_version
#include <boost/test/unit_test.hpp>

// What the etcd backend makes of a member's GET /version answer (sdk/src/etcd_version.hpp), from canned
// bodies: refused before 3.4; etcd 3.4 before 3.4.31 and 3.5 before 3.5.13 revoke live leases after the
// leader's disk stalls (etcd issues 12528 and 15247), which client_config::etcd_lease_revocation_bug
// decides; fixed releases and 3.6 on are fine. test_etcd_backend checks the warning and the refusal against
// Debian's etcd.

#include "etcd_version.hpp"

using baton::detail::check_etcd_version;
using verdict = baton::detail::etcd_version_check::verdict;

namespace {
verdict of(const std::string& server) {
  return check_etcd_version(R"({"etcdserver":")" + server + R"(","etcdcluster":"3.4.0"})").what;
}
}  // namespace

BOOST_AUTO_TEST_CASE(debian_12s_etcd_and_other_releases_before_the_fix_revoke_live_leases) {
  const auto debian = check_etcd_version(R"({"etcdserver":"3.4.23","etcdcluster":"3.4.0"})");
  BOOST_TEST((debian.what == verdict::revokes_live_leases));
  BOOST_TEST(debian.version == "3.4.23");
  for (const char* v : {"3.4.0", "3.4.30", "3.5.0", "3.5.12", "3.5.0-alpha.0", "3.4", "3.5"})
    BOOST_TEST((of(v) == verdict::revokes_live_leases), v);
}

BOOST_AUTO_TEST_CASE(releases_with_the_fix_and_later_minor_versions_are_supported) {
  for (const char* v : {"3.4.31", "3.4.34", "3.5.13", "3.5.17", "3.6.0", "3.6.0-rc.1", "4.0.0"})
    BOOST_TEST((of(v) == verdict::supported), v);
}

BOOST_AUTO_TEST_CASE(etcd_before_3_4_or_an_unreadable_answer_is_refused_as_too_old) {
  for (const char* v : {"3.3.27", "3.2.0", "2.3.8", "", "three", "3", "3.x"})
    BOOST_TEST((of(v) == verdict::too_old), v);
  BOOST_TEST((check_etcd_version("not json").what == verdict::too_old));
  BOOST_TEST((check_etcd_version(R"({"etcdcluster":"3.5.0"})").what == verdict::too_old));
  BOOST_TEST((check_etcd_version(R"({"etcdserver":3.5})").what == verdict::too_old));
  BOOST_TEST(check_etcd_version(R"({"etcdserver":"3.3.1"})").version == "3.3.1");
}

BOOST_AUTO_TEST_CASE(the_message_names_the_member_the_version_the_etcd_issues_and_the_way_out) {
  const auto warned = baton::detail::lease_revocation_message("10.0.0.1:2379", "3.4.23", false);
  for (const char* part : {"10.0.0.1:2379", "3.4.23", "12528", "15247", "3.4.31", "3.5.13", "refuse"})
    BOOST_TEST(warned.find(part) != std::string::npos, part);
  const auto refused = baton::detail::lease_revocation_message("10.0.0.1:2379", "3.4.23", true);
  BOOST_TEST(refused.find("refused") != std::string::npos);
}
