// SPDX-License-Identifier: Apache-2.0
#include "renewal_scheduler.hpp"

#include "lease_core.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>

#include <algorithm>
#include <exception>
#include <string>

namespace baton::detail {
namespace asio = boost::asio;

namespace {

std::chrono::microseconds since(const time_base& tb, clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(tb.now() - t);
}

// The batch window of `c`'s renewals: the client's, or by default a hundredth of the lease's renew period.
milliseconds batch_window(const lease_core& c) {
  const auto& config = c.client->config;
  if (config.renew_batch_window) return *config.renew_batch_window;
  return default_batch_window(c.options.renew_every, config.request_timeout);
}

// Whether a renewal of `c` should wait for others: when the client's leases renew often enough that about one
// other renewal falls due within the window (leases renewing × window ≥ this lease's renew period). Fewer
// leases would pay the window's wait and the batcher's work for batches of one. With the default window
// that is a client renewing 100 leases or more.
bool worth_batching(const lease_core& c) {
  const auto window = batch_window(c);
  if (window.count() <= 0) return false;
  return static_cast<double>(c.client->renewals.running()) * static_cast<double>(window.count()) >=
         static_cast<double>(c.options.renew_every.count());
}

// When to look at `c` next. A client renewing enough leases to batch them looks at each lease on a grid of
// the batch window: renewals falling due within one step of it are looked at in one pass, so the process
// wakes once per step, not once per lease. The look is moved later, by less than one window, and only when
// the renewal still has its whole request_timeout before the deadline; a look for the deadline itself (the
// loss) is never moved.
clock::time_point wake_time(const lease_core& c) {
  if (!worth_batching(c)) return c.fsm.wake_at();
  return wake_on_grid(c.fsm.wake_at(), c.fsm.deadline(), batch_window(c), c.client->config.request_timeout);
}

// Declares the loss at the deadline of a lease whose renewal ended by an exception while its request ran
// (the answer will not come): its own timer, as this is rare.
void watch_deadline(const std::shared_ptr<lease_core>& c) {
  auto watch = std::make_shared<timer>(*c->client, c->fsm.deadline());
  boot_wake boot;
  if (!c->client->manual) boot = wake_on_boot_clock(c->client->ex, c->fsm.deadline());
  watch->async_wait([c, watch, boot = std::move(boot)](boost::system::error_code ec) {
    if (!ec && c->fsm.poll(c->client->now()) == lease_fsm::action::declare_lost) c->publish();
  });
}

}  // namespace

void renewal_answered(lease_core& c, renew_reply r) {
  c.client->renewals.answered(c, std::move(r));
}

void renewal_scheduler::start(const std::shared_ptr<lease_core>& c) {
  auto& s = c->renewal;
  if (s.running) return;
  s.running = true;
  ++running_;
  file(c, c->fsm.wake_at());
}

void renewal_scheduler::stop(lease_core& c) {
  if (!c.renewal.running) return;
  end(c);
}

void renewal_scheduler::end(lease_core& c) {
  auto& s = c.renewal;
  if (!s.running) return;
  s.running = false;
  --running_;
  leave_probe_wait(c);
  if (s.requesting) {
    s.requesting = false;
    s.place.reset();  // out of its batch: the batch's answer skips it
    s.cancel_request.emit(asio::cancellation_type::terminal);  // a renew out alone
  }
  // The outage's roles (docs/design.md, "One renew at a time in an outage"). When the prober's renewal ends
  // while the server still does not answer, and nobody was woken to probe next, the waiting lease whose
  // deadline comes last is woken to probe in turn: it can probe the longest. One wake per hand-over: the
  // leases lost together at one deadline do not each look for an heir.
  if (prober == &c) prober = nullptr;
  if (heir == &c) heir = nullptr;
  if (outage && !prober && !heir && !cs_.context_gone.load()) heir = wake_latest_probe_waiter();
  // Last: the index may hold the last reference to the lease.
  unfile(c);
}

void renewal_scheduler::drop_all() {
  probe_waiters_.clear();
  auto dropped = std::move(index_);
  index_.clear();
  for (auto& [at, c] : dropped) {
    c->renewal.filed = false;
    c->renewal.probe_waiting = false;
  }
  boot_.reset();
  timer_.reset();  // its wait was dropped with the context's operations
  armed_at_ = clock::time_point::max();
  dropped.clear();
}

void renewal_scheduler::file(const std::shared_ptr<lease_core>& c, clock::time_point at) {
  auto& s = c->renewal;
  if (s.filed) unfile(*c);
  s.at = index_.emplace(at, c);
  s.filed = true;
  if (!in_pass_ && at < armed_at_) arm();
}

void renewal_scheduler::unfile(lease_core& c) {
  auto& s = c.renewal;
  if (!s.filed) return;
  s.filed = false;
  auto node = index_.extract(s.at);  // destroyed last: it may hold the last reference to `c`
  if (index_.empty() && !in_pass_) arm();
}

void renewal_scheduler::probe_wait(lease_core& c) {
  auto& s = c.renewal;
  if (s.probe_waiting) return;
  s.probe_at = probe_waiters_.insert(probe_waiters_.end(), &c);
  s.probe_waiting = true;
}

void renewal_scheduler::leave_probe_wait(lease_core& c) {
  auto& s = c.renewal;
  if (!s.probe_waiting) return;
  probe_waiters_.erase(s.probe_at);
  s.probe_waiting = false;
}

void renewal_scheduler::wake_probe_waiters() {
  const auto now = cs_.now();
  auto waiting = std::move(probe_waiters_);
  probe_waiters_.clear();
  for (auto* c : waiting) {
    c->renewal.probe_waiting = false;
    if (!c->renewal.filed) continue;
    auto keep = c->renewal.at->second;  // file() drops the node that holds it
    file(keep, now);
  }
}

lease_core* renewal_scheduler::wake_latest_probe_waiter() {
  lease_core* latest = nullptr;
  for (auto* c : probe_waiters_)
    if (!latest || c->fsm.deadline() > latest->fsm.deadline()) latest = c;
  if (!latest) return nullptr;
  leave_probe_wait(*latest);
  if (latest->renewal.filed) {
    auto keep = latest->renewal.at->second;  // file() drops the node that holds it
    file(keep, cs_.now());
  }
  return latest;
}

void renewal_scheduler::arm() {
  if (cs_.context_gone.load(std::memory_order_acquire)) return;
  if (index_.empty()) {
    // Nothing to wait for: no wait pending, so a context whose leases have all ended runs out of work.
    if (armed_at_ != clock::time_point::max()) {
      armed_at_ = clock::time_point::max();
      ++generation_;
      if (timer_) timer_->cancel();
      boot_.reset();
    }
    return;
  }
  const auto at = index_.begin()->first;
  if (at == armed_at_) return;
  armed_at_ = at;
  if (!timer_) timer_.emplace(cs_);
  const auto generation = ++generation_;
  timer_->expires_at(at);
  if (!cs_.manual) boot_ = wake_on_boot_clock(cs_.ex, at);  // the instant counts a host suspend too
  timer_->async_wait([weak = cs_.weak_from_this(), generation](boost::system::error_code ec) {
    auto keep = weak.lock();
    if (!keep || ec) return;
    auto& self = keep->renewals;
    if (generation != self.generation_) return;  // an older wait's completion, already queued
    self.armed_at_ = clock::time_point::max();
    self.run_due();
  });
}

void renewal_scheduler::run_due() {
  in_pass_ = true;
  const auto now = cs_.now();
  // The first lease is looked up afresh each time: a step may end or file other leases (a loss handler
  // releasing them, a woken prober).
  while (!index_.empty() && index_.begin()->first <= now) {
    auto c = index_.begin()->second;
    unfile(*c);
    step(c, now);
  }
  in_pass_ = false;
  arm();
}

void renewal_scheduler::step(const std::shared_ptr<lease_core>& c, clock::time_point now) {
  auto& s = c->renewal;
  if (!s.running) return;
  const auto action = c->fsm.poll(now);
  if (action == lease_fsm::action::declare_lost) {
    c->publish();
    // A renew still out is awaited: a "renewed" that arrives now is handed back with a release.
    if (!s.requesting) end(*c);
    return;
  }
  if (c->fsm.state() != lease_state::active) {
    if (!s.requesting) end(*c);
    return;
  }
  if (s.requesting) {
    // Looked at for its deadline while its renew is out, and the deadline has not come: look again then.
    file(c, c->fsm.deadline());
    return;
  }
  if (action == lease_fsm::action::wait) {
    file(c, wake_time(*c));
    return;
  }
  if (outage && prober && prober != c.get()) {
    // The server did not answer the last renew, and another lease's renew (the probe) is out, or backing
    // off, to see whether it answers now: this one waits for the server to be back, or for its own deadline,
    // instead of adding a request (and, with many leases, a storm of them) to a server that may be down. It
    // is woken when the server answers, or to probe in turn when the prober's lease ends.
    probe_wait(*c);
    file(c, c->fsm.deadline());
    return;
  }
  // The probe, when the server has not answered: until it answers, nobody else's renew goes out, and this
  // lease keeps probing, with its own backoff, while it lasts.
  if (outage && !prober) {
    prober = c.get();
    heir = nullptr;
  }
  send(c, now);
}

void renewal_scheduler::send(const std::shared_ptr<lease_core>& c, clock::time_point now) {
  auto& s = c->renewal;
  // `sent` is the instant the renewal fell due (the pass's instant, no later than the request leaves): the
  // deadline a confirmation gives is counted from it, so the batch window only ever makes it earlier.
  s.sent = now;
  s.requesting = true;
  // The request may take at most until the local deadline: an answer after it is worthless. The lease is
  // filed at its deadline meanwhile, so the loss is declared at that instant (and guarded work cancelled),
  // not when the request's own, millisecond-rounded, timeout expires.
  const auto budget = std::min<clock::duration>(cs_.config.request_timeout, c->fsm.deadline() - now);
  file(c, c->fsm.deadline());
  // A renewal with its whole request_timeout ahead may wait up to the batch window for others; one that is
  // short of time (retrying near the deadline) goes alone, at once.
  if (worth_batching(*c) && budget >= cs_.config.request_timeout) {
    if (!cs_.batcher) cs_.batcher = std::make_shared<renew_batcher>(cs_);
    s.place.emplace(cs_.batcher->join(c->key, c->owner, c->token, c->options.ttl, batch_window(*c),
                                      std::chrono::ceil<milliseconds>(budget), *c));
    return;
  }
  auto request = [](std::shared_ptr<lease_core> c, milliseconds budget) -> asio::awaitable<renew_reply> {
    co_return co_await c->client->backend->renew(c->key, c->owner, c->token, c->options.ttl, budget);
  };
  asio::co_spawn(
      cs_.ex, request(c, std::chrono::ceil<milliseconds>(budget)),
      asio::bind_cancellation_slot(s.cancel_request.slot(), [c](std::exception_ptr e, renew_reply r) {
        auto& rs = c->client->renewals;
        if (!c->renewal.running || !c->renewal.requesting) return;
        if (e) {
          // The renewal ends here; the deadline is still declared
          // on time.
          c->renewal.requesting = false;
          rs.end(*c);
          watch_deadline(c);
          return;
        }
        rs.answered(*c, std::move(r));
      }));
}

void renewal_scheduler::answered(lease_core& lc, renew_reply r) {
  auto& s = lc.renewal;
  if (!s.running || !s.requesting) return;  // withdrawn (stopped) before the answer
  auto c = lc.shared_from_this();
  s.requesting = false;
  s.place.reset();
  unfile(*c);
  // Any answer, a refusal included, says the server is there; none says it may not be.
  outage = r.ec && r.ec != error::lease_lost;
  if (!outage && prober) {
    // Back: every lease waiting for the probe renews now (any lease's answer ends the outage).
    prober = nullptr;
    heir = nullptr;
    wake_probe_waiters();
  }
  auto& cs = cs_;
  const auto now = cs.now();
  if (!r.ec) {
    if (c->fsm.on_renew_ok(s.sent, now) == lease_fsm::renew_outcome::too_late) {
      // The server extended a lease we already gave up locally: hand it back so nobody waits for its TTL.
      c->publish();
      c->begin_release(false);
      end(*c);
      return;
    }
    auto latency = since(cs, s.sent);
    cs.renews.fetch_add(1, std::memory_order_relaxed);
    cs.last_renew_us.store(latency.count(), std::memory_order_relaxed);
    for (auto m = cs.max_renew_us.load();
         latency.count() > m && !cs.max_renew_us.compare_exchange_weak(m, latency.count());) {
    }
    cs.emit(lease_event::kind::renewed, c->key, c->token, latency);
    c->publish();
  } else if (r.ec == error::lease_lost) {
    c->fsm.on_renew_refused(r.lost_reason.empty() ? r.diagnostic : r.lost_reason);
    c->publish();
    end(*c);
    return;
  } else {
    // No definite answer (no reply, a 503 storage_unavailable, another server error): the server may or may
    // not have extended its lease, so the local deadline stays where the last confirmed renew put it and the
    // lease may still be ours. Retry while time remains.
    c->fsm.on_renew_failed(now);
    if (c->fsm.state() == lease_state::active && now < c->fsm.deadline()) {
      cs.renew_retries.fetch_add(1, std::memory_order_relaxed);
      std::string why = r.ec == error::request_timeout ? "renew timed out" : r.ec.message();
      cs.emit(lease_event::kind::renew_retry, c->key, c->token, since(cs, s.sent), why);
    }
    // Otherwise no time was left to retry in: the loss (declared at the deadline, or by the step below) is
    // the last word on this lease, and no renew_retry event follows it.
    c->publish();
  }
  // An event handler may have ended the renewal (a release).
  if (s.running) step(c, now);
}

}  // namespace baton::detail
