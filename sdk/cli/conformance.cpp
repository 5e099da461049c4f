// SPDX-License-Identifier: Apache-2.0
// baton conformance: the guarantees of docs/protocol.md, checked from the outside against any server. The
// runner: it checks over HTTP (http_*_checks.cpp, through conformance_wire.hpp's raw client) or, for servers
// that do not speak the protocol (etcd), through the SDK's backend (backend_conformance.cpp), prints
// `PASS  name`, `FAIL  name: reason` or `SKIP  name: reason` for each check, and the summary.

#include "conformance.hpp"

#include "backend_conformance.hpp"
#include "conformance_check.hpp"
#include "exit_code.hpp"
#include "http_suite.hpp"

#include "baton/common/tls_context.hpp"
#include "baton/config.hpp"
#include "baton/error.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace baton::cli {
namespace {

using namespace http_conformance;

// Prints one line per check and the summary; counts what failed and what was skipped, and why.
class report {
 public:
  // Runs `body`; `take_note` fetches the remark a passed check left.
  void run(const char* name, const std::function<void()>& body,
           const std::function<std::string()>& take_note) {
    std::string reason;
    bool skip = false;
    try {
      body();
    } catch (const check_skipped& e) {
      skip = true;
      reason = e.what();
      count_skip(e);
    } catch (const std::exception& e) {
      reason = e.what();
    }
    std::replace_if(
        reason.begin(), reason.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    const auto note = take_note();
    ++total_;
    if (skip) {
      ++skipped_;
      std::printf("SKIP  %s: %s\n", name, reason.c_str());
    } else if (reason.empty()) {
      std::printf(note.empty() ? "PASS  %s\n" : "PASS  %s (%s)\n", name, note.c_str());
    } else {
      ++failed_;
      std::printf("FAIL  %s: %s\n", name, reason.c_str());
    }
    std::fflush(stdout);
  }

  // The summary: why checks were skipped, when any was ("skipped: 18 not advertised (lease_values, ...), 6 no
  // --restart-command"), then the counts, last and in the form scripts may already read.
  int finish(const std::string& server_url) const {
    if (!skips_.empty()) {
      std::string why;
      for (const auto& r : skips_) {
        why += (why.empty() ? "" : ", ") + std::to_string(r.count) + " " + r.why;
        std::string about;
        for (const auto& a : r.about)
          about += (about.empty() ? "" : ", ") + a;
        if (!about.empty()) why += " (" + about + ")";
      }
      std::printf("skipped: %s\n", why.c_str());
    }
    std::printf("%d of %d checks passed, %d failed, %d skipped against %s\n", total_ - failed_ - skipped_,
                total_, failed_, skipped_, without_credentials(server_url).c_str());
    std::fflush(stdout);
    return failed_ == 0 ? exit_code::ok : exit_code::internal;
  }

 private:
  // Skips by reason, in the order first met; `about` the distinct things they missed (features).
  struct skip_reason {
    std::string why;
    int count = 0;
    std::vector<std::string> about;
  };

  void count_skip(const check_skipped& e) {
    auto it =
        std::find_if(skips_.begin(), skips_.end(), [&](const skip_reason& r) { return r.why == e.why; });
    if (it == skips_.end()) it = skips_.insert(skips_.end(), skip_reason{e.why, 0, {}});
    ++it->count;
    if (!e.about.empty() && std::find(it->about.begin(), it->about.end(), e.about) == it->about.end())
      it->about.push_back(e.about);
  }

  int total_ = 0, failed_ = 0, skipped_ = 0;
  std::vector<skip_reason> skips_;
};

// The checks through baton::backend; those without a counterpart there are skipped, never passed.
int run_on_backend(const client_config& client, const std::optional<std::string>& restart_command) {
  backend_suite s(client, restart_command);
  if (auto why = unreachable(s))
    throw cli_error(exit_code::unavailable,
                    "conformance: " + without_credentials(client.server_url) + ": " + *why);
  report out;
  auto run = [&](const check& ch) {
    out.run(
        ch.name,
        [&] {
          const auto counterpart = on_backend::find(ch.name);
          if (!counterpart)
            throw check_skipped("not applicable to an etcd backend", ch.off_backend ? ch.off_backend : "");
          s.run(counterpart(s));
        },
        [&] { return s.take_note(); });
  };
  for (const auto& ch : checks())
    run(ch);
  if (restart_command) s.set_restarted(restart_backend(s));
  for (const auto& ch : restart_checks())
    run(ch);
  return out.finish(client.server_url);
}

}  // namespace

// Why a server refused the run's first lock request (401 or 403), and what to do about it.
static std::string access_problem(const client_config& client, const reply& r) {
  const auto told =
      r.str("message").empty() ? r.describe() : std::to_string(r.status) + " " + r.str("message");
  if (r.status == 403)
    return "the bearer token may not use keys under conformance/ (" + told +
           "); it needs read-write access to that prefix";
  if (client.bearer_token.empty())
    return "the server requires a bearer token (" + told + "); give one with --token-file";
  return "the server refused the bearer token (" + told + ")";
}

int run_conformance(const client_config& client, const std::optional<std::string>& restart_command) {
  if (is_backend_url(client.server_url)) return run_on_backend(client, restart_command);
  const auto& server_url = client.server_url;
  auto address = parse_url(server_url);
  if (uses_tls(server_url)) {
    try {
      address.tls = detail::make_client_tls_context(client.tls);
    } catch (const exception& e) {
      throw cli_error(exit_code::usage, "conformance: " + e.diagnostic());
    }
  }
  if (!client.bearer_token.empty()) address.authorization = "Bearer " + client.bearer_token;
  // The checks' own waits are longer than the CLI's default round trip; never bound a request below 10 s.
  suite s(std::move(address), std::max(client.request_timeout, milliseconds(10'000)), restart_command);
  {
    auto c = s.open();
    auto h = c.request(http::verb::get, "/healthz", {}, s.timeout());
    if (h.status == 0)
      throw cli_error(exit_code::unavailable, "conformance: " + server_url + ": " + h.describe());
    // /healthz is open to all; a lock route tells whether this server wants a token the run lacks. Every
    // check would fail on it, so say so once instead.
    auto probe = s.get(c, s.key("access"));
    if (probe.status == 401 || probe.status == 403)
      throw cli_error(exit_code::access_denied,
                      "conformance: " + server_url + ": " + access_problem(client, probe));
  }
  report out;
  auto run = [&](const check& ch) {
    out.run(
        ch.name, [&] { ch.run(s); }, [&] { return s.take_note(); });
  };
  for (const auto& ch : checks())
    run(ch);
  if (restart_command) s.set_restarted(restart_server(s));
  for (const auto& ch : restart_checks())
    run(ch);
  return out.finish(server_url);
}

}  // namespace baton::cli
