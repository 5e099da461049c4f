// SPDX-License-Identifier: Apache-2.0
#pragma once
// How the SDK's asynchronous operations complete. Each operation is one function `async_x(args..., token)`
// that takes any Asio completion token; its handler gets an error_code first. Two adapters carry the
// server's message with the error:
//
//   lease l = co_await c.async_acquire("k");            // default token: throws baton::exception (code +
//   message) auto [e, l] = co_await c.async_acquire("k", baton::with_diagnostics(as_tuple(use_awaitable)));
//                                                      // e: std::exception_ptr holding the baton::exception
//   baton::diagnostics diag;
//   c.async_acquire("k", baton::with_diagnostics(diag, [&](error_code ec, lease l) { ... diag.message() ...
//   }));
//
// A plain token (a callback, use_future, as_tuple(use_awaitable), deferred) gets the error code only.

#include "baton/error.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace baton {

class diagnostics;
namespace detail {
inline std::string* diagnostics_slot(diagnostics& d) noexcept;
}

/// What the server (or the SDK) said about an operation's error, for people (with_diagnostics(diag, token)).
/// Cleared when an operation given it starts; set before its handler runs.
class diagnostics {
 public:
  const std::string& message() const noexcept { return message_; }
  void clear() noexcept { message_.clear(); }

 private:
  friend std::string* detail::diagnostics_slot(diagnostics& d) noexcept;
  std::string message_;
};

/// The token adapter with_diagnostics(token) makes: the operation completes with `std::exception_ptr` instead
/// of the error code, holding a baton::exception with the code and the message (null on success).
template <class Token>
struct with_diagnostics_t {
  Token token;
};

/// The token adapter with_diagnostics(diag, token) makes: the error code is passed on, and `*diag` holds the
/// message when the handler runs.
template <class Token>
struct into_diagnostics_t {
  diagnostics* diag;
  Token token;
};

template <class Token>
constexpr with_diagnostics_t<std::decay_t<Token>> with_diagnostics(Token&& token) {
  return {std::forward<Token>(token)};
}

template <class Token>
constexpr into_diagnostics_t<std::decay_t<Token>> with_diagnostics(diagnostics& diag, Token&& token) {
  return {&diag, std::forward<Token>(token)};
}

/// Every operation's default token: `co_await` it in a boost::asio::awaitable coroutine; a failure throws
/// baton::exception with the server's message.
///
/// It is an empty, trivially copyable object on purpose: GCC 12 destroys a class-type temporary of a
/// co_await expression twice (docs/design.md), and the default argument `token = {}` is such a temporary.
using default_token_t = with_diagnostics_t<boost::asio::use_awaitable_t<>>;
inline constexpr default_token_t default_token{};
static_assert(std::is_trivially_copyable_v<default_token_t> &&
              std::is_trivially_destructible_v<default_token_t>);

namespace detail {

inline std::string* diagnostics_slot(diagnostics& d) noexcept {
  return &d.message_;
}

// Receives (error_code, Args...) and calls the user's handler with (exception_ptr, Args...).
template <class Handler>
class throwing_handler {
 public:
  explicit throwing_handler(Handler h) : handler_(std::move(h)), diag_(std::make_unique<std::string>()) {}

  template <class... Args>
  void operator()(boost::system::error_code ec, Args&&... args) {
    std::exception_ptr e;
    if (ec) e = std::make_exception_ptr(exception(ec, std::move(*diag_)));
    std::move(handler_)(e, std::forward<Args>(args)...);
  }

  // Where the operation writes its message; stable while the handler moves.
  std::string* slot() const noexcept { return diag_.get(); }
  Handler handler_;

 private:
  std::unique_ptr<std::string> diag_;
};

// Passes (error_code, Args...) on, the message written into the user's diagnostics first.
template <class Handler>
class into_handler {
 public:
  into_handler(Handler h, diagnostics* d) : handler_(std::move(h)), diag_(d) { diag_->clear(); }

  template <class... Args>
  void operator()(boost::system::error_code ec, Args&&... args) {
    std::move(handler_)(ec, std::forward<Args>(args)...);
  }

  std::string* slot() const noexcept { return diagnostics_slot(*diag_); }
  Handler handler_;

 private:
  diagnostics* diag_;
};

template <class Handler>
std::string* diagnostic_slot(const Handler&) noexcept {
  return nullptr;
}
template <class Handler>
std::string* diagnostic_slot(const throwing_handler<Handler>& h) noexcept {
  return h.slot();
}
template <class Handler>
std::string* diagnostic_slot(const into_handler<Handler>& h) noexcept {
  return h.slot();
}

template <class Initiation>
struct throwing_initiation {
  Initiation init;
  template <class Handler, class... Args>
  void operator()(Handler&& h, Args&&... args) {
    std::move(init)(throwing_handler<std::decay_t<Handler>>(std::forward<Handler>(h)),
                    std::forward<Args>(args)...);
  }
};

template <class Initiation>
struct into_initiation {
  Initiation init;
  diagnostics* diag;
  template <class Handler, class... Args>
  void operator()(Handler&& h, Args&&... args) {
    std::move(init)(into_handler<std::decay_t<Handler>>(std::forward<Handler>(h), diag),
                    std::forward<Args>(args)...);
  }
};

/// Completes `h` with an error found before the operation could start (a moved-from handle, which has no
/// executor of its own): on the handler's associated executor (the system executor for a handler without
/// one), never inside the initiating call.
template <class Handler, class... Values>
void fail_at_start(Handler h, boost::system::error_code ec, std::string message, Values... values) {
  if (auto* slot = diagnostic_slot(h)) *slot = std::move(message);
  boost::asio::post(boost::asio::system_executor(),
                    boost::asio::append(std::move(h), ec, std::move(values)...));
}

}  // namespace detail
}  // namespace baton

template <template <class, class> class Associator, class Handler, class Default>
struct boost::asio::associator<Associator, baton::detail::throwing_handler<Handler>, Default>
    : Associator<Handler, Default> {
  static typename Associator<Handler, Default>::type get(
      const baton::detail::throwing_handler<Handler>& h) noexcept {
    return Associator<Handler, Default>::get(h.handler_);
  }
  static auto get(const baton::detail::throwing_handler<Handler>& h, const Default& d) noexcept
      -> decltype(Associator<Handler, Default>::get(h.handler_, d)) {
    return Associator<Handler, Default>::get(h.handler_, d);
  }
};

template <template <class, class> class Associator, class Handler, class Default>
struct boost::asio::associator<Associator, baton::detail::into_handler<Handler>, Default>
    : Associator<Handler, Default> {
  static typename Associator<Handler, Default>::type get(
      const baton::detail::into_handler<Handler>& h) noexcept {
    return Associator<Handler, Default>::get(h.handler_);
  }
  static auto get(const baton::detail::into_handler<Handler>& h, const Default& d) noexcept
      -> decltype(Associator<Handler, Default>::get(h.handler_, d)) {
    return Associator<Handler, Default>::get(h.handler_, d);
  }
};

// with_diagnostics(token): an error-code signature becomes an exception_ptr one. An operation that already
// completes with an exception_ptr (client::async_with_lock) is passed through unchanged.
template <class Token, class... Args>
struct boost::asio::async_result<baton::with_diagnostics_t<Token>, void(boost::system::error_code, Args...)> {
  template <class Initiation, class RawToken, class... InitArgs>
  static auto initiate(Initiation&& init, RawToken&& token, InitArgs&&... args) {
    Token inner = std::forward<RawToken>(token).token;
    return boost::asio::async_initiate<Token, void(std::exception_ptr, Args...)>(
        baton::detail::throwing_initiation<std::decay_t<Initiation>>{std::forward<Initiation>(init)}, inner,
        std::forward<InitArgs>(args)...);
  }
};

template <class Token, class... Args>
struct boost::asio::async_result<baton::with_diagnostics_t<Token>, void(std::exception_ptr, Args...)> {
  template <class Initiation, class RawToken, class... InitArgs>
  static auto initiate(Initiation&& init, RawToken&& token, InitArgs&&... args) {
    Token inner = std::forward<RawToken>(token).token;
    return boost::asio::async_initiate<Token, void(std::exception_ptr, Args...)>(
        std::forward<Initiation>(init), inner, std::forward<InitArgs>(args)...);
  }
};

template <class Token, class... Args>
struct boost::asio::async_result<baton::into_diagnostics_t<Token>, void(boost::system::error_code, Args...)> {
  template <class Initiation, class RawToken, class... InitArgs>
  static auto initiate(Initiation&& init, RawToken&& token, InitArgs&&... args) {
    baton::diagnostics* diag = token.diag;
    Token inner = std::forward<RawToken>(token).token;
    return boost::asio::async_initiate<Token, void(boost::system::error_code, Args...)>(
        baton::detail::into_initiation<std::decay_t<Initiation>>{std::forward<Initiation>(init), diag}, inner,
        std::forward<InitArgs>(args)...);
  }
};
