// SPDX-License-Identifier: Apache-2.0
#pragma once
// baton::bounded_string<N>: a string of at most N bytes kept inside the object, for the text fields of
// lease_options (owner, value).
//
// Why not std::string: GCC 12, the compiler Debian 12 ships, copies a class-type temporary made by aggregate
// initialisation inside a co_await expression byte for byte and then destroys both copies
// (`co_await c.async_acquire(k, {.ttl = 5s})`, a default argument `= {}`). A std::string member is then freed
// twice or freed at an address inside the coroutine frame. A bounded_string is trivially copyable and
// trivially destructible, so that copy is a correct copy and the second destruction does nothing: a
// lease_options built in place in any spelling is safe (docs/design.md, "Arguments that GCC 12's coroutines
// cannot hurt").

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

namespace baton {

template <std::size_t Capacity>
class bounded_string {
 public:
  bounded_string() noexcept = default;
  bounded_string(std::string_view s) noexcept { assign(s); }  // NOLINT: implicit, like std::string's
  bounded_string(const char* s) noexcept : bounded_string(std::string_view(s)) {}
  bounded_string(const std::string& s) noexcept : bounded_string(std::string_view(s)) {}

  bounded_string& operator=(std::string_view s) noexcept {
    assign(s);
    return *this;
  }
  bounded_string& operator=(const char* s) noexcept { return *this = std::string_view(s); }
  bounded_string& operator=(const std::string& s) noexcept { return *this = std::string_view(s); }

  /// The text. When more than Capacity bytes were given, only the first Capacity are kept, and
  /// lease_options::validate() refuses the field, naming it: nothing too long ever reaches a server.
  std::string_view view() const noexcept { return {data_.data(), size_ < Capacity ? size_ : Capacity}; }
  operator std::string_view() const noexcept { return view(); }  // NOLINT: implicit by design
  std::string str() const { return std::string(view()); }

  /// The length of the text given, which exceeds capacity() when it was too long.
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  bool too_long() const noexcept { return size_ > Capacity; }
  static constexpr std::size_t capacity() noexcept { return Capacity; }

  friend bool operator==(const bounded_string& a, std::string_view b) noexcept {
    return !a.too_long() && a.view() == b;
  }
  friend bool operator==(const bounded_string& a, const bounded_string& b) noexcept {
    return a.size_ == b.size_ && a.view() == b.view();
  }

 private:
  void assign(std::string_view s) noexcept {
    size_ = s.size();
    const std::size_t n = s.size() < Capacity ? s.size() : Capacity;
    for (std::size_t i = 0; i < n; ++i)
      data_[i] = s[i];
  }

  std::size_t size_ = 0;
  std::array<char, Capacity> data_{};
};

}  // namespace baton
