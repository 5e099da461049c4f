// SPDX-License-Identifier: Apache-2.0
#pragma once
// For the LD_PRELOAD fault libraries (tests/faultfs, tests/faultclock): the next definition of a function
// they wrap (libc's, or a sanitizer's interceptor in front of it), looked up once and kept.

#include <dlfcn.h>

#include <atomic>

namespace baton::preload {

template <class F>
F next(std::atomic<F>& slot, const char* name) {
  F f = slot.load(std::memory_order_acquire);
  if (!f) {
    f = reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
    slot.store(f, std::memory_order_release);
  }
  return f;
}

}  // namespace baton::preload
