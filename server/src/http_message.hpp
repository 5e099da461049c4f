// SPDX-License-Identifier: Apache-2.0
#pragma once
// batond's HTTP messages and the memory they live in: a request's header, body and answer are allocated from
// its connection's request_arena, so a request served from memory costs no heap allocation for them.

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstddef>
#include <memory_resource>
#include <new>
#include <type_traits>

namespace baton::server {
namespace http = boost::beast::http;

template <class T>
struct arena_allocator;
using fields = http::basic_fields<arena_allocator<char>>;
using body = http::basic_string_body<char, std::char_traits<char>, arena_allocator<char>>;
using request = http::request<body, fields>;
using response = http::response<body, fields>;
using request_parser = http::request_parser<body, arena_allocator<char>>;
using text = body::value_type;

// An allocator over a memory resource, as std::pmr::polymorphic_allocator but assignable (Beast's fields
// need that). Every message of a connection uses its one arena, so moving a message moves its memory.
template <class T>
struct arena_allocator {
  using value_type = T;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;

  std::pmr::memory_resource* resource = std::pmr::new_delete_resource();

  arena_allocator() noexcept = default;  // the heap: for a message made before its request has an arena
  arena_allocator(std::pmr::memory_resource* r) noexcept : resource(r) {}  // NOLINT: implicit, as pmr's
  template <class U>
  arena_allocator(const arena_allocator<U>& other) noexcept : resource(other.resource) {}
  T* allocate(std::size_t n) { return static_cast<T*>(resource->allocate(n * sizeof(T), alignof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { resource->deallocate(p, n * sizeof(T), alignof(T)); }
  template <class U>
  bool operator==(const arena_allocator<U>& other) const noexcept {
    return resource == other.resource;
  }
};

// Memory for one request at a time on a connection: a bump allocator over a buffer the connection keeps,
// emptied before each request. The common request (a few header fields, a body under a hundred bytes, an
// answer of four fields) fits; what does not fit is taken from the heap and freed as before, so a large or
// stalled request holds what it did without the arena (docs/security.md, "Memory per connection"), plus
// the buffer.
class request_arena final : public std::pmr::memory_resource {
 public:
  // Empties the arena. Only once nothing allocated from it for the last request is alive.
  void reset() { used_ = 0; }

 private:
  static constexpr std::size_t size = 2048;
  alignas(std::max_align_t) std::byte memory_[size];
  std::size_t used_ = 0;

  void* do_allocate(std::size_t n, std::size_t align) override {
    const std::size_t start = (used_ + align - 1) & ~(align - 1);
    if (align <= alignof(std::max_align_t) && start <= size && n <= size - start) {
      used_ = start + n;
      return memory_ + start;
    }
    if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) return ::operator new(n);
    return ::operator new(n, std::align_val_t(align));
  }
  void do_deallocate(void* p, std::size_t n, std::size_t align) override {
    auto* b = static_cast<std::byte*>(p);
    if (b >= memory_ && b < memory_ + size) return;  // reclaimed by reset()
    // The unsized forms: clang before 16 does not declare the sized ones unless -fsized-deallocation.
    (void)n;
    if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__)
      ::operator delete(p);
    else
      ::operator delete(p, std::align_val_t(align));
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }
};

}  // namespace baton::server
