// SPDX-License-Identifier: Apache-2.0
#include "lock_commands.hpp"

#include "exit_code.hpp"

#include "baton/common/log.hpp"
#include "baton/detail/lease_fsm.hpp"
#include "baton/error.hpp"
#include "baton/semaphore.hpp"

#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>

namespace baton::cli {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using clock = lease_clock;

// The SDK's one backoff rule (detail::backoff), with this process's own jitter source.
clock::duration backoff(const retry_policy& p, int failures) {
  static detail::jitter_rng rng(std::random_device{}());
  return detail::backoff(p, failures, rng);
}

asio::awaitable<void> sleep_for(clock::duration d) {
  asio::basic_waitable_timer<clock> t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

// One request, repeated like the SDK repeats its own: transient errors retried with backoff, the same
// arguments every time (every protocol request is safe to repeat), up to retry.max_attempts.
template <class Request>
auto with_retries(const client_config& config, Request request) -> decltype(request()) {
  for (int attempt = 1;; ++attempt) {
    auto r = co_await request();
    if (!r.ec || !is_transient(r.ec) || attempt >= config.retry.max_attempts) co_return r;
    co_await sleep_for(backoff(config.retry, attempt));
  }
}

// Keys and owners are chosen by clients: what the CLI prints of them is escaped as a log value, so a line
// break or a bidirectional control in one cannot forge or reorder what the terminal shows.
std::string quoted(const std::string& key) {
  std::string out = log::printable(key);
  return out.starts_with('"') ? out : "\"" + out + "\"";
}

// JSON as Boost.JSON writes it, with the layout controls (which it leaves as they are) written \uNNNN:
// the same string to a parser, and no reordered line on a terminal. They can only occur inside strings.
std::string terminal_safe_json(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    std::size_t n = (b & 0xe0) == 0xc0 ? 2 : (b & 0xf0) == 0xe0 ? 3 : 0;
    if (n != 0 && i + n <= text.size()) {
      char32_t cp = n == 2 ? (b & 0x1f) : (b & 0x0f);
      for (std::size_t k = 1; k < n; ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3f);
      if (log::is_layout_control(cp)) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
        out += buf;
        i += n - 1;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

void print_json(const json::object& o) {
  std::cout << terminal_safe_json(json::serialize(o)) << std::endl;
}

[[noreturn]] void fail(const std::string& what, const boost::system::error_code& ec,
                       const std::string& diagnostic) {
  throw cli_error(exit_code_for(ec), describe(what, ec, diagnostic));
}

}  // namespace

// A refused renew or proclaim names its reason before the server's message.
[[noreturn]] void fail_lost(const std::string& what, const renew_reply& r) {
  fail(what, r.ec, r.lost_reason.empty() ? r.diagnostic : r.lost_reason + ": " + r.diagnostic);
}

std::string held_by(const std::string& key, const holder_info& holder) {
  if (holder.lock_delay_remaining.count() > 0)
    return quoted(key) + " is in lock-delay after the lease with token " + std::to_string(holder.token) +
           " ended (" + std::to_string(holder.lock_delay_remaining.count()) + " ms left)";
  return quoted(key) + " is held by " + log::printable(holder.owner) + " (token " +
         std::to_string(holder.token) + ", " + std::to_string(holder.ttl_remaining.count()) + " ms left)";
}

asio::awaitable<int> run_acquire(client& c, const acquire_command& cmd) {
  const std::string what = "acquire " + quoted(cmd.key);
  lease_options options;
  options.ttl = cmd.ttl;
  options.lock_delay = cmd.lock_delay;
  // One owner for every try (the SDK keeps it across retries): a retry after a lost reply is then the same
  // owner to the server, which grants it a newer token instead of refusing it as "held".
  if (cmd.owner) options.owner = *cmd.owner;
  lease l;
  std::optional<std::string> gave_up;  // the wait_timeout's diagnostic
  // A lock is a semaphore of 1 permit: the same requests as the client's own acquire.
  semaphore permits(c, cmd.key, cmd.permits);
  try {
    if (cmd.wait) {
      // Waiting rides out a server outage (client::acquire); a single try reports it after the retries.
      if (cmd.wait_timeout)
        l = co_await permits.async_acquire(options, *cmd.wait_timeout);
      else
        l = co_await permits.async_acquire(options);
    } else {
      auto r = co_await permits.async_try_acquire(options);
      // Refusals go to stderr only: a script that forgets to check the status must not find the holder's
      // token on stdout and write with it.
      if (!r.acquired) throw cli_error(exit_code::not_acquired, held_by(cmd.key, r.holder));
      l = std::move(*r.acquired);
    }
  } catch (const exception& e) {
    if (e.code() != error::wait_timeout) fail(what, e.code(), e.diagnostic());
    gave_up = e.diagnostic();
  }
  if (gave_up) {
    // Name the holder that outlasted the wait, if the lock is still held.
    std::optional<holder_info> holder;
    try {
      holder = co_await c.async_get(cmd.key);
    } catch (const exception&) {
    }
    if (holder) throw cli_error(exit_code::not_acquired, "gave up waiting: " + held_by(cmd.key, *holder));
    fail(what, make_error_code(error::wait_timeout), *gave_up);
  }
  json::object granted{
      {"key", cmd.key}, {"owner", l.owner()}, {"token", l.token()}, {"ttl_ms", cmd.ttl.count()}};
  if (cmd.permits > 1) {
    granted["slot"] = l.slot();
    granted["permits"] = l.permits();
  }
  print_json(granted);
  // The lease is the caller's now: not renewed here, and not released when this process ends.
  l.detach();
  co_return exit_code::ok;
}

asio::awaitable<int> run_renew(client& c, const renew_command& cmd) {
  const auto& config = c.config();
  // A lease held elsewhere: the protocol's renew, without a lease of this process around it.
  const auto backend = make_backend(c.get_executor(), config);
  auto& b = *backend;
  auto r = co_await with_retries(
      config, [&] { return b.renew(cmd.key, cmd.owner, cmd.token, cmd.ttl, config.request_timeout); });
  if (r.ec) fail_lost("renew " + quoted(cmd.key), r);
  print_json({{"key", cmd.key}, {"owner", cmd.owner}, {"token", cmd.token}, {"ttl_ms", cmd.ttl.count()}});
  co_return exit_code::ok;
}

asio::awaitable<int> run_proclaim(client& c, const proclaim_command& cmd) {
  const auto& config = c.config();
  const auto backend = make_backend(c.get_executor(), config);
  auto& b = *backend;
  // Retried like a renew: the same value under the same condition, so a retry of one that took effect is
  // harmless.
  auto r = co_await with_retries(
      config, [&] { return b.proclaim(cmd.key, cmd.owner, cmd.token, cmd.value, config.request_timeout); });
  if (r.ec) fail_lost("proclaim " + quoted(cmd.key), r);
  print_json({{"key", cmd.key}, {"owner", cmd.owner}, {"token", cmd.token}, {"value", cmd.value}});
  co_return exit_code::ok;
}

asio::awaitable<int> run_release(client& c, const release_command& cmd) {
  const auto& config = c.config();
  const auto backend = make_backend(c.get_executor(), config);
  auto& b = *backend;
  auto r = co_await with_retries(
      config, [&] { return b.release(cmd.key, cmd.owner, cmd.token, config.request_timeout); });
  const std::string what = "release " + quoted(cmd.key);
  if (r.ec) fail(what, r.ec, r.diagnostic);
  if (r.outcome == release_outcome::not_owner) fail(what, make_error_code(error::not_owner), r.diagnostic);
  print_json({{"key", cmd.key}, {"released", true}, {"outcome", to_string(r.outcome)}});
  co_return exit_code::ok;
}

asio::awaitable<int> run_get(client& c, const get_command& cmd) {
  std::optional<holder_info> holder;
  try {
    holder = co_await c.async_get(cmd.key);
  } catch (const exception& e) {
    fail("get " + quoted(cmd.key), e.code(), e.diagnostic());
  }
  if (!holder) {
    print_json({{"key", cmd.key}, {"held", false}});
  } else {
    print_json({{"key", cmd.key},
                {"held", true},
                {"owner", holder->owner},
                {"token", holder->token},
                {"ttl_remaining_ms", holder->ttl_remaining.count()}});
  }
  co_return exit_code::ok;
}

asio::awaitable<int> run_record_get(client& c, const record_get_command& cmd) {
  std::optional<lock_record> record;
  try {
    record = co_await c.async_read_record(cmd.key);
  } catch (const exception& e) {
    fail("record get " + quoted(cmd.key), e.code(), e.diagnostic());
  }
  if (!record) {
    print_json({{"key", cmd.key}, {"record", false}});
  } else {
    print_json({{"key", cmd.key},
                {"record", true},
                {"value", record->value},
                {"token", record->token},
                {"version", record->version},
                {"owner", record->owner}});
  }
  co_return exit_code::ok;
}

namespace {
// A table cell: printable as a log value is (quotes only where needed), cut to `width` with "..." after.
std::string cell(const std::string& text, std::size_t width) {
  if (text.empty()) return "-";
  std::string out = log::printable(text);
  if (out.size() <= width) return out;
  // Cut at a character's first byte, so the cell stays UTF-8.
  std::size_t cut = width - 3;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80)
    --cut;
  return out.substr(0, cut) + "...";
}

std::string remaining_text(milliseconds ms) {
  char buf[32];
  if (ms.count() < 10'000)
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ms.count()));
  else
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(ms.count() / 1000));
  return buf;
}
}  // namespace

asio::awaitable<int> run_ls(client& c, const ls_command& cmd) {
  std::vector<listed_lock> shown;
  std::string after = cmd.after;
  std::string more;  // the cursor after the last lock shown, when more remain
  for (;;) {
    const auto want = std::min<std::size_t>(cmd.limit - shown.size(), 1000);
    lock_page page;
    try {
      page = co_await c.async_list(cmd.prefix, after, want);
    } catch (const exception& e) {
      fail("ls " + quoted(cmd.prefix), e.code(), e.diagnostic());
    }
    for (auto& l : page.locks)
      shown.push_back(std::move(l));
    if (page.next.empty()) break;
    if (shown.size() >= cmd.limit) {
      more = page.next;
      break;
    }
    after = std::move(page.next);
  }
  if (cmd.json) {
    for (const auto& l : shown) {
      json::object o{{"key", l.key},
                     {"kind", l.kind},
                     {"owner", l.holder.owner},
                     {"token", l.holder.token},
                     {"ttl_remaining_ms", l.holder.ttl_remaining.count()},
                     {"value", l.holder.value},
                     {"waiters", l.waiters}};
      if (!l.client.empty()) o["client"] = l.client;
      if (l.kind == "permit") {
        o["slot"] = l.holder.slot;
        o["permits"] = l.permits;
      }
      if (l.holder.lock_delay_remaining.count() > 0)
        o["lock_delay_remaining_ms"] = l.holder.lock_delay_remaining.count();
      print_json(o);
    }
  } else {
    std::printf("%-40s %-24s %12s %10s %7s %s\n", "KEY", "OWNER", "TOKEN", "REMAINING", "WAITERS", "VALUE");
    for (const auto& l : shown)
      std::printf(
          "%-40s %-24s %12llu %10s %7llu %s\n",
          // A semaphore's permit: its slot of the count after the key.
          l.kind == "permit"
              ? cell(l.key + " [" + std::to_string(l.holder.slot) + "/" + std::to_string(l.permits) + "]", 40)
                    .c_str()
              : cell(l.key, 40).c_str(),
          // A key in lock-delay has no owner: the column says so, REMAINING is the delay's.
          l.kind == "lock_delay" ? "(lock-delay)" : cell(l.holder.owner, 24).c_str(),
          static_cast<unsigned long long>(l.holder.token), remaining_text(l.holder.ttl_remaining).c_str(),
          static_cast<unsigned long long>(l.waiters), cell(l.holder.value, 60).c_str());
    std::fflush(stdout);
  }
  if (!more.empty())
    std::fprintf(stderr, "baton: more locks follow; continue with --after %s\n",
                 log::printable(more).c_str());
  co_return exit_code::ok;
}

asio::awaitable<int> run_break(client& c, const break_command& cmd) {
  holder_info broken;
  try {
    broken = co_await c.async_break(cmd.key, cmd.token);
  } catch (const exception& e) {
    fail("break " + quoted(cmd.key), e.code(), e.diagnostic());
  }
  print_json({{"key", cmd.key},
              {"broken", true},
              {"owner", broken.owner},
              {"token", broken.token},
              {"ttl_remaining_ms", broken.ttl_remaining.count()}});
  co_return exit_code::ok;
}

}  // namespace baton::cli
