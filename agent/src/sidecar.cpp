// SPDX-License-Identifier: Apache-2.0
#include "sidecar.hpp"

#include "group_state.hpp"

#include "baton/common/log.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>

namespace baton::agent {
using namespace boost::asio::experimental::awaitable_operators;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

namespace {

http::response<http::string_body> reply(http::status s, const std::string& body, bool keep_alive,
                                        std::string_view type = "application/json") {
  http::response<http::string_body> res{s, 11};
  res.set(http::field::server, "baton-agent");
  res.set(http::field::content_type, type);
  res.keep_alive(keep_alive);
  res.body() = body;
  res.prepare_payload();
  return res;
}

std::string error_json(std::string_view code, std::string_view message) {
  return json::serialize(json::object{{"error", code}, {"message", message}});
}

json::object lock_server_json(const lock_server_status& seen) {
  json::object o{{"reachable", seen.reachable}, {"errors", seen.errors}};
  if (seen.last_error.empty())
    o["last_error"] = nullptr;
  else
    o["last_error"] = seen.last_error;
  if (seen.unreachable_since)
    o["unreachable_since"] = rfc3339(std::chrono::floor<std::chrono::seconds>(*seen.unreachable_since));
  else
    o["unreachable_since"] = nullptr;
  return o;
}

// Compares in time independent of where the strings differ, so the resign token cannot be guessed byte by
// byte from response times (its length is not the secret).
bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size() || b.empty()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// The identity part of an owner the SDK made for an acquisition: `<identity>#<16 hex digits>` (the suffix
// keeps two agents with one identity apart). Any other owner is returned whole.
std::string identity_of(std::string_view owner) {
  constexpr std::size_t suffix = 1 + 16;
  if (owner.size() <= suffix || owner[owner.size() - suffix] != '#') return std::string(owner);
  const auto digits = owner.substr(owner.size() - 16);
  if (digits.find_first_not_of("0123456789abcdef") != std::string_view::npos) return std::string(owner);
  return std::string(owner.substr(0, owner.size() - suffix));
}

// The leader as the lock server reports it, into `o`: `leader` (its owner), `leader_identity`, the value it
// published (`leader_value`, as published) and the sidecar URL in that value (`leader_api`); all null when
// the lock is free. A value that is not an agent's (another program took the key, or an agent from before
// values) gives a null `leader_api`.
void put_leader(json::object& o, const std::optional<holder_info>& holder) {
  o["leader"] = nullptr;
  o["leader_identity"] = nullptr;
  o["leader_value"] = nullptr;
  o["leader_api"] = nullptr;
  if (!holder) return;
  o["leader"] = holder->owner;
  o["leader_identity"] = identity_of(holder->owner);
  o["leader_value"] = holder->value;
  boost::system::error_code ec;
  const auto published = json::parse(holder->value, ec);
  if (ec || !published.is_object()) return;
  if (const auto* api = published.as_object().if_contains("api"); api && api->is_string())
    o["leader_api"] = api->as_string();
}

json::object job_json(const agent_runtime::job_status& st) {
  json::array runs;
  for (const auto& r : st.runs)
    runs.push_back(run_json(r));
  json::object o{{"name", st.job->name},         {"schedule", st.job->sched.text()},
                 {"timezone", st.job->timezone}, {"running", st.running},
                 {"suspended", st.suspended},    {"history_limit", st.job->history_limit},
                 {"runs", std::move(runs)}};
  if (st.next_run)
    o["next_run"] = rfc3339(*st.next_run);
  else
    o["next_run"] = nullptr;
  return o;
}

// `wait_s=N` of a query (1-3600 s); empty when absent or out of range.
std::optional<std::chrono::seconds> wait_seconds(std::string_view target) {
  const auto at = target.find("wait_s=");
  if (at == std::string_view::npos || at == 0 || (target[at - 1] != '?' && target[at - 1] != '&'))
    return std::nullopt;
  auto digits = target.substr(at + 7);
  digits = digits.substr(0, digits.find('&'));
  int n = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc{} || end != digits.data() + digits.size() || n < 1 || n > 3600) return std::nullopt;
  return std::chrono::seconds(n);
}

// `state_from`: the leadership whose writing of the group's state the answer shows (null when none).
void put_state_writer(json::object& o, const std::pair<std::string, std::uint64_t>& writer) {
  if (writer.first.empty())
    o["state_from"] = nullptr;
  else
    o["state_from"] = json::object{{"leader", writer.first}, {"token", writer.second}};
}

constexpr std::string_view jobs_prefix = "/v1/jobs/";

std::string unknown_job_json(std::string_view name) {
  return error_json("unknown_job", "no job named \"" + std::string(name) + "\" is configured");
}

// The routes that change what the agent does (authorised with the resign token).
bool is_operation(std::string_view path) {
  return path == "/v1/resign" || path == "/v1/reload" ||
         (path.starts_with(jobs_prefix) &&
          (path.ends_with("/run") || path.ends_with("/suspend") || path.ends_with("/resume")));
}

// `name` of /v1/jobs/{name}/{action}, or empty when `path` is not that.
std::string_view job_of_action(std::string_view path, std::string_view action) {
  if (!path.starts_with(jobs_prefix) || !path.ends_with(action)) return {};
  auto name = path.substr(jobs_prefix.size(), path.size() - jobs_prefix.size() - action.size());
  if (name.size() < 2 || name.back() != '/') return {};
  return name.substr(0, name.size() - 1);
}

// Refusals that keep web pages out (docs/agent.md, "Browsers"). A page can make the browser send a request
// here (a form POST or a fetch in no-cors mode needs no preflight), and a DNS name it rebinds to 127.0.0.1
// lets it read the answers; nobody needs the sidecar from a browser, so:
// - any Origin header (browsers send one with every cross-site request, and with every POST) is 403;
// - on a loopback socket, a Host other than localhost, 127.x.x.x or [::1] (any port) is 421: a rebound name
//   arrives as its own Host;
// - a POST (none of the routes takes a body) with a Content-Type other than application/json is 415: the
//   form and text/plain types are those a page sends without a preflight; no Content-Type, as `curl -X POST`
//   sends, is taken.
bool is_loopback_host(std::string_view host) {
  std::string_view name = host;
  auto valid_port = [](std::string_view port) {
    return !port.empty() && port.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (host.starts_with('[')) {
    const auto close = host.find(']');
    if (close == std::string_view::npos) return false;
    const auto rest = host.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || !valid_port(rest.substr(1)))) return false;
    name = host.substr(1, close - 1);
    return name == "::1";
  }
  if (const auto colon = host.find(':'); colon != std::string_view::npos) {
    if (!valid_port(host.substr(colon + 1))) return false;
    name = host.substr(0, colon);
  }
  if (beast::iequals(name, "localhost")) return true;
  boost::system::error_code ec;
  const auto v4 = asio::ip::make_address_v4(std::string(name), ec);
  return !ec && v4.is_loopback();
}

bool is_json_or_none(std::string_view content_type) {
  const auto type = content_type.substr(0, content_type.find(';'));
  const auto first = type.find_first_not_of(" \t");
  if (first == std::string_view::npos) return true;
  const auto last = type.find_last_not_of(" \t");
  return beast::iequals(type.substr(first, last - first + 1), "application/json");
}

std::optional<http::response<http::string_body>> browser_refusal(const http::request<http::string_body>& req,
                                                                 bool loopback) {
  if (req.count(http::field::origin) != 0)
    return reply(http::status::forbidden,
                 error_json("cross_origin_refused",
                            "requests with an Origin header (from a web page) are refused: the agent's API "
                            "has no browser clients"),
                 false);
  if (loopback && req.count(http::field::host) != 0 && !is_loopback_host(req[http::field::host]))
    return reply(http::status::misdirected_request,
                 error_json("misdirected_request",
                            "this agent listens on loopback and answers only Host: localhost, 127.x.x.x or "
                            "[::1], got \"" +
                                std::string(req[http::field::host]) + "\""),
                 false);
  if (req.method() == http::verb::post && !is_json_or_none(req[http::field::content_type]))
    return reply(
        http::status::unsupported_media_type,
        error_json("unsupported_media_type",
                   "the agent's POST routes take no body: send no Content-Type, or application/json"),
        false);
  return std::nullopt;
}

json::array json_strings(const std::vector<std::string>& items) {
  return json::array(items.begin(), items.end());
}

// A reload's answer: 200 with what changed, 400 with the file's error, 409 when a key needs a restart (then
// nothing was applied).
http::response<http::string_body> reload_reply(const reload_result& r, bool keep_alive) {
  if (!r.error.empty())
    return reply(http::status::bad_request, error_json("invalid_config", r.error), keep_alive);
  json::object body{{"changed", json_strings(r.changes.keys)},
                    {"jobs", json::object{{"added", json_strings(r.changes.jobs_added)},
                                          {"removed", json_strings(r.changes.jobs_removed)},
                                          {"changed", json_strings(r.changes.jobs_changed)}}},
                    {"election", r.changes.election},
                    {"restart_needed", json_strings(r.changes.restart_needed)},
                    {"applied", r.applied}};
  if (r.applied) return reply(http::status::ok, json::serialize(body), keep_alive);
  body["error"] = "restart_needed";
  body["message"] = "only a restart can apply some of these changes; nothing was applied";
  return reply(http::status::conflict, json::serialize(body), keep_alive);
}

}  // namespace

sidecar::sidecar(asio::any_io_executor ex, agent_runtime& agent) : ex_(ex), agent_(agent), acceptor_(ex) {}

tcp::endpoint sidecar::bind(const tcp::endpoint& at, boost::system::error_code& ec) {
  // The error_code forms: the throwing ones put Boost's source location into the message.
  tcp::endpoint bound;
  acceptor_.open(at.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(at, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) bound = acceptor_.local_endpoint(ec);
  loopback_ = !ec && bound.address().is_loopback();
  if (ec) close();
  return bound;
}

void sidecar::close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

asio::awaitable<void> sidecar::serve() {
  // Out of descriptors (EMFILE, ENFILE), accept fails at once as long as a connection waits in the backlog:
  // retried at once, that spins a core. Wait instead, longer while it goes on, as batond's accept loop does.
  constexpr auto first_wait = std::chrono::milliseconds(50), longest_wait = std::chrono::milliseconds(1000);
  auto wait = first_wait;
  asio::steady_timer timer(ex_);
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(use_tuple);
    if (ec) {
      if (!acceptor_.is_open()) co_return;
      log::warn("sidecar_accept_failed", {{"error", ec.message()}, {"retry_ms", wait.count()}});
      timer.expires_after(wait);
      co_await timer.async_wait(use_tuple);
      if (!acceptor_.is_open()) co_return;
      wait = std::min(wait * 2, longest_wait);
      continue;
    }
    wait = first_wait;
    if (*sessions_ >= max_sessions) {
      boost::system::error_code ignored;
      socket.close(ignored);
      continue;
    }
    ++*sessions_;  // counted here, on the one executor, so a burst of accepts cannot overshoot
    asio::co_spawn(ex_, session(std::move(socket)), asio::detached);
  }
}

asio::awaitable<void> sidecar::session(tcp::socket socket) {
  struct counted {
    std::shared_ptr<std::size_t> sessions;
    ~counted() { --*sessions; }
  } count{sessions_};
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(64 * 1024);
    stream.expires_after(std::chrono::seconds(30));
    auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_tuple);
    if (ec) {
      if (ec != http::error::end_of_stream && ec != beast::error::timeout) {
        auto res = reply(http::status::bad_request, error_json("bad_request", ec.message()), false);
        co_await http::async_write(stream, res, use_tuple);
      }
      co_return;
    }
    auto& req = parser.get();
    const bool ka = req.keep_alive();
    std::string_view target = req.target();
    auto path = target.substr(0, target.find('?'));
    http::response<http::string_body> res;
    auto method_is = [&](http::verb v) { return req.method() == v; };
    // A 409 `not_leader` naming the leader as the lock server sees it, so the caller can ask that agent.
    // Named, not a temporary of the co_await expression (GCC 12).
    auto not_leader_body = [&]() -> asio::awaitable<std::string> {
      json::object body{{"error", "not_leader"}, {"message", "this agent does not lead; ask the leader"}};
      put_leader(body, std::nullopt);
      try {
        put_leader(body, co_await agent_.lock_client().async_get(agent_.config().election_key));
      } catch (const std::exception& e) {
        body["lock_server_error"] = e.what();
      }
      co_return json::serialize(body);
    };
    auto suspend_reply =
        [&](std::string_view name, bool suspend,
            agent_runtime::suspend_result result) -> asio::awaitable<http::response<http::string_body>> {
      using r = agent_runtime::suspend_result;
      switch (result) {
        case r::done:
          co_return reply(http::status::ok,
                          json::serialize(json::object{{"job", name}, {"suspended", suspend}}), ka);
        case r::unknown_job:
          co_return reply(http::status::not_found, unknown_job_json(name), ka);
        case r::not_saved:
          co_return reply(http::status::service_unavailable,
                          error_json("not_saved",
                                     "the group's state could not be written (leadership ending, or the lock "
                                     "server unreachable): nothing changed"),
                          ka);
        case r::not_leader:
          break;
      }
      auto body = co_await not_leader_body();
      co_return reply(http::status::conflict, std::move(body), ka);
    };
    // The routes that change what the agent does need the resign token when one is configured (read at each
    // request: a reload may change it).
    auto authorized = [&] {
      const auto& token = agent_.config().resign_token;
      std::string_view auth = req[http::field::authorization];
      constexpr std::string_view bearer = "Bearer ";
      return token.empty() || (auth.substr(0, bearer.size()) == bearer &&
                               constant_time_equal(auth.substr(bearer.size()), token));
    };

    if (metrics_only_ && path != "/metrics" && path != "/healthz") {
      res = reply(http::status::not_found,
                  error_json("not_found", "this address serves /metrics and /healthz only"), ka);
    } else if (auto refused = browser_refusal(req, loopback_)) {
      log::debug("browser_refused",
                 {{"status", static_cast<int>(refused->result())}, {"target", std::string(req.target())}});
      res = std::move(*refused);
    } else if (path == "/v1/leader" && method_is(http::verb::get)) {
      auto st = agent_.current();
      json::object o{
          {"identity", agent_.identity()}, {"is_leader", st.leader}, {"key", agent_.config().election_key}};
      if (st.leader)
        o["token"] = st.token;
      else
        o["token"] = nullptr;
      // The holder as the lock server reports it: the truth for everyone, not this agent's belief.
      try {
        put_leader(o, co_await agent_.lock_client().async_get(agent_.config().election_key));
      } catch (const std::exception& e) {
        put_leader(o, std::nullopt);
        o["error"] = e.what();
      }
      res = reply(http::status::ok, json::serialize(o), ka);
    } else if (is_operation(path) && method_is(http::verb::post) && !authorized()) {
      res = reply(http::status::unauthorized, error_json("unauthorized", "a valid bearer token is required"),
                  ka);
      res.set(http::field::www_authenticate, "Bearer");
    } else if (path == "/v1/reload" && method_is(http::verb::post)) {
      if (!reload_)
        res = reply(http::status::service_unavailable,
                    error_json("unavailable", "this agent cannot reload its configuration"), ka);
      else
        res = reload_reply(reload_(), ka);
    } else if (const auto name = job_of_action(path, "run"); !name.empty() && method_is(http::verb::post)) {
      using result = agent_runtime::manual_run::result;
      const auto started = agent_.run_now(std::string(name));
      switch (started.what) {
        case result::started: {
          json::object body{{"started", true},
                            {"job", name},
                            {"run_id", started.run_id},
                            {"token", started.token},
                            {"slot", rfc3339(started.slot)}};
          // `?wait_s=N` (1-3600): answer once the run (its retries included) is over, with its outcome, or
          // after N seconds with `finished: false`.
          const auto wait = wait_seconds(target);
          if (!wait) {
            res = reply(http::status::accepted, json::serialize(body), ka);
            break;
          }
          asio::steady_timer limit(ex_, *wait);
          while (!started.control->has_ended()) {
            auto r = co_await (started.control->ended().async_wait(use_tuple) || limit.async_wait(use_tuple));
            if (r.index() == 1) break;
          }
          body["finished"] = started.control->has_ended();
          if (started.control->has_ended())
            if (const auto st = agent_.job(std::string(name), std::chrono::system_clock::now()))
              for (const auto& run : st->runs)
                if (run.slot == started.slot && run.manual && run.token == started.token) {
                  body["run"] = run_json(run);  // the newest: the last attempt
                  break;
                }
          res = reply(started.control->has_ended() ? http::status::ok : http::status::accepted,
                      json::serialize(body), ka);
          break;
        }
        case result::unknown_job:
          res = reply(http::status::not_found, unknown_job_json(name), ka);
          break;
        case result::running:
          res = reply(http::status::conflict,
                      error_json("running", "a run of this job is going and its overlap is forbid"), ka);
          break;
        case result::per_job_mode:
          res = reply(http::status::conflict,
                      error_json("per_job_mode",
                                 "the job runs in per-job mode: no agent leads it; runs start only at slots"),
                      ka);
          break;
        case result::not_leader: {
          auto body = co_await not_leader_body();
          res = reply(http::status::conflict, std::move(body), ka);
          break;
        }
      }
    } else if (const auto name = job_of_action(path, "suspend");
               !name.empty() && method_is(http::verb::post)) {
      const auto result = co_await agent_.set_suspended(std::string(name), true);
      res = co_await suspend_reply(name, true, result);
    } else if (const auto name = job_of_action(path, "resume");
               !name.empty() && method_is(http::verb::post)) {
      const auto result = co_await agent_.set_suspended(std::string(name), false);
      res = co_await suspend_reply(name, false, result);
    } else if (path == "/v1/resign" && method_is(http::verb::post)) {
      if (agent_.resign()) {
        log::info("resign_requested", {});
        res = reply(http::status::ok, R"({"resigned":true})", ka);
      } else {
        res = reply(http::status::conflict, error_json("not_leader", "this agent does not lead"), ka);
      }
    } else if (path == "/v1/jobs" && method_is(http::verb::get)) {
      // Any replica answers for the group: a follower reads the group's state first.
      co_await agent_.refresh_group_state();
      json::array jobs;
      for (const auto& st : agent_.jobs(std::chrono::system_clock::now()))
        jobs.push_back(job_json(st));
      json::object body{{"jobs", std::move(jobs)}};
      put_state_writer(body, agent_.group_writer());
      res = reply(http::status::ok, json::serialize(body), ka);
    } else if (path.starts_with(jobs_prefix) && method_is(http::verb::get)) {
      co_await agent_.refresh_group_state();
      const auto name = path.substr(jobs_prefix.size());
      if (const auto st = agent_.job(std::string(name), std::chrono::system_clock::now()))
        res = reply(http::status::ok, json::serialize(job_json(*st)), ka);
      else
        res = reply(http::status::not_found, unknown_job_json(name), ka);
    } else if (path == "/healthz" && method_is(http::verb::get)) {
      res = reply(http::status::ok, R"({"status":"ok"})", ka);
    } else if (path == "/readyz" && method_is(http::verb::get)) {
      // Ready: the agent serves its API with its configuration loaded, which a lock server outage does not
      // change (as an application pod's sidecar, a batond outage must not take every pod out of service).
      // `?lock_server=required` also asks the lock server, for a probe that should follow it.
      const bool require_server = target.find("lock_server=required") != std::string_view::npos;
      json::object body{{"status", "ready"}};
      if (require_server) {
        try {
          co_await agent_.lock_client().async_get(agent_.config().election_key);
        } catch (const std::exception& e) {
          body.erase("status");
          body["error"] = "not_ready";
          body["message"] = e.what();
        }
      }
      // Both answers say what the agent has seen of the lock server, so a probe's log shows why.
      body["lock_server"] = lock_server_json(agent_.lock_server());
      res = reply(body.contains("error") ? http::status::service_unavailable : http::status::ok,
                  json::serialize(body), ka);
    } else if (path == "/metrics" && method_is(http::verb::get)) {
      res = reply(http::status::ok, agent_.render_metrics(), ka, "text/plain; version=0.0.4");
    } else if (path == "/v1/leader" || is_operation(path) || path == "/v1/jobs" ||
               path.starts_with(jobs_prefix) || path == "/healthz" || path == "/readyz" ||
               path == "/metrics") {
      res = reply(http::status::method_not_allowed,
                  error_json("method_not_allowed", "wrong method for this route"), ka);
    } else {
      res = reply(http::status::not_found, error_json("not_found", "no such route"), ka);
    }
    auto [wec, wn] = co_await http::async_write(stream, res, use_tuple);
    if (wec || !ka || !res.keep_alive()) co_return;
  }
}

}  // namespace baton::agent
