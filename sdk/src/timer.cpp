// SPDX-License-Identifier: Apache-2.0
#include "timer.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <algorithm>
#include <vector>

namespace baton::detail {
namespace asio = boost::asio;

manual_clock::~manual_clock() {
  drop_waits();
}

void manual_clock::drop_waits() {
  // Nothing runs the waits any more: their handlers are destroyed, as an io_context destroys its own. Taken
  // out first: destroying a handler may destroy a timer, which looks for its waits here.
  auto dropped = std::move(waits_);
  waits_.clear();
  for (auto& w : dropped) {
    auto slot = w.handler.get_cancellation_slot();
    if (slot.is_connected()) slot.clear();
  }
  dropped.clear();
}

void manual_clock::advance(lease_clock::duration d) {
  now_ += d;
  // In expiry order, as a timer queue completes them.
  std::vector<std::list<wait>::iterator> its;
  for (auto it = waits_.begin(); it != waits_.end(); ++it)
    if (it->expiry <= now_) its.push_back(it);
  std::stable_sort(its.begin(), its.end(),
                   [](const auto& a, const auto& b) { return a->expiry < b->expiry; });
  for (auto it : its)
    complete(it, {});
}

void manual_clock::add(const void* owner, lease_clock::time_point expiry, const asio::any_io_executor& ex,
                       asio::any_completion_handler<void(boost::system::error_code)> h) {
  const auto id = next_id_++;
  auto slot = h.get_cancellation_slot();
  // A pending wait is outstanding work of its context, as a pending Asio timer is: run() and poll() do not
  // stop while it waits.
  auto tracked = asio::prefer(ex, asio::execution::outstanding_work.tracked);
  auto it = waits_.insert(waits_.end(), wait{id, owner, expiry, tracked, std::move(h)});
  if (expiry <= now_) {
    complete(it, {});
    return;
  }
  if (slot.is_connected()) {
    slot.assign([weak = weak_from_this(), id](asio::cancellation_type type) {
      if (type == asio::cancellation_type::none) return;
      if (auto self = weak.lock()) self->cancel_id(id);
    });
  }
}

std::size_t manual_clock::cancel(const void* owner) {
  std::vector<std::list<wait>::iterator> its;
  for (auto it = waits_.begin(); it != waits_.end(); ++it)
    if (it->owner == owner) its.push_back(it);
  for (auto it : its)
    complete(it, asio::error::operation_aborted);
  return its.size();
}

void manual_clock::cancel_id(std::uint64_t id) {
  for (auto it = waits_.begin(); it != waits_.end(); ++it) {
    if (it->id == id) {
      complete(it, asio::error::operation_aborted);
      return;
    }
  }
}

void manual_clock::complete(std::list<wait>::iterator it, boost::system::error_code ec) {
  auto h = std::move(it->handler);
  auto ex = std::move(it->ex);
  waits_.erase(it);
  auto slot = h.get_cancellation_slot();
  if (slot.is_connected()) slot.clear();
  // Never inside the call that set or moved the clock: through the timer's executor, then the handler's own.
  asio::post(ex, asio::append(std::move(h), ec));
}

timer::timer(const time_base& base) : ex_(base.ex), manual_(base.manual) {
  if (!manual_) real_.emplace(ex_);
}

timer::timer(const time_base& base, time_point at) : timer(base) {
  expires_at(at);
}

timer::timer(const time_base& base, duration after) : timer(base) {
  expires_after(after);
}

timer::~timer() {
  if (manual_) manual_->cancel(this);
}

std::size_t timer::expires_at(time_point at) {
  if (real_) return real_->expires_at(at);
  expiry_ = at;
  return manual_->cancel(this);
}

std::size_t timer::expires_after(duration d) {
  if (real_) return real_->expires_after(d);
  const auto now = manual_->now();
  // Saturating, as Asio's timers do for time_point::max().
  return expires_at(d >= time_point::max() - now ? time_point::max() : now + d);
}

timer::time_point timer::expiry() const {
  return real_ ? real_->expiry() : expiry_;
}

std::size_t timer::cancel() {
  return real_ ? real_->cancel() : manual_->cancel(this);
}

void timer::wait_manual(asio::any_completion_handler<void(boost::system::error_code)> h) {
  manual_->add(this, expiry_, ex_, std::move(h));
}

}  // namespace baton::detail
