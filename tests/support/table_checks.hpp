// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper for the lock table's unit tests (test_lock_table, test_semaphore_table): an instant to start
// from, printing of renew's reasons, and the alternative a result must hold.

#include "lock_table.hpp"

#include <boost/test/unit_test.hpp>

#include <ostream>
#include <variant>

namespace baton::server {
inline std::ostream& operator<<(std::ostream& os, lost_reason r) {
  return os << to_string(r);
}
}  // namespace baton::server

namespace baton::test {

/// A steady-clock instant well after its epoch, so that tests may go back from it.
inline const baton::server::time_point t0 = baton::server::time_point{} + std::chrono::seconds(1000);

/// The alternative `T` of `v`; the test stops when `v` holds another.
template <class T, class V>
const T& as(const V& v) {
  BOOST_REQUIRE(std::holds_alternative<T>(v));
  return std::get<T>(v);
}

}  // namespace baton::test
