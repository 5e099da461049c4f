// SPDX-License-Identifier: Apache-2.0
#include "exec_command.hpp"

#include "baton/common/process_group.hpp"
#include "baton/common/stop_schedule.hpp"
#include "exit_code.hpp"
#include "lock_commands.hpp"

#include "baton/config.hpp"
#include "baton/error.hpp"
#include "baton/semaphore.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace baton::cli {
namespace {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using clock = std::chrono::steady_clock;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// Processes the command leaves in its group have no exit notification: look this often while stopping them.
constexpr auto group_poll = std::chrono::milliseconds(50);

// The latest instant the command may get SIGKILL under a lease whose local deadline is `deadline`.
lease_clock::time_point latest_kill(lease_clock::time_point deadline, const lease_options& o) {
  return lease_clock::time_point(kill_by(deadline.time_since_epoch(), o.effective_safety_margin()));
}

// `t` on the clock of Asio's timers here.
clock::time_point on_steady(lease_clock::time_point t) {
  return clock::now() + std::chrono::duration_cast<clock::duration>(t - lease_clock::now());
}

void say(const std::string& line) {
  std::fprintf(stderr, "baton: %s\n", without_credentials(line).c_str());
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal " + std::to_string(sig);
  }
}

bool ignored(int sig) {
  struct sigaction sa;
  return ::sigaction(sig, nullptr, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_IGN;
}

std::string loss_reason(const lease& l) {
  auto reason = l.loss_reason();
  // active() reads the clock itself, so it can report the loss before the renewal scheduler has named a
  // reason.
  return reason.empty() ? "its local deadline passed" : reason;
}

// A release the server never confirms is not the command's failure: the lease then ends with its TTL.
asio::awaitable<void> release(lease& l) {
  std::string warning;
  try {
    if (co_await l.async_release() == release_outcome::not_owner)
      warning = "release of \"" + l.key() + "\" refused: another owner or token holds it now";
  } catch (const exception& e) {
    warning = describe("release of \"" + l.key() + "\"", e.code(), e.diagnostic()) +
              "; the lock frees itself when its TTL runs out";
  }
  if (!warning.empty()) say(warning);
}

// Completes normally even when acquiring fails (the failure goes to `failed`): `||` waits for the first
// *success*, so a throwing branch would leave the race waiting for a stop signal.
asio::awaitable<void> acquire_into(client& c, const exec_command& cmd, std::optional<lease>& out,
                                   std::exception_ptr& failed) {
  try {
    // A lock is a semaphore of 1 permit: the same requests as the client's own acquire.
    semaphore permits(c, cmd.key, cmd.permits);
    if (cmd.wait) {
      if (cmd.wait_timeout)
        out.emplace(co_await permits.async_acquire(cmd.lease, *cmd.wait_timeout));
      else
        out.emplace(co_await permits.async_acquire(cmd.lease));
      co_return;
    }
    auto r = co_await permits.async_try_acquire(cmd.lease);
    if (!r.acquired) throw cli_error(exit_code::not_acquired, held_by(cmd.key, r.holder));
    out = std::move(r.acquired);
  } catch (const exception& e) {
    failed = std::make_exception_ptr(cli_error(
        exit_code_for(e.code()), describe("acquire \"" + cmd.key + "\"", e.code(), e.diagnostic())));
  } catch (...) {
    failed = std::current_exception();
  }
}

// Watches the command while the lease lasts and stops its process group when it must stop. The guard process
// (group_guard with the lease's limits) stops it on its own if this process cannot: it hears every new
// deadline from here.
class supervisor {
 public:
  supervisor(const exec_command& cmd, lease& l, group_child& child, group_guard& guard,
             asio::signal_set& stop_signals)
      : cmd_(cmd),
        lease_(l),
        child_(child),
        guard_(guard),
        stop_signals_(stop_signals),
        reported_(l.deadline()) {}

  /// Returns once the command has exited and its group is empty.
  asio::awaitable<void> run() {
    auto first = co_await (child_.wait_exit() || lease_.async_wait_lost() ||
                           stop_signals_.async_wait(asio::use_awaitable) || report_renewals());
    switch (first.index()) {
      case 0:
        command_ended();
        // Whatever the command started and left running would go on without the lock once it is released.
        if (child_.group_alive()) {
          say("the command exited; stopping the processes it left in its group");
          co_await stop_group();
        }
        break;
      case 1:
        lost_ = true;
        say("the lease on \"" + cmd_.key + "\" was lost (" + loss_reason(lease_) + "); stopping the command");
        co_await stop_group();
        break;
      case 2:
        say(signal_name(std::get<2>(first)) + " received; stopping the command");
        co_await stop_group();
        break;
      default:
        break;  // report_renewals() never ends
    }
  }

  /// True when the lease was no longer valid by the time the command ended.
  bool lost() const { return lost_; }

 private:
  void command_ended() {
    if (ended_) return;
    ended_ = true;
    // Safety rule: a lease in doubt counts as lost; the command's own verdict cannot be trusted then.
    if (!lease_.active() && !lost_) {
      lost_ = true;
      say("the lease on \"" + cmd_.key + "\" was lost before the command ended (" + loss_reason(lease_) +
          ")");
    }
  }

  // Tells the guard the deadline a confirmed renew gave the lease, and says so when the guard could not take
  // one: it then stops the command at the deadline it holds, before the lease's.
  void report_deadline() {
    if (const int err = guard_.timer_failure(); err != 0 && !said_timer_failure_) {
      said_timer_failure_ = true;
      say("the command's guard cannot re-arm its timer for the renewed lease (" +
          std::string(std::strerror(err)) +
          "); it stops the command at the deadline it holds, ahead of the lease's");
    }
    const auto deadline = lease_.deadline();
    if (deadline <= reported_ || !lease_.active()) return;
    if (guard_.extend(deadline.time_since_epoch(), latest_kill(deadline, cmd_.lease).time_since_epoch()))
      reported_ = deadline;
  }

  asio::awaitable<void> report_renewals() {
    asio::steady_timer tick(co_await asio::this_coro::executor);
    for (;;) {
      tick.expires_after(report_period(cmd_.lease.ttl));
      co_await tick.async_wait(asio::use_awaitable);
      report_deadline();
    }
  }

  // SIGTERM to the group, SIGKILL once the grace period is over (at once on a second stop signal), and in
  // any case before the server can expire the lease (docs/design.md, "A command's stop under a lease"):
  // the grace of a stop while the lease is held ends early if the lease is lost meanwhile. Returns when the
  // command has exited and nothing of its group remains.
  asio::awaitable<void> stop_group() {
    auto ex = co_await asio::this_coro::executor;
    child_.signal_group(SIGTERM);
    auto grace_end = clock::now() + cmd_.grace;
    bool killed = false;
    for (;;) {
      report_deadline();
      if (child_.try_wait()) command_ended();
      if (ended_ && !child_.group_alive()) co_return;
      const auto lease_end = on_steady(latest_kill(lease_.deadline(), cmd_.lease));
      const auto kill_at = std::min(grace_end, lease_end);
      if (!killed && clock::now() >= kill_at) {
        if (kill_at < grace_end)
          say("the lease's time ran out before the grace period; sending SIGKILL to the command's group");
        else if (cmd_.grace.count() > 0)
          say("the command's group outlived the grace period; sending SIGKILL");
        child_.signal_group(SIGKILL);
        killed = true;
      }
      auto wake = clock::now() + group_poll;
      if (!killed) wake = std::min(wake, kill_at);
      asio::steady_timer tick(ex, wake);
      bool again = false;
      if (!ended_) {
        auto r = co_await (child_.wait_exit() || tick.async_wait(use_tuple) ||
                           stop_signals_.async_wait(use_tuple));
        again = r.index() == 2;
      } else {
        auto r = co_await (tick.async_wait(use_tuple) || stop_signals_.async_wait(use_tuple));
        again = r.index() == 1;
      }
      if (again) grace_end = clock::now();
    }
  }

  const exec_command& cmd_;
  lease& lease_;
  group_child& child_;
  group_guard& guard_;
  asio::signal_set& stop_signals_;
  lease_clock::time_point reported_;
  bool ended_ = false;
  bool lost_ = false;
  bool said_timer_failure_ = false;
};

}  // namespace

asio::awaitable<int> run_exec(client& c, const exec_command& cmd) {
  // Before any connection to the server exists: apart from Asio's own descriptors (all close-on-exec), what
  // is open now came from our caller.
  const auto inherited = open_descriptors();
  auto ex = co_await asio::this_coro::executor;
  // A signal the caller ignored (nohup, `&` in a script) stays ignored, for us and for the command.
  asio::signal_set stop_signals(ex);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    if (!ignored(sig)) stop_signals.add(sig);

  std::optional<lease> held;
  std::exception_ptr acquire_failed;
  auto acquired =
      co_await (acquire_into(c, cmd, held, acquire_failed) || stop_signals.async_wait(asio::use_awaitable));
  if (acquired.index() == 1) {
    const int sig = std::get<1>(acquired);
    say(signal_name(sig) + " received before the lock was acquired");
    co_return 128 + sig;
  }
  if (acquire_failed) std::rethrow_exception(acquire_failed);
  lease& l = *held;

  // Processes the command leaves behind become our children when it exits, so we can reap them and know
  // when the group is really empty.
  become_subreaper();
  // The guard holds the lease's deadline from before the command's first instant: should this process be
  // stopped or starved from then on, the guard still stops the command in time.
  std::optional<group_guard> guard;
  std::optional<group_child> child;
  std::optional<spawn_error> failed;
  try {
    const auto deadline = l.deadline();
    // The guard is the backstop: SIGTERM at the deadline, SIGKILL only at the latest instant, so that a
    // baton exec that runs sends its own SIGKILL after --grace first and says so.
    guard.emplace(
        ex, guard_limits{deadline.time_since_epoch(), latest_kill(deadline, cmd.lease).time_since_epoch(),
                         borrowed_time(cmd.lease.effective_safety_margin())});
    child.emplace(ex, cmd.argv,
                  std::vector<std::pair<std::string, std::string>>{
                      {"BATON_FENCING_TOKEN", std::to_string(l.token())},
                      {"BATON_FENCING_SLOT", std::to_string(l.slot())},
                      {"BATON_FENCING_PERMITS", std::to_string(l.permits())},
                      {"BATON_LOCK_KEY", l.key()},
                      {"BATON_LOCK_OWNER", l.owner()}},
                  inherited, -1, guard->command_fd());
  } catch (const spawn_error& e) {
    failed = e;
  }
  if (failed) {
    say(failed->what());
    if (guard) co_await guard->disarm();
    co_await release(l);
    if (!failed->exec_failed()) co_return exit_code::os_error;
    co_return failed->error_number() == ENOENT ? exit_code::command_not_found : exit_code::cannot_execute;
  }

  supervisor s(cmd, l, *child, *guard, stop_signals);
  co_await s.run();
  co_await guard->disarm();
  // A lost lease is not released: the server refused it or could not be reached in time, and in both cases
  // it ends on its own. A release would only delay the exit (by its retries) with nothing to gain.
  if (s.lost()) co_return exit_code::lease_lost;
  const int status = *child->try_wait();
  if (l.active()) co_await release(l);
  co_return status;
}

}  // namespace baton::cli
