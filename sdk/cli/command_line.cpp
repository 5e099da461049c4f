// SPDX-License-Identifier: Apache-2.0
#include "command_line.hpp"

#include "baton/common/duration.hpp"
#include "baton/common/stop_schedule.hpp"
#include "baton/common/token_file.hpp"
#include "baton/error.hpp"
#include "exit_code.hpp"

#include <boost/program_options.hpp>

#include <algorithm>
#include <charconv>
#include <limits>
#include <sstream>

#ifndef BATON_VERSION
#define BATON_VERSION "unknown"
#endif

namespace baton::cli {
namespace {

namespace po = boost::program_options;

constexpr const char* default_server = "http://127.0.0.1:7070";
constexpr unsigned help_width = 110;

const char* const top_usage = R"(usage: baton [--server URL] COMMAND [ARGS...]

Take, keep and hand back Baton locks (lease + fencing token) from the shell.

commands:
  acquire KEY --ttl D [--owner O] [--wait] [--wait-timeout D] [--lock-delay D]
      take the lock and print {"key","owner","token","ttl_ms"}. The lease is not renewed and stays held
      after baton exits: renew it before the TTL runs out, release it when done.
  renew KEY --owner O --token N --ttl D
      extend a lease you hold; prints {"key","owner","token","ttl_ms"}
  release KEY --owner O --token N
      free a lease you hold; prints {"key","released","outcome"}
  proclaim KEY --owner O --token N --value V
      publish a new value with a lease you hold, same token and expiry; prints {"key","owner","token","value"}
  get KEY
      show the holder: {"key","held":true,"owner","token","ttl_remaining_ms"} or {"key","held":false}
  record get KEY
      show the lock's record, kept beyond leases: {"key","record":true,"value","token","version","owner"}
  ls [PREFIX] [--limit N] [--after KEY] [--json]
      list held locks under PREFIX in key order: a table (key, owner, token, remaining, waiters, value), or
      with --json one {"key","kind","owner","client","token","ttl_remaining_ms","value","waiters"} per line
  break KEY [--token N]
      end the lease on KEY whoever holds it (needs admin access); with --token, only the lease with token N;
      prints {"key","broken":true,"owner","token","ttl_remaining_ms"}
  exec KEY --ttl D [--wait] [--wait-timeout D] [--grace D] [--renew-every D] [--safety-margin D]
      [--lock-delay D] -- CMD ...
      run CMD while holding the lock, renewing it all along; the moment the lease is lost, stop CMD's
      whole process group (SIGTERM, then SIGKILL after the grace period, before the server can expire the
      lease). CMD gets BATON_FENCING_TOKEN, BATON_LOCK_KEY and BATON_LOCK_OWNER in its environment.
  conformance [--restart-command CMD]
      check the server against the protocol's guarantees (docs/protocol.md) on keys conformance/...;
      prints one PASS/FAIL/SKIP line per check and a summary; CMD restarts the server for the restart checks

options of every command:
  --server URL           lock server (default: $BATON_SERVER, else http://127.0.0.1:7070)
  --request-timeout D    bound on one request's round trip (default 2s)
  --ca-file FILE         https:// and etcds://: trust the CAs in this PEM file instead of the system store
  --cert FILE            client certificate (PEM) for servers that require mutual TLS; needs --key
  --key FILE             private key (PEM) of --cert
  --token-file FILE      bearer token for batond, read from FILE (default: $BATON_TOKEN, else none)
  --etcd-password-file FILE
                         etcd:// and etcds://: the password of the URL's user (etcd://user@host:2379), read
                         from FILE (one trailing newline stripped)
  --etcd-lease-revocation-bug warn|refuse
                         etcd:// and etcds://: a member whose etcd can revoke live leases (3.4 before
                         3.4.31, 3.5 before 3.5.13) is warned about on stderr (warn, the default) or refused
  -h [ --help ]          this help; after a command, that command's help
  --version              baton's version

Durations are integers with a unit, ms, s, m or h: 500ms, 10s, 2m, 1h, 1m30s.
Errors are one line on stderr, `baton: ...`; stdout carries only JSON answers (or, for exec, CMD's output).

exit status:
  0    done (exec: CMD's own status, 128+N if a signal N ended it, when it ran under a valid lease)
  64   usage error: unknown command or option, missing argument, bad duration or number
  65   the server refused a value as malformed (a bad key, a TTL outside its bounds)
  69   the server could not be reached in time, or cannot store changes right now
  70   the server's answer broke the protocol, or an internal error; conformance: a check failed
  71   exec: a system call failed (fork, pipe)
  75   not acquired: another owner holds the lock (or --wait-timeout passed); nothing on stdout
  76   lease lost: exec's lease ended before CMD did; renew: the server refused the renew
  77   release refused: another owner or a newer token holds the lock; break refused: the lock is not held,
       or held with another token than --token
  78   access denied: no valid bearer token (401), or the token may not do this on this key (403)
  126  exec: CMD could not be run
  127  exec: CMD was not found

See docs/cli.md for the details.
)";

struct command_spec {
  const char* name;
  const char* synopsis;
  const char* description;
};

constexpr command_spec specs[] = {
    {"acquire",
     "baton acquire KEY --ttl D [--owner O] [--wait] [--wait-timeout D] [--lock-delay D] [--permits N]",
     R"(Takes the lock KEY for --ttl and prints {"key","owner","token","ttl_ms"}. The lease is not renewed
and outlives this command: renew it (baton renew) before the TTL runs out and release it when done.
Without --owner the owner is <hostname>:<pid>#<random>. Acquiring again with the same --owner gives a
newer token and retires the old one. When another owner holds the lock: exit 75 and one line on stderr
naming the holder, nothing on stdout; with --wait, waits for the lock instead. With --permits N (2 or
more), takes one of N permits of the semaphore KEY (the lowest free slot) and prints "slot" and
"permits" too; exit 75 also when KEY is in use with another permit count.)"},
    {"renew", "baton renew KEY --owner O --token N --ttl D",
     R"(Extends the lease of owner O with token N to --ttl from now, and prints
{"key","owner","token","ttl_ms"}. A refused renew means the lease is gone for good (exit 76);
acquire again for a new token.)"},
    {"release", "baton release KEY --owner O --token N",
     R"(Frees the lock if owner O with token N holds it, and prints {"key","released":true,"outcome"}:
outcome "released", or "already_free" when nobody held it any more. Exit 77 when another owner or a
newer token holds it; nothing changes then.)"},
    {"proclaim", "baton proclaim KEY --owner O --token N --value V",
     R"(Replaces the value published with the lease of owner O with token N (a leader's new address), and
prints {"key","owner","token","value"}. The token and the lease's expiry stay: it is no renew. --value ""
clears the value. A refusal means the lease is gone (exit 76, with the reason); a server without the
feature "proclaim" is not sent it (exit 64: use a server that has it).)"},
    {"get", "baton get KEY",
     R"(Prints the holder of KEY, {"key","held":true,"owner","token","ttl_remaining_ms"}, or
{"key","held":false} when the lock is free. Both exit 0.)"},
    {"record", "baton record get KEY",
     R"(Prints the lock's record of KEY (docs/protocol.md, "record"), the value its holders keep beyond any
lease: {"key","record":true,"value","token","version","owner"}, or {"key","record":false} when none was
ever written. Both exit 0; a server without the feature "lock_record" is not asked (exit 64). A record is
written by a live holder through the SDK (lease::async_write_record).)"},
    {"ls", "baton ls [PREFIX] [--limit N] [--after KEY] [--json]",
     R"(Lists the held locks whose key starts with PREFIX (every key without one), in key order, as a table:
KEY, OWNER, TOKEN, REMAINING (the TTL left by the server's clock), WAITERS (queued acquires) and VALUE.
--json prints one JSON object per lock and line instead:
{"key","kind","owner","client","token","ttl_remaining_ms","value","waiters"}. At most --limit locks
(default 1000) are printed, fetched in pages; when more remain, a line on stderr names the --after that
continues. Needs read access to PREFIX; a server without the feature "list_locks" is not asked (exit 64).)"},
    {"break", "baton break KEY [--token N]",
     R"(Ends the lease on KEY whoever holds it, as if its holder had released it: the next holder gets a
larger token, as always, and the old holder's next renew is refused (reason "broken"). With --token N
only the lease with token N is ended (the one you looked at with baton get or baton ls); another holder
is left alone (exit 77). Prints {"key","broken":true,"owner","token","ttl_remaining_ms"} of the lease
ended; exit 77 when the lock is not held. Needs a token with admin access to KEY (exit 78 otherwise); a
server without the feature "break_lease" is not asked (exit 64). Not retried: after exit 69 the outcome
is unknown, look with baton get. The holder's process is not stopped: fencing tokens protect the resource.)"},
    {"exec",
     "baton exec KEY --ttl D [--wait] [--wait-timeout D] [--grace D] [--renew-every D] [--safety-margin D] "
     "[--lock-delay D] [--permits N] -- CMD [ARGS...]",
     R"(Acquires KEY (with --permits N, one of N permits of the semaphore KEY), runs CMD (no shell) in its
own process group with BATON_FENCING_TOKEN, BATON_FENCING_SLOT (the permit's slot, 0 for a lock),
BATON_FENCING_PERMITS (the count, 1 for a lock), BATON_LOCK_KEY and BATON_LOCK_OWNER in its environment, renews the lease while CMD runs and releases it
when CMD ends.
The moment the lease is lost, CMD's process group gets SIGTERM, and SIGKILL after --grace; baton then
exits 76. That grace runs on borrowed time, between the local deadline and the earliest moment the server
can expire the lease: it may be at most half the safety margin (ttl/20 by default), and a longer one is
refused. A supervisor process enforces the deadline even while baton itself is stopped. SIGTERM, SIGINT or SIGHUP to baton stop the group the same way (a second one: SIGKILL at
once), and baton exits with CMD's status. Processes CMD leaves behind in its group are stopped the same
way before the lease is released. Exit status: CMD's (128+N for signal N) when it ran under a valid
lease; 75 not acquired, 76 lease lost, 126/127 CMD not runnable/not found.)"},
    {"conformance", "baton conformance [--server URL] [--restart-command CMD]",
     R"(Checks the server's guarantees against docs/protocol.md from the outside, with raw HTTP requests on
keys conformance/<random>/<check>: one winner among concurrent acquires, refusals, fencing tokens that
only increase, conditional and idempotent release, expiry on time (never early), renewals that extend,
superseded tokens refused, long-poll answers within 250 ms, errors for bad input, advertised capabilities.
With --restart-command CMD, CMD (run through /bin/sh) must restart the server on the same URL; held leases,
released locks and the token counter must survive it. An etcd:// or etcds:// server is checked through the
SDK's etcd backend, and the checks only the wire shows (statuses, bodies) are skipped. An https:// server
is checked over TLS (--ca-file, --cert, --key); a server that requires bearer tokens needs --token-file (or
$BATON_TOKEN) with read-write access to conformance/, else the run ends at once with exit 78. Prints
`PASS  check`, `FAIL  check: reason` or `SKIP  check: reason` per check, then a summary. Takes about 10
seconds (20 against etcd).
Exit 0 when no check failed (skipped ones are not passed), 70 when any failed, 69 when the server cannot be
reached, 78 when it refuses the run's token (or wants one).)"},
};

const command_spec* find_spec(std::string_view name) {
  for (const auto& s : specs)
    if (name == s.name) return &s;
  return nullptr;
}

[[noreturn]] void usage_error(const std::string& message) {
  throw cli_error(exit_code::usage, message);
}

po::options_description common_options() {
  po::options_description d("options of every command", help_width, help_width / 2);
  auto add = d.add_options();
  add("server", po::value<std::string>()->value_name("URL"),
      "lock server (default: $BATON_SERVER, else http://127.0.0.1:7070)");
  add("request-timeout", po::value<std::string>()->value_name("D"),
      "bound on one request's round trip (default 2s)");
  add("ca-file", po::value<std::string>()->value_name("FILE"),
      "https:// and etcds://: trust the CAs in this PEM file instead of the system store");
  add("cert", po::value<std::string>()->value_name("FILE"),
      "client certificate (PEM) for servers that require mutual TLS; needs --key");
  add("key", po::value<std::string>()->value_name("FILE"), "private key (PEM) of --cert");
  add("token-file", po::value<std::string>()->value_name("FILE"),
      "bearer token for batond, read from FILE (default: $BATON_TOKEN, else none)");
  add("etcd-password-file", po::value<std::string>()->value_name("FILE"),
      "etcd:// and etcds://: the password of the URL's user (etcd://user@host:2379), read from FILE (one "
      "trailing newline stripped)");
  add("etcd-lease-revocation-bug", po::value<std::string>()->value_name("warn|refuse"),
      "etcd:// and etcds://: a member whose etcd can revoke live leases (3.4 before 3.4.31, 3.5 before "
      "3.5.13) is warned about on stderr (warn, the default) or refused");
  add("help,h", "this help");
  return d;
}

po::options_description command_options(std::string_view name) {
  po::options_description d("options", help_width, help_width / 2);
  auto add = d.add_options();
  if (name == "acquire" || name == "exec" || name == "renew")
    add("ttl", po::value<std::string>()->value_name("D"), "lease time to live (required)");
  if (name == "acquire" || name == "exec")
    add("lock-delay", po::value<std::string>()->value_name("D"),
        "once the lease ends by expiry or a break (not a release), keep the key from everyone for D "
        "(server feature lock_delay; default none)");
  if (name == "acquire" || name == "exec")
    add("permits", po::value<std::string>()->value_name("N"),
        "take one of N permits of a semaphore (2 to 65535; server feature semaphores; default 1: a lock)");
  if (name == "acquire")
    add("owner", po::value<std::string>()->value_name("O"), "owner string, used as given");
  if (name == "ls") {
    add("limit", po::value<std::string>()->value_name("N"), "the most locks printed (default 1000)");
    add("after", po::value<std::string>()->value_name("KEY"), "list the keys after KEY only");
    add("json", po::bool_switch(), "one JSON object per lock and line instead of a table");
  }
  if (name == "break")
    add("token", po::value<std::string>()->value_name("N"), "break only the lease with this fencing token");
  if (name == "renew" || name == "release" || name == "proclaim") {
    add("owner", po::value<std::string>()->value_name("O"), "owner of the lease (required)");
    add("token", po::value<std::string>()->value_name("N"), "fencing token of the lease (required)");
  }
  if (name == "proclaim")
    add("value", po::value<std::string>()->value_name("V"), "the value to publish (required; may be \"\")");
  if (name == "acquire" || name == "exec") {
    add("wait", po::bool_switch(), "wait for the lock while another owner holds it (long-poll)");
    add("wait-timeout", po::value<std::string>()->value_name("D"),
        "give up waiting after D (implies --wait)");
  }
  if (name == "conformance")
    add("restart-command", po::value<std::string>()->value_name("CMD"),
        "after the other checks, run CMD through /bin/sh to restart the server on the same URL, then check "
        "what survived (without it those checks are skipped)");
  if (name == "exec") {
    add("grace", po::value<std::string>()->value_name("D"),
        "time between SIGTERM and SIGKILL, at most half the safety margin (default 5s or that, the shorter)");
    add("renew-every", po::value<std::string>()->value_name("D"), "renew period (default ttl/3)");
    add("safety-margin", po::value<std::string>()->value_name("D"),
        "the local deadline comes this long before the lease's TTL runs out (default ttl/10)");
  }
  return d;
}

std::string command_help(const command_spec& spec) {
  std::ostringstream out;
  out << "usage: " << spec.synopsis << "\n\n" << spec.description << "\n\n";
  out << command_options(spec.name) << "\n" << common_options() << "\n";
  return out.str();
}

milliseconds duration_value(const po::variables_map& vm, const std::string& option) {
  const auto& text = vm[option].as<std::string>();
  auto d = parse_duration(text);
  if (!d) usage_error("--" + option + ": \"" + text + "\" is not a duration (use e.g. 500ms, 10s, 2m, 1h)");
  return *d;
}

milliseconds positive_duration(const po::variables_map& vm, const std::string& option) {
  auto d = duration_value(vm, option);
  if (d.count() <= 0) usage_error("--" + option + " must be more than 0");
  return d;
}

const std::string& required_string(const po::variables_map& vm, const std::string& option) {
  if (!vm.count(option)) usage_error("--" + option + " is required");
  const auto& s = vm[option].as<std::string>();
  if (s.empty()) usage_error("--" + option + " must not be empty");
  return s;
}

std::uint64_t token_value(const po::variables_map& vm) {
  const auto& text = required_string(vm, "token");
  std::uint64_t token = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), token);
  // The protocol's tokens are 1 to 2^63-1; anything else cannot name a lease.
  if (ec != std::errc{} || end != text.data() + text.size() || token == 0 ||
      token > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    usage_error("--token: \"" + text + "\" is not a fencing token (an integer from 1 to 2^63-1)");
  return token;
}

std::uint32_t permits_value(const po::variables_map& vm) {
  if (!vm.count("permits")) return 1;
  const auto& text = required_string(vm, "permits");
  std::uint32_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size() || n < 1 || n > 65535)
    usage_error("--permits: \"" + text + "\" is not a permit count (an integer from 1 to 65535)");
  return n;
}

std::optional<milliseconds> wait_timeout_value(const po::variables_map& vm, bool& wait) {
  if (!vm.count("wait-timeout")) return std::nullopt;
  wait = true;
  return duration_value(vm, "wait-timeout");
}

// Options that take a value, so the search for the command word can skip that value.
bool takes_value(std::string_view arg) {
  return arg == "--server" || arg == "--request-timeout" || arg == "--ca-file" || arg == "--cert" ||
         arg == "--key" || arg == "--token-file" || arg == "--etcd-password-file" ||
         arg == "--etcd-lease-revocation-bug";
}

// A token is one word of visible characters; the message never repeats it.
std::string checked_token(std::string token, const std::string& source) {
  for (unsigned char c : token)
    if (c <= 0x20 || c == 0x7f)
      usage_error(source + " must hold one token without spaces or control characters");
  return token;
}

bool is_etcd(const std::string& server_url) {
  return server_url.rfind("etcd://", 0) == 0 || server_url.rfind("etcds://", 0) == 0;
}

client_config client_settings(const po::variables_map& vm, const char* env_server, const char* env_token) {
  client_config c;
  if (vm.count("server"))
    c.server_url = vm["server"].as<std::string>();
  else if (env_server && *env_server)
    c.server_url = env_server;
  else
    c.server_url = default_server;
  if (vm.count("request-timeout")) c.request_timeout = positive_duration(vm, "request-timeout");
  if (vm.count("ca-file")) c.tls.ca_file = required_string(vm, "ca-file");
  if (vm.count("cert")) c.tls.cert_file = required_string(vm, "cert");
  if (vm.count("key")) c.tls.key_file = required_string(vm, "key");
  if (c.tls.cert_file.empty() != c.tls.key_file.empty()) usage_error("--cert and --key go together");
  if (vm.count("etcd-password-file")) {
    c.etcd_password_file = required_string(vm, "etcd-password-file");
    if (!is_etcd(c.server_url))
      usage_error("--etcd-password-file needs an etcd:// or etcds:// server, got \"" + c.server_url + "\"");
  }
  if (vm.count("etcd-lease-revocation-bug")) {
    const auto& policy = vm["etcd-lease-revocation-bug"].as<std::string>();
    if (policy == "warn")
      c.etcd_lease_revocation_bug = etcd_bug_policy::warn;
    else if (policy == "refuse")
      c.etcd_lease_revocation_bug = etcd_bug_policy::refuse;
    else
      usage_error("--etcd-lease-revocation-bug: expected warn or refuse, got \"" + policy + "\"");
    if (!is_etcd(c.server_url))
      usage_error("--etcd-lease-revocation-bug needs an etcd:// or etcds:// server, got \"" + c.server_url +
                  "\"");
  }
  if (!c.tls.empty() && !uses_tls(c.server_url))
    usage_error("--ca-file, --cert and --key need an https:// or etcds:// server, got \"" + c.server_url +
                "\"");
  // --token-file wins over $BATON_TOKEN; main() reads the file (parsing stays free of I/O).
  if (!vm.count("token-file") && env_token && *env_token)
    c.bearer_token = checked_token(env_token, "$BATON_TOKEN");
  try {
    c.validate();
  } catch (const exception& e) {
    usage_error(e.diagnostic());
  }
  return c;
}

command build(std::string_view name, std::string key, const po::variables_map& vm,
              std::vector<std::string> cmd_argv) {
  if (name == "get") return get_command{std::move(key)};
  if (name == "ls") {
    ls_command l{std::move(key), {}, 1000, vm["json"].as<bool>()};
    if (vm.count("after")) l.after = vm["after"].as<std::string>();
    if (vm.count("limit")) {
      const auto& text = vm["limit"].as<std::string>();
      std::size_t n = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (ec != std::errc{} || end != text.data() + text.size() || n == 0)
        usage_error("--limit: \"" + text + "\" is not a number of locks (an integer from 1)");
      l.limit = n;
    }
    return l;
  }
  if (name == "break") return break_command{std::move(key), vm.count("token") ? token_value(vm) : 0};
  if (name == "record") return record_get_command{std::move(key)};
  if (name == "conformance") {
    conformance_command c;
    if (vm.count("restart-command")) c.restart_command = required_string(vm, "restart-command");
    return c;
  }
  if (name == "release")
    return release_command{std::move(key), required_string(vm, "owner"), token_value(vm)};
  if (name == "proclaim") {
    if (!vm.count("value")) usage_error("--value is required (--value \"\" clears the value)");
    return proclaim_command{std::move(key), required_string(vm, "owner"), token_value(vm),
                            vm["value"].as<std::string>()};
  }
  if (!vm.count("ttl")) usage_error("--ttl is required");
  const auto ttl = positive_duration(vm, "ttl");
  if (name == "renew")
    return renew_command{std::move(key), required_string(vm, "owner"), token_value(vm), ttl};
  if (name == "acquire") {
    acquire_command a{std::move(key), ttl, std::nullopt, vm["wait"].as<bool>(), std::nullopt};
    if (vm.count("owner")) a.owner = required_string(vm, "owner");
    if (vm.count("lock-delay")) a.lock_delay = duration_value(vm, "lock-delay");
    a.permits = permits_value(vm);
    a.wait_timeout = wait_timeout_value(vm, a.wait);
    return a;
  }
  exec_command e;
  e.key = std::move(key);
  e.lease.ttl = ttl;
  if (vm.count("renew-every")) e.lease.renew_every = positive_duration(vm, "renew-every");
  if (vm.count("safety-margin")) e.lease.safety_margin = positive_duration(vm, "safety-margin");
  if (vm.count("lock-delay")) e.lease.lock_delay = duration_value(vm, "lock-delay");
  try {
    e.lease.validate();
  } catch (const exception& ex) {
    usage_error(ex.diagnostic());
  }
  e.wait = vm["wait"].as<bool>();
  e.wait_timeout = wait_timeout_value(vm, e.wait);
  e.permits = permits_value(vm);
  e.grace =
      exec_grace(e.lease, vm.count("grace") ? std::optional(duration_value(vm, "grace")) : std::nullopt);
  e.argv = std::move(cmd_argv);
  return e;
}

std::string duration_text(milliseconds d) {
  if (d.count() > 0 && d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

}  // namespace

milliseconds exec_grace(const lease_options& lease, std::optional<milliseconds> requested) {
  const auto margin = lease.effective_safety_margin();
  const auto fits = std::chrono::floor<milliseconds>(borrowed_time(margin));
  if (!requested) return std::min(milliseconds(5'000), fits);
  if (grace_fits(*requested, margin)) return *requested;
  usage_error("--grace " + duration_text(*requested) +
              " does not fit the lease: once it is lost, SIGKILL must come before the server can expire it, "
              "at most " +
              duration_text(fits) + " after SIGTERM (half the safety margin of " + duration_text(margin) +
              "); use a shorter --grace, or a longer --ttl or --safety-margin");
}

invocation parse_command_line(const std::vector<std::string>& args, const char* env_server,
                              const char* env_token) {
  // Options may stand before or after the command word (`baton --server U get k` = `baton get k --server U`):
  // find the word, then parse everything else with that command's options.
  std::size_t at = 0;
  while (at < args.size() && !args[at].empty() && args[at][0] == '-') {
    if (args[at] == "--") usage_error("missing command (see baton --help)");
    at += takes_value(args[at]) ? 2 : 1;
  }
  std::vector<std::string> before(args.begin(),
                                  args.begin() + static_cast<std::ptrdiff_t>(std::min(at, args.size())));
  if (at >= args.size()) {
    if (std::find(before.begin(), before.end(), "--version") != before.end())
      return {client_config{}, help_request{"baton " BATON_VERSION "\n"}, std::nullopt};
    if (std::find_if(before.begin(), before.end(), [](auto& a) { return a == "-h" || a == "--help"; }) !=
        before.end())
      return {client_config{}, help_request{top_usage}, std::nullopt};
    if (before.empty()) usage_error("missing command (see baton --help)");
    usage_error("unknown option " + before.front() + " (see baton --help)");
  }
  const std::string name = args[at];
  const command_spec* spec = find_spec(name);
  if (!spec) usage_error("unknown command \"" + name + "\" (see baton --help)");

  std::vector<std::string> rest = std::move(before);
  rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(at) + 1, args.end());
  // After `--` nothing is an option: for exec that is CMD with its own options, elsewhere a key that may
  // start with '-'.
  std::vector<std::string> after_dashes;
  if (auto dashes = std::find(rest.begin(), rest.end(), "--"); dashes != rest.end()) {
    after_dashes.assign(dashes + 1, rest.end());
    rest.erase(dashes, rest.end());
  }

  po::options_description all;
  all.add(command_options(name)).add(common_options());
  all.add_options()("positional-arguments", po::value<std::vector<std::string>>());
  po::positional_options_description positional;
  positional.add("positional-arguments", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(rest)
                  .options(all)
                  .positional(positional)
                  .style(po::command_line_style::unix_style ^ po::command_line_style::allow_guessing)
                  .run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    usage_error(name + ": " + e.what() + " (see baton " + name + " --help)");
  }
  if (vm.count("help")) return {client_config{}, help_request{command_help(*spec)}, std::nullopt};
  try {
    std::vector<std::string> keys;
    if (vm.count("positional-arguments")) keys = vm["positional-arguments"].as<std::vector<std::string>>();
    std::vector<std::string> cmd_argv;
    if (name == "exec")
      cmd_argv = std::move(after_dashes);
    else
      keys.insert(keys.end(), after_dashes.begin(), after_dashes.end());
    if (name == "exec" && keys.size() > 1)
      usage_error("the command to run goes after --: baton exec KEY ... -- CMD [ARGS...]");
    if (name == "conformance" && !keys.empty())
      usage_error("takes no arguments, got \"" + keys.front() + "\"");
    if (name == "conformance") keys.emplace_back();
    if (name == "record") {
      if (keys.empty() || keys.front() != "get")
        usage_error("expected \"record get KEY\"" +
                    (keys.empty() ? std::string() : ", got \"" + keys.front() + "\""));
      keys.erase(keys.begin());
    }
    if (keys.size() > 1) usage_error("expected one KEY, got " + std::to_string(keys.size()) + " arguments");
    if (name == "ls" && keys.empty()) keys.emplace_back();  // no PREFIX: every key
    if (name != "conformance" && name != "ls" && (keys.empty() || keys.front().empty()))
      usage_error("missing KEY");
    if (name == "exec" && cmd_argv.empty())
      usage_error("missing the command to run: baton exec KEY ... -- CMD [ARGS...]");
    auto client = client_settings(vm, env_server, env_token);
    invocation call{std::move(client), build(name, keys.front(), vm, std::move(cmd_argv)), std::nullopt};
    if (vm.count("token-file")) {
      call.token_file = vm["token-file"].as<std::string>();
      if (call.token_file->empty()) usage_error("--token-file must name a file");
    }
    return call;
  } catch (const cli_error& e) {
    usage_error(name + ": " + e.what() + " (see baton " + name + " --help)");
  }
}

std::string token_from_file(const std::string& path) {
  try {
    return read_token_file(path);
  } catch (const token_file_error& e) {
    throw cli_error(exit_code::usage, "--token-file " + path + ": " + e.what());
  }
}

}  // namespace baton::cli
