// SPDX-License-Identifier: Apache-2.0
#pragma once
// co_spawn with the caller's cancellation relayed through shared state. Used by the SDK's operations (they
// run on the client's strand) and by client::async_with_lock, which spawns the work from this public header.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>

#include <memory>
#include <utility>

namespace baton::detail {

/// co_spawn(ex, op, h), with a cancellation of `h`'s slot relayed to `op` through state both share.
/// Asio 1.81's co_spawn passes a cancellation emitted off `ex` to `ex` as a pointer into the memory of `h`'s
/// slot. When `op` completes first and `h`'s owner clears its slot as `h` runs, that pointer dangles: a
/// heap-use-after-free that ASan caught in `baton exec`, whose wait for a loss was cancelled just as the loss
/// completed it; client::async_with_lock with a callback had it too (test_sdk_api,
/// a_cancellation_racing_an_operations_completion_is_harmless). The relay's signal lives as long as any
/// cancellation on its way to `ex` and as `op`'s handler; it is emitted on `ex`, where co_spawn passes it on
/// at once.
template <class T, class Handler>
void co_spawn_relayed(const boost::asio::any_io_executor& ex, boost::asio::awaitable<T> op, Handler h) {
  auto slot = boost::asio::get_associated_cancellation_slot(h);
  if (!slot.is_connected()) {
    boost::asio::co_spawn(ex, std::move(op), std::move(h));
    return;
  }
  auto relay = std::make_shared<boost::asio::cancellation_signal>();
  slot.assign([relay, ex](boost::asio::cancellation_type t) {
    boost::asio::dispatch(ex, [relay, t] { relay->emit(t); });
  });
  auto hex = boost::asio::get_associated_executor(h, ex);
  auto inner = relay->slot();
  boost::asio::co_spawn(
      ex, std::move(op),
      boost::asio::bind_cancellation_slot(
          inner, boost::asio::bind_executor(hex, [h = std::move(h), relay](auto&&... args) mutable {
            std::move(h)(std::forward<decltype(args)>(args)...);
          })));
}

}  // namespace baton::detail
