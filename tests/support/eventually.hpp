// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: polls a condition until it holds or a bound passes (for integration tests, where a real
// process decides when something happens).

#include <chrono>
#include <thread>

namespace baton::test {

/// True as soon as `pred()` holds; false once `bound` has passed without it. Polls every 20 ms.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds bound = std::chrono::seconds(30)) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace baton::test
