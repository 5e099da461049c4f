// SPDX-License-Identifier: Apache-2.0
#include "exec_command.hpp"

#include "baton/common/process_group.hpp"
#include "exit_code.hpp"
#include "lock_commands.hpp"

#include "baton/config.hpp"
#include "baton/error.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <signal.h>

#include <cstdio>
#include <string>

namespace baton::cli {
namespace {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using clock = std::chrono::steady_clock;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// Processes the command leaves in its group have no exit notification: look this often while stopping them.
constexpr auto group_poll = std::chrono::milliseconds(50);

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
  // active() reads the clock itself, so it can report the loss before the renewal task has named a reason.
  return reason.empty() ? "its local deadline passed" : reason;
}

// A release the server never confirms is not the command's failure: the lease then ends with its TTL.
asio::awaitable<void> release(lease& l) {
  std::string warning;
  try {
    if (co_await l.release() == release_outcome::not_owner)
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
    if (cmd.wait) {
      out.emplace(co_await c.acquire(cmd.key, cmd.lease, cmd.wait_timeout));
      co_return;
    }
    auto r = co_await c.try_acquire(cmd.key, cmd.lease);
    if (!r.acquired) throw cli_error(exit_code::not_acquired, held_by(cmd.key, r.holder));
    out = std::move(r.acquired);
  } catch (const exception& e) {
    failed = std::make_exception_ptr(cli_error(
        exit_code_for(e.code()), describe("acquire \"" + cmd.key + "\"", e.code(), e.diagnostic())));
  } catch (...) {
    failed = std::current_exception();
  }
}

// Watches the command while the lease lasts and stops its process group when it must stop.
class supervisor {
 public:
  supervisor(const exec_command& cmd, lease& l, group_child& child, asio::signal_set& stop_signals)
      : cmd_(cmd), lease_(l), child_(child), stop_signals_(stop_signals) {}

  /// Returns once the command has exited and its group is empty.
  asio::awaitable<void> run() {
    auto first =
        co_await (child_.wait_exit() || lease_.wait_lost() || stop_signals_.async_wait(asio::use_awaitable));
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
      default:
        say(signal_name(std::get<2>(first)) + " received; stopping the command");
        co_await stop_group();
        break;
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

  // SIGTERM to the group, SIGKILL once the grace period is over (at once on a second stop signal); returns
  // when the command has exited and nothing of its group remains.
  asio::awaitable<void> stop_group() {
    auto ex = co_await asio::this_coro::executor;
    child_.signal_group(SIGTERM);
    auto kill_at = clock::now() + cmd_.grace;
    bool killed = false;
    for (;;) {
      if (child_.try_wait()) command_ended();
      if (ended_ && !child_.group_alive()) co_return;
      if (!killed && clock::now() >= kill_at) {
        if (cmd_.grace.count() > 0) say("the command's group outlived the grace period; sending SIGKILL");
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
      if (again) kill_at = clock::now();
    }
  }

  const exec_command& cmd_;
  lease& lease_;
  group_child& child_;
  asio::signal_set& stop_signals_;
  bool ended_ = false;
  bool lost_ = false;
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
  std::optional<group_child> child;
  std::optional<spawn_error> failed;
  try {
    child.emplace(
        ex, cmd.argv,
        std::vector<std::pair<std::string, std::string>>{{"BATON_FENCING_TOKEN", std::to_string(l.token())},
                                                         {"BATON_LOCK_KEY", l.key()},
                                                         {"BATON_LOCK_OWNER", l.owner()}},
        inherited);
  } catch (const spawn_error& e) {
    failed = e;
  }
  if (failed) {
    say(failed->what());
    co_await release(l);
    if (!failed->exec_failed()) co_return exit_code::os_error;
    co_return failed->error_number() == ENOENT ? exit_code::command_not_found : exit_code::cannot_execute;
  }

  supervisor s(cmd, l, *child, stop_signals);
  co_await s.run();
  // A lost lease is not released: the server refused it or could not be reached in time, and in both cases
  // it ends on its own. A release would only delay the exit (by its retries) with nothing to gain.
  if (s.lost()) co_return exit_code::lease_lost;
  const int status = *child->try_wait();
  if (l.active()) co_await release(l);
  co_return status;
}

}  // namespace baton::cli
