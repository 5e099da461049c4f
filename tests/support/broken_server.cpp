// SPDX-License-Identifier: Apache-2.0
// broken-lockd: a tiny in-memory lock server for the conformance tests. It follows docs/protocol.md except
// for ONE deliberate bug chosen with --bug, which `baton conformance` must catch:
//   release-by-key          release frees the lock whatever owner and token it names
//   release-old-token       release accepts the owner's superseded (older) token
//   counter-restarts        the token counter restarts from 1 after each release (tokens stop increasing)
//   tokens-not-kept         with --state-file: after a restart the counter continues above the tokens of the
//                           leases it restored, not above every token it issued
//   no-expiry               leases never expire
//   early-expiry-40ms       leases expire 40 ms before their TTL has passed
//   early-expiry-15ms       the same, 15 ms early
//   renew-no-extend         renew answers 200 but leaves the expiry where it was
//   ttl-32bit-us            the TTL is kept in 32-bit microseconds: past about 35 minutes it wraps (1 hour
//                           ends at once)
//   reacquire-keeps-expiry  a same-owner re-acquire issues a new token but keeps the old expiry
//   renew-shortens          a renew sets the expiry to now + its TTL even when that is earlier than before
//                           (a late copy of a shorter renew frees the key while its holder counts on more)
//   poll-ignores-token      a long-poll waits for a change from the state it arrived in, whatever its token
//   poll-every-5s           a long-poll looks at the lock every 5 s instead of being woken by the change
//   racy-acquire            acquire checks the key, then waits (a "disk write"), then takes it: races have
//                           winners
//   no-value                leases carry no value (the field is ignored, never answered), even when
//                           --capabilities advertises lease_values
//   batch-ignores-token     POST /v1/renew renews an entry whose owner holds the key whatever its token
//   queue-lifo              a queued acquire joins the front of the key's queue: the latest waiter is served
//                           first (with --capabilities naming acquire_queue)
//   none                    no bug
// --state-file PATH keeps leases and the token counter in PATH (rewritten after each change, read at start),
// so that a restart on the same --listen address can be checked. GET /v1/capabilities answers 404 unless
// --capabilities JSON gives the body to answer (verbatim, as a test's choice). POST /v1/renew (renew batch)
// is served only when that body names "renew_batch"; otherwise it is 404, as from a server without it. So is
// the queued acquire (POST .../acquire?wait_ms=W) when it names "acquire_queue"; otherwise wait_ms is
// ignored.
// --core-only makes it an honest server of the protocol's core alone, written before GET /v1/capabilities: no
// values (as no-value), no capabilities (404; --capabilities is refused beside it), no optional route. Usage:
// broken-lockd --listen 127.0.0.1:0 --bug NAME [--state-file PATH] [--capabilities JSON | --core-only];
// prints "broken-lockd listening on HOST:PORT".

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <boost/url/parse.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using asio::ip::tcp;
using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string bug;
std::string state_file;
std::string capabilities;
bool core_only = false;

// Whether leases keep their values: feature lease_values, which a core-only server predates.
bool keeps_values() {
  return bug != "no-value" && !core_only;
}

struct lease {
  std::string owner;
  std::int64_t token = 0;
  steady::time_point expiry;
  std::string value;
  std::int64_t ttl_ms = 0;  // restored with its full TTL after a restart, as batond does
};

std::map<std::string, lease> locks;
std::int64_t next_token = 1;

// The expiry a lease of `ttl_ms` granted now gets: early by the bug's amount.
steady::time_point expiry_after(std::int64_t ttl_ms) {
  auto e = steady::now() + std::chrono::milliseconds(ttl_ms);
  if (bug == "ttl-32bit-us")
    e = steady::now() +
        std::chrono::microseconds(static_cast<std::int32_t>(static_cast<std::uint32_t>(ttl_ms * 1000)));
  if (bug == "early-expiry-40ms") e -= 40ms;
  if (bug == "early-expiry-15ms") e -= 15ms;
  return e;
}

// Called before a change is answered, like a durable server's log write.
void save_state() {
  if (state_file.empty()) return;
  json::array leases;
  for (const auto& [key, l] : locks)
    leases.push_back(json::object{
        {"key", key}, {"owner", l.owner}, {"token", l.token}, {"ttl_ms", l.ttl_ms}, {"value", l.value}});
  const auto tmp = state_file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json::serialize(json::object{{"next_token", next_token}, {"leases", std::move(leases)}});
  }
  std::rename(tmp.c_str(), state_file.c_str());
}

void load_state() {
  std::ifstream in(state_file);
  if (!in) return;
  std::stringstream text;
  text << in.rdbuf();
  auto v = json::parse(text.str()).as_object();
  next_token = v.at("next_token").as_int64();
  std::int64_t highest = 0;
  for (const auto& l : v.at("leases").as_array()) {
    const auto& o = l.as_object();
    const auto ttl = o.at("ttl_ms").as_int64();
    const auto token = o.at("token").as_int64();
    highest = std::max(highest, token);
    locks[std::string(o.at("key").as_string())] =
        lease{std::string(o.at("owner").as_string()), token, expiry_after(ttl),
              std::string(o.at("value").as_string()), ttl};
  }
  if (bug == "tokens-not-kept") next_token = highest + 1;
}

// A queued acquire waiting for its key (feature acquire_queue).
struct waiter {
  std::string owner;
  std::int64_t ttl_ms = 0;
  std::string value;
  steady::time_point arrived;
  std::optional<std::int64_t> token;  // granted
  steady::time_point granted_at;
  bool replaced = false;  // a later request by the same owner took its place
};
std::map<std::string, std::list<std::shared_ptr<waiter>>> queues;

// The holder of `key`. A key found free goes to the head of its queue in the same step, so that nothing can
// take it in between; every request, and each waiter every few ms, looks here.
lease* holder(const std::string& key) {
  auto it = locks.find(key);
  if (it != locks.end() && bug != "no-expiry" && steady::now() >= it->second.expiry) {
    locks.erase(it);
    it = locks.end();
  }
  if (it != locks.end()) return &it->second;
  auto q = queues.find(key);
  if (q == queues.end() || q->second.empty()) return nullptr;
  auto w = q->second.front();
  q->second.pop_front();
  w->token = next_token++;
  w->granted_at = steady::now();
  auto& l = locks[key] = lease{w->owner, *w->token, expiry_after(w->ttl_ms), w->value, w->ttl_ms};
  save_state();
  return &l;
}

struct answer {
  http::status status;
  json::object body;
  std::string allow;
};

answer error(http::status st, const std::string& code, const std::string& message) {
  return {st, {{"error", code}, {"message", message}}, {}};
}

// The JSON object of a request body, or nothing (and `err` set).
bool field_string(const json::object& o, const char* name, std::string& out) {
  auto* v = o.if_contains(name);
  if (!v || !v->is_string() || v->get_string().empty()) return false;
  out = std::string(v->get_string());
  return true;
}

bool field_int(const json::object& o, const char* name, std::int64_t lo, std::int64_t hi, std::int64_t& out) {
  auto* v = o.if_contains(name);
  if (!v || !v->is_int64()) return false;
  out = v->get_int64();
  return out >= lo && out <= hi;
}

// 409 held naming `h`.
answer refusal(const lease& h) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(h.expiry - steady::now()).count();
  json::object o{{"error", "held"},
                 {"message", "held"},
                 {"owner", h.owner},
                 {"token", h.token},
                 {"ttl_remaining_ms", left < 0 ? 0 : left}};
  if (keeps_values()) o["value"] = h.value;
  return {http::status::conflict, std::move(o), {}};
}

// An acquire's body, or why it is refused.
bool acquire_fields(const json::object& o, std::string& owner, std::int64_t& ttl, std::string& value,
                    answer& bad) {
  if (!field_string(o, "owner", owner) || !field_int(o, "ttl_ms", 100, 3'600'000, ttl)) {
    bad = error(http::status::bad_request, "bad_request", "owner and ttl_ms (100..3600000) are required");
    return false;
  }
  if (auto* v = o.if_contains("value"); v && keeps_values()) {
    if (!v->is_string()) {
      bad = error(http::status::bad_request, "bad_request", "value must be a string");
      return false;
    }
    value = std::string(v->get_string());
  }
  return true;
}

asio::awaitable<answer> acquire(const std::string& key, const json::object& o) {
  std::string owner, value;
  std::int64_t ttl = 0;
  if (answer bad; !acquire_fields(o, owner, ttl, value, bad)) co_return bad;
  if (auto* h = holder(key); h && h->owner != owner) co_return refusal(*h);
  if (bug == "racy-acquire") {  // the check above and the write below are no longer one step
    asio::steady_timer t(co_await asio::this_coro::executor, 50ms);
    co_await t.async_wait(asio::use_awaitable);
  }
  const auto token = next_token++;
  auto expiry = expiry_after(ttl);
  // A same-owner re-acquire never makes the key free sooner, and a restart restores the longer TTL.
  auto restore_ttl = ttl;
  if (auto* h = holder(key)) {
    expiry = bug == "reacquire-keeps-expiry" ? h->expiry : std::max(expiry, h->expiry);
    restore_ttl = std::max(ttl, h->ttl_ms);
  }
  locks[key] = lease{owner, token, expiry, value, restore_ttl};
  save_state();
  co_return answer{http::status::ok, {{"key", key}, {"owner", owner}, {"token", token}, {"ttl_ms", ttl}}, {}};
}

// docs/protocol.md, "queued acquire": at once when the key is free (and so nobody waits) or the owner holds
// it; otherwise in the key's queue until granted, replaced by the owner's next request, the wait passing, or
// the client gone (`client_gone`; a grant it was not told of is given back).
asio::awaitable<answer> acquire_queued(const std::string& key, const json::object& o, std::int64_t wait_ms,
                                       const std::function<bool()>& client_gone) {
  std::string owner, value;
  std::int64_t ttl = 0;
  if (answer bad; !acquire_fields(o, owner, ttl, value, bad)) co_return bad;
  if (auto* h = holder(key); !h || h->owner == owner) {
    auto a = co_await acquire(key, o);
    if (a.status == http::status::ok) a.body["queued_ms"] = 0;
    co_return a;
  }
  auto me = std::make_shared<waiter>(waiter{owner, ttl, value, steady::now(), {}, {}, false});
  auto& q = queues[key];
  if (auto same = std::find_if(q.begin(), q.end(), [&](const auto& w) { return w->owner == owner; });
      same != q.end()) {
    (*same)->replaced = true;
    *same = me;
  } else if (bug == "queue-lifo") {
    q.push_front(me);
  } else {
    q.push_back(me);
  }
  const auto until = me->arrived + std::chrono::milliseconds(wait_ms);
  asio::steady_timer t(co_await asio::this_coro::executor);
  for (;;) {
    auto* h = holder(key);  // hands an expired lease on
    const bool gone = client_gone();
    if (me->token) {
      if (!gone) {
        const auto queued =
            std::chrono::duration_cast<std::chrono::milliseconds>(me->granted_at - me->arrived);
        co_return answer{http::status::ok,
                         {{"key", key},
                          {"owner", owner},
                          {"token", *me->token},
                          {"ttl_ms", ttl},
                          {"queued_ms", queued.count()}},
                         {}};
      }
      if (h && h->token == *me->token) {
        locks.erase(key);
        save_state();
        holder(key);
      }
      co_return error(http::status::gone, "gone", "the client went away");
    }
    if (me->replaced || gone || steady::now() >= until) {
      q.remove(me);
      co_return h ? refusal(*h) : error(http::status::gone, "gone", "nobody holds the key");
    }
    t.expires_after(5ms);
    co_await t.async_wait(asio::use_awaitable);
  }
}

answer renew(const std::string& key, const json::object& o) {
  std::string owner;
  std::int64_t token = 0, ttl = 0;
  if (!field_string(o, "owner", owner) || !field_int(o, "token", 1, INT64_MAX, token) ||
      !field_int(o, "ttl_ms", 100, 3'600'000, ttl))
    return error(http::status::bad_request, "bad_request", "owner, token and ttl_ms are required");
  auto lost = [](const char* reason) {
    return answer{http::status::conflict, {{"error", "lost"}, {"reason", reason}, {"message", reason}}, {}};
  };
  auto* h = holder(key);
  if (!h) return lost("not_held");
  if (h->owner != owner) return lost("owner_mismatch");
  if (h->token != token) return lost("token_mismatch");
  if (bug != "renew-no-extend") {
    h->expiry = bug == "renew-shortens" ? expiry_after(ttl) : std::max(h->expiry, expiry_after(ttl));
    h->ttl_ms = std::max(h->ttl_ms, ttl);
    save_state();
  }
  return {http::status::ok, {{"key", key}, {"owner", owner}, {"token", token}, {"ttl_ms", ttl}}, {}};
}

// docs/protocol.md, "renew batch": every entry checked first (a malformed one, or a key twice, refuses the
// whole batch), then each renewed as renew() would, answered in order.
answer renew_batch(const json::object& o) {
  auto* leases = o.if_contains("leases");
  if (!leases || !leases->is_array() || leases->get_array().empty() || leases->get_array().size() > 1000)
    return error(http::status::bad_request, "bad_request", "leases must be an array of 1 to 1000 entries");
  std::vector<std::string> keys;
  for (const auto& e : leases->get_array()) {
    std::string key, owner;
    std::int64_t token = 0, ttl = 0;
    if (!e.is_object() || !field_string(e.get_object(), "key", key) ||
        !field_string(e.get_object(), "owner", owner) ||
        !field_int(e.get_object(), "token", 1, INT64_MAX, token) ||
        !field_int(e.get_object(), "ttl_ms", 100, 3'600'000, ttl))
      return error(http::status::bad_request, "bad_request", "each entry needs key, owner, token and ttl_ms");
    if (std::find(keys.begin(), keys.end(), key) != keys.end())
      return error(http::status::bad_request, "bad_request", "a key appears twice");
    keys.push_back(key);
  }
  json::array results;
  for (const auto& e : leases->get_array()) {
    json::object entry = e.get_object();
    const std::string key(entry.at("key").get_string());
    if (auto* h = holder(key);
        h && bug == "batch-ignores-token" && h->owner == entry.at("owner").get_string())
      entry["token"] = h->token;
    auto one = renew(key, entry);
    if (one.status != http::status::ok) one.body["key"] = key;
    results.push_back(std::move(one.body));
  }
  return {http::status::ok, {{"results", std::move(results)}}, {}};
}

answer release(const std::string& key, const json::object& o) {
  std::string owner;
  std::int64_t token = 0;
  if (!field_string(o, "owner", owner) || !field_int(o, "token", 1, INT64_MAX, token))
    return error(http::status::bad_request, "bad_request", "owner and token are required");
  auto* h = holder(key);
  if (!h) return {http::status::ok, {{"released", true}, {"outcome", "already_free"}}, {}};
  const bool token_ok = bug == "release-old-token" ? token <= h->token : token == h->token;
  if (bug != "release-by-key" && (h->owner != owner || !token_ok))
    return error(http::status::conflict, "not_owner", "another owner or token holds the lock");
  locks.erase(key);
  if (bug == "counter-restarts") next_token = 1;
  save_state();
  holder(key);  // the queue's head takes it now
  return {http::status::ok, {{"released", true}, {"outcome", "released"}}, {}};
}

answer state_of(const std::string& key) {
  auto* h = holder(key);
  if (!h) return error(http::status::not_found, "not_held", "nobody holds the lock");
  auto left = std::chrono::ceil<std::chrono::milliseconds>(h->expiry - steady::now()).count();
  json::object o{
      {"key", key}, {"owner", h->owner}, {"token", h->token}, {"ttl_remaining_ms", left < 0 ? 0 : left}};
  if (keeps_values()) o["value"] = h->value;
  return {http::status::ok, std::move(o), {}};
}

// A long-poll that looks every 10 ms: enough for a test double (its answers come well within 250 ms).
asio::awaitable<answer> get(const std::string& key, boost::urls::url_view url) {
  auto wait_it = url.params().find("wait_ms");
  if (wait_it == url.params().end()) co_return state_of(key);
  std::int64_t wait_ms = 0, token = 0;
  try {
    wait_ms = std::min<std::int64_t>(std::stoll((*wait_it).value), 60'000);
    if (auto t = url.params().find("token"); t != url.params().end()) token = std::stoll((*t).value);
  } catch (const std::exception&) {
    co_return error(http::status::bad_request, "bad_request", "bad wait_ms or token");
  }
  const auto until = steady::now() + std::chrono::milliseconds(wait_ms);
  if (bug == "poll-ignores-token") {
    auto* h = holder(key);
    token = h ? h->token : 0;
  }
  asio::steady_timer t(co_await asio::this_coro::executor);
  for (;;) {
    auto* h = holder(key);
    if ((h ? h->token : 0) != token || steady::now() >= until) co_return state_of(key);
    t.expires_after(bug == "poll-every-5s" ? 5s : 10ms);
    co_await t.async_wait(asio::use_awaitable);
  }
}

answer not_allowed(const char* method) {
  return {http::status::method_not_allowed, {{"error", "method_not_allowed"}, {"message", method}}, method};
}

// The request's body as a JSON object; false when it is not one.
bool object_body(const http::request<http::string_body>& req, json::object& out) {
  json::error_code ec;
  auto v = json::parse(req.body(), ec);
  if (ec || !v.is_object()) return false;
  out = std::move(v.as_object());
  return true;
}

asio::awaitable<answer> route(const http::request<http::string_body>& req,
                              const std::function<bool()>& client_gone) {
  auto parsed = boost::urls::parse_origin_form(req.target());
  if (!parsed) co_return error(http::status::bad_request, "bad_request", "bad target");
  auto url = *parsed;
  std::vector<std::string> seg(url.segments().begin(), url.segments().end());
  if (seg.size() == 1 && seg[0] == "healthz") {
    if (req.method() != http::verb::get) co_return not_allowed("GET");
    co_return answer{http::status::ok, {{"status", "ok"}}, {}};
  }
  if (seg.size() == 2 && seg[0] == "v1" && seg[1] == "capabilities" && req.method() == http::verb::get) {
    if (capabilities.empty()) co_return error(http::status::not_found, "not_found", "unknown route");
    json::error_code ec;
    auto v = json::parse(capabilities, ec);
    co_return answer{
        http::status::ok, ec || !v.is_object() ? json::object{{"raw", capabilities}} : v.as_object(), {}};
  }
  if (seg.size() == 2 && seg[0] == "v1" && seg[1] == "renew" &&
      capabilities.find("\"renew_batch\"") != std::string::npos) {
    if (req.method() != http::verb::post) co_return not_allowed("POST");
    json::object body;
    if (!object_body(req, body))
      co_return error(http::status::bad_request, "bad_request", "body is not a JSON object");
    co_return renew_batch(body);
  }
  if (seg.size() < 3 || seg.size() > 4 || seg[0] != "v1" || seg[1] != "locks" || seg[2].empty())
    co_return error(http::status::not_found, "not_found", "unknown route");
  const auto& key = seg[2];
  if (seg.size() == 3) {
    if (req.method() != http::verb::get) co_return not_allowed("GET");
    co_return co_await get(key, url);
  }
  const auto& op = seg[3];
  if (op != "acquire" && op != "renew" && op != "release")
    co_return error(http::status::not_found, "not_found", "unknown route");
  if (req.method() != http::verb::post) co_return not_allowed("POST");
  json::object body;
  if (!object_body(req, body))
    co_return error(http::status::bad_request, "bad_request", "body is not a JSON object");
  if (op == "acquire") {
    auto wait_it = url.params().find("wait_ms");
    if (capabilities.find("\"acquire_queue\"") == std::string::npos || wait_it == url.params().end())
      co_return co_await acquire(key, body);
    std::int64_t wait_ms = 0;
    try {
      wait_ms = std::min<std::int64_t>(std::stoll((*wait_it).value), 60'000);
    } catch (const std::exception&) {
      co_return error(http::status::bad_request, "bad_request", "bad wait_ms");
    }
    if (wait_ms <= 0) co_return co_await acquire(key, body);
    co_return co_await acquire_queued(key, body, wait_ms, client_gone);
  }
  if (op == "renew") co_return renew(key, body);
  co_return release(key, body);
}

asio::awaitable<void> session(tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(64 * 1024);
    auto [ec, n] = co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    answer a;
    bool close = false;
    if (ec == http::error::body_limit) {
      a = error(http::status::payload_too_large, "body_too_large", "body over 64 KiB");
      close = true;
    } else if (ec) {
      co_return;
    } else {
      // Whether the client closed the connection (a waiting request's cue to leave).
      auto client_gone = [&stream] {
        char c = 0;
        const auto n = ::recv(stream.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
      };
      a = co_await route(parser.get(), client_gone);
      close = !parser.get().keep_alive();
    }
    http::response<http::string_body> res{a.status, 11};
    res.set(http::field::content_type, "application/json");
    if (!a.allow.empty()) res.set(http::field::allow, a.allow);
    res.body() = json::serialize(a.body);
    res.keep_alive(!close);
    res.prepare_payload();
    auto [wec, wn] = co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    if (wec || close) {
      beast::error_code ignored;
      stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
      co_return;
    }
  }
}

asio::awaitable<void> serve(tcp::acceptor acceptor) {
  for (;;) {
    auto socket = co_await acceptor.async_accept(asio::use_awaitable);
    asio::co_spawn(acceptor.get_executor(), session(std::move(socket)), asio::detached);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:0";
  for (int i = 1; i < argc; ++i) {
    std::string opt = argv[i];
    if (opt == "--core-only") {
      core_only = true;
      continue;
    }
    if (i + 1 == argc) break;
    ++i;
    if (opt == "--listen")
      listen = argv[i];
    else if (opt == "--bug")
      bug = argv[i];
    else if (opt == "--state-file")
      state_file = argv[i];
    else if (opt == "--capabilities")
      capabilities = argv[i];
  }
  static const char* const bugs[] = {"release-by-key",         "release-old-token", "counter-restarts",
                                     "tokens-not-kept",        "no-expiry",         "early-expiry-40ms",
                                     "early-expiry-15ms",      "renew-no-extend",   "ttl-32bit-us",
                                     "reacquire-keeps-expiry", "renew-shortens",    "poll-ignores-token",
                                     "poll-every-5s",          "racy-acquire",      "no-value",
                                     "batch-ignores-token",    "queue-lifo",        "none"};
  if (std::find(std::begin(bugs), std::end(bugs), bug) == std::end(bugs) ||
      (core_only && !capabilities.empty())) {
    std::cerr << "usage: broken-lockd --listen HOST:PORT --bug NAME [--state-file PATH]"
                 " [--capabilities JSON | --core-only] (NAME: see the top of broken_server.cpp)\n";
    return 64;
  }
  if (!state_file.empty()) load_state();
  auto colon = listen.rfind(':');
  asio::io_context ioc;
  tcp::endpoint ep(asio::ip::make_address(listen.substr(0, colon)),
                   static_cast<unsigned short>(std::stoi(listen.substr(colon + 1))));
  tcp::acceptor acceptor(ioc, ep);
  std::cout << "broken-lockd listening on " << acceptor.local_endpoint().address().to_string() << ":"
            << acceptor.local_endpoint().port() << std::endl;
  asio::co_spawn(ioc, serve(std::move(acceptor)), asio::detached);
  ioc.run();
}
