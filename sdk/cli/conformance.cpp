// baton conformance: the guarantees of docs/protocol.md, checked from the outside against any server.
//
// Every check speaks raw HTTP/1.1 + JSON (the SDK's backend maps answers into its own errors, and the checks
// must see the exact statuses and bodies), on keys of its own: conformance/<random>/<check>. A check throws
// check_failed with the reason; the runner prints `PASS  name` or `FAIL  name: reason`.
//
// Timing is judged the way the protocol's Time section allows: a lease acquired with a request *sent* at
// client time a is held at least until a + ttl, so a read whose reply *arrived* before a + ttl must see it
// held; and it ends at most ttl after the acquire reply arrived, so the checks wait for it with generous
// bounds (5x the TTL) rather than tight ones.

#include "conformance.hpp"

#include "exit_code.hpp"

#include "baton/config.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

namespace baton::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using asio::ip::tcp;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace std::chrono_literals;

struct check_failed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void expect(bool ok, const std::string& reason) {
  if (!ok) throw check_failed(reason);
}

struct reply {
  int status = 0;     // 0: no answer (error says why)
  std::string error;  // transport failure
  std::string body;
  std::string allow;  // the Allow header
  json::value json;   // null unless the body is JSON
  steady::time_point sent, received;

  std::string str(std::string_view field) const {
    if (auto* o = json.if_object())
      if (auto* v = o->if_contains(field); v && v->is_string()) return std::string(v->get_string());
    return {};
  }
  std::optional<std::int64_t> num(std::string_view field) const {
    if (auto* o = json.if_object())
      if (auto* v = o->if_contains(field)) {
        if (v->is_int64()) return v->get_int64();
        if (v->is_uint64() && v->get_uint64() <= static_cast<std::uint64_t>(INT64_MAX))
          return static_cast<std::int64_t>(v->get_uint64());
      }
    return std::nullopt;
  }
  std::int64_t token() const {
    auto t = num("token");
    expect(t && *t >= 1, "answer without an integer token: " + describe());
    return *t;
  }
  std::string describe() const {
    if (status == 0) return "no answer (" + error + ")";
    std::string b = body.size() > 200 ? body.substr(0, 200) + "..." : body;
    return std::to_string(status) + " " + b;
  }
};

struct server_address {
  std::string host;
  std::string port;
};

server_address parse_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) throw cli_error(exit_code::usage, "conformance: --server must be http://HOST[:PORT]");
  std::string rest = url.substr(scheme.size());
  rest = rest.substr(0, rest.find('/'));
  server_address a{rest, "80"};
  if (!rest.empty() && rest.front() == '[') {  // [v6]:port
    auto close = rest.find(']');
    if (close == std::string::npos) throw cli_error(exit_code::usage, "conformance: bad --server URL " + url);
    a.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size() && rest[close + 1] == ':') a.port = rest.substr(close + 2);
  } else if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    a.host = rest.substr(0, colon);
    a.port = rest.substr(colon + 1);
  }
  if (a.host.empty() || a.port.empty()) throw cli_error(exit_code::usage, "conformance: bad --server URL " + url);
  return a;
}

// One keep-alive connection driven synchronously: each request runs its own io_context until the answer, a
// failure or the timeout. Writing and reading run at once, so an early answer (413) is read even when the
// server stops reading the body.
class connection {
 public:
  explicit connection(server_address a) : addr_(std::move(a)) {}

  reply request(http::verb method, const std::string& target, std::string body = {},
                steady::duration timeout = 10s) {
    reply r;
    r.sent = steady::now();
    beast::error_code ec;
    if (!open_) {
      tcp::resolver resolver(ioc_);
      auto endpoints = resolver.resolve(addr_.host, addr_.port, ec);
      if (ec) return fail(r, "resolve: " + ec.message());
      stream_.expires_after(timeout);
      stream_.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
      run();
      if (ec) return fail(r, "connect: " + ec.message());
      open_ = true;
      buffer_.clear();
    }
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, addr_.host);
    req.keep_alive(true);
    if (method == http::verb::post) {
      req.set(http::field::content_type, "application/json");
      req.body() = std::move(body);
      req.prepare_payload();
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 20);
    beast::error_code write_ec, read_ec;
    stream_.expires_after(timeout);
    http::async_write(stream_, req, [&](beast::error_code e, std::size_t) { write_ec = e; });
    http::async_read(stream_, buffer_, parser, [&](beast::error_code e, std::size_t) { read_ec = e; });
    run();
    r.received = steady::now();
    if (read_ec) return fail(r, (read_ec == beast::error::timeout ? std::string("timed out") : read_ec.message()));
    const auto& res = parser.get();
    r.status = static_cast<int>(res.result_int());
    r.body = res.body();
    if (auto it = res.find(http::field::allow); it != res.end()) r.allow = std::string(it->value());
    json::error_code jec;
    auto v = json::parse(r.body, jec);
    if (!jec) r.json = std::move(v);
    if (write_ec || !res.keep_alive()) close();
    return r;
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().close(ignored);
    open_ = false;
  }

 private:
  void run() {
    ioc_.restart();
    ioc_.run();
  }
  reply& fail(reply& r, std::string why) {
    r.error = std::move(why);
    r.received = steady::now();
    close();
    return r;
  }

  server_address addr_;
  asio::io_context ioc_;
  beast::tcp_stream stream_{ioc_};
  beast::flat_buffer buffer_;
  bool open_ = false;
};

std::string encode_segment(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string random_hex() {
  std::random_device rd;
  std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

class suite {
 public:
  suite(server_address addr, milliseconds timeout)
      : addr_(std::move(addr)), timeout_(timeout), prefix_("conformance/" + random_hex()) {}

  connection open() const { return connection(addr_); }
  const server_address& address() const { return addr_; }
  std::string key(const std::string& check) const { return prefix_ + "/" + check; }
  static std::string path(const std::string& key, const std::string& suffix = {}) {
    return "/v1/locks/" + encode_segment(key) + suffix;
  }

  reply acquire(connection& c, const std::string& key, const std::string& owner, std::int64_t ttl_ms,
                std::optional<std::string> value = std::nullopt) const {
    json::object body{{"owner", owner}, {"ttl_ms", ttl_ms}};
    if (value) body["value"] = *value;
    return c.request(http::verb::post, path(key, "/acquire"), json::serialize(body), timeout_);
  }
  reply renew(connection& c, const std::string& key, const std::string& owner, std::int64_t token,
              std::int64_t ttl_ms) const {
    return c.request(http::verb::post, path(key, "/renew"),
                     json::serialize(json::object{{"owner", owner}, {"token", token}, {"ttl_ms", ttl_ms}}),
                     timeout_);
  }
  reply release(connection& c, const std::string& key, const std::string& owner, std::int64_t token) const {
    return c.request(http::verb::post, path(key, "/release"),
                     json::serialize(json::object{{"owner", owner}, {"token", token}}), timeout_);
  }
  reply get(connection& c, const std::string& key) const {
    return c.request(http::verb::get, path(key), {}, timeout_);
  }

  // An acquire that must succeed; returns its reply.
  reply must_acquire(connection& c, const std::string& key, const std::string& owner, std::int64_t ttl_ms,
                     std::optional<std::string> value = std::nullopt) const {
    auto r = acquire(c, key, owner, ttl_ms, std::move(value));
    expect(r.status == 200, "acquire by " + owner + " (ttl " + std::to_string(ttl_ms) + " ms): expected 200, got " +
                                r.describe());
    expect(r.num("token").value_or(0) >= 1, "acquire answered without a token >= 1: " + r.describe());
    return r;
  }

  static void expect_error(const reply& r, int status, const std::string& error, const std::string& what) {
    expect(r.status == status && r.str("error") == error,
           what + ": expected " + std::to_string(status) + " " + error + ", got " + r.describe());
    expect(r.json.is_object() && r.json.as_object().if_contains("message") &&
               r.json.as_object().at("message").is_string(),
           what + ": error body without a \"message\" string: " + r.describe());
  }

  milliseconds timeout() const { return timeout_; }

 private:
  server_address addr_;
  milliseconds timeout_;
  std::string prefix_;
};

// --- the checks ---------------------------------------------------------------------------------------------

void concurrent_acquires(const suite& s) {
  constexpr int n = 32;
  const auto key = s.key("concurrent");
  std::vector<std::unique_ptr<connection>> conns;
  for (int i = 0; i < n; ++i) {
    conns.push_back(std::make_unique<connection>(s.address()));
    auto h = conns.back()->request(http::verb::get, "/healthz", {}, s.timeout());
    expect(h.status == 200, "GET /healthz before the race: " + h.describe());
  }
  std::vector<reply> replies(n);
  std::latch start(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      replies[static_cast<std::size_t>(i)] =
          s.acquire(*conns[static_cast<std::size_t>(i)], key, "racer-" + std::to_string(i), 30'000);
    });
  for (auto& t : threads) t.join();
  std::vector<int> winners;
  for (int i = 0; i < n; ++i) {
    const auto& r = replies[static_cast<std::size_t>(i)];
    if (r.status == 200)
      winners.push_back(i);
    else
      suite::expect_error(r, 409, "held", "racer-" + std::to_string(i));
  }
  if (!winners.empty()) {  // tidy up
    auto w = static_cast<std::size_t>(winners.front());
    auto token = replies[w].num("token").value_or(1);
    for (int i : winners)
      s.release(*conns[static_cast<std::size_t>(i)], key, "racer-" + std::to_string(i),
                replies[static_cast<std::size_t>(i)].num("token").value_or(token));
  }
  expect(winners.size() == 1, std::to_string(winners.size()) + " of " + std::to_string(n) +
                                  " concurrent acquirers of one free key got 200 (expected exactly 1)");
  const auto winner = "racer-" + std::to_string(winners.front());
  const auto token = replies[static_cast<std::size_t>(winners.front())].num("token");
  for (int i = 0; i < n; ++i) {
    const auto& r = replies[static_cast<std::size_t>(i)];
    if (i != winners.front())
      expect(r.str("owner") == winner && r.num("token") == token,
             "a refusal names " + r.str("owner") + " as the holder, not the winner " + winner + ": " + r.describe());
  }
}

void held_names_holder(const suite& s) {
  auto c = s.open();
  const auto key = s.key("held");
  auto a = s.must_acquire(c, key, "holder-a", 30'000);
  auto b = s.acquire(c, key, "other-b", 30'000);
  suite::expect_error(b, 409, "held", "acquire by another owner while held");
  expect(b.str("owner") == "holder-a" && b.num("token") == a.num("token"),
         "the refusal does not name the holder holder-a with token " + std::to_string(a.token()) + ": " +
             b.describe());
  expect(b.num("ttl_remaining_ms").has_value(), "the refusal has no integer ttl_remaining_ms: " + b.describe());
  s.release(c, key, "holder-a", a.token());
}

void reacquire_larger_token(const suite& s) {
  auto c = s.open();
  const auto key = s.key("reacquire");
  auto first = s.must_acquire(c, key, "same", 30'000);
  auto second = s.must_acquire(c, key, "same", 30'000);
  s.release(c, key, "same", second.token());
  expect(second.token() > first.token(), "the same owner's second acquire got token " +
                                             std::to_string(second.token()) + ", not larger than " +
                                             std::to_string(first.token()));
}

void expect_lost(const reply& r, std::initializer_list<const char*> reasons, const std::string& what) {
  suite::expect_error(r, 409, "lost", what);
  const auto reason = r.str("reason");
  bool ok = false;
  for (auto* x : reasons) ok = ok || reason == x;
  std::string allowed;
  for (auto* x : reasons) allowed += (allowed.empty() ? "" : " or ") + std::string(x);
  expect(ok, what + ": reason should be " + allowed + ", got " + r.describe());
}

void renew_wrong_owner(const suite& s) {
  auto c = s.open();
  const auto key = s.key("renew-owner");
  auto a = s.must_acquire(c, key, "owner-a", 30'000);
  expect_lost(s.renew(c, key, "owner-b", a.token(), 30'000), {"owner_mismatch"}, "renew by another owner");
  auto ok = s.renew(c, key, "owner-a", a.token(), 30'000);
  s.release(c, key, "owner-a", a.token());
  expect(ok.status == 200, "the holder's own renew after the refusal: expected 200, got " + ok.describe());
}

void renew_wrong_token(const suite& s) {
  auto c = s.open();
  const auto key = s.key("renew-token");
  auto first = s.must_acquire(c, key, "owner-a", 30'000);
  auto second = s.must_acquire(c, key, "owner-a", 30'000);
  auto old = s.renew(c, key, "owner-a", first.token(), 30'000);
  auto made_up = s.renew(c, key, "owner-a", second.token() + 1'000'000, 30'000);
  s.release(c, key, "owner-a", second.token());
  expect_lost(old, {"token_mismatch"}, "renew with the superseded token");
  expect_lost(made_up, {"token_mismatch"}, "renew with a token never issued for this lease");
}

void renew_expired(const suite& s) {
  auto c = s.open();
  const auto key = s.key("renew-expired");
  auto a = s.must_acquire(c, key, "owner-a", 200);
  std::this_thread::sleep_until(a.received + 1200ms);
  auto r = s.renew(c, key, "owner-a", a.token(), 30'000);
  if (r.status == 200) s.release(c, key, "owner-a", a.token());
  expect_lost(r, {"expired", "not_held"}, "renew 1.2 s after a 200 ms lease was granted");
}

void release_conditional(const suite& s) {
  auto c = s.open();
  const auto key = s.key("release-conditional");
  auto a = s.must_acquire(c, key, "owner-a", 30'000);
  auto by_other = s.release(c, key, "owner-b", a.token());
  auto by_wrong_token = s.release(c, key, "owner-a", a.token() + 1'000'000);
  auto still = s.get(c, key);
  s.release(c, key, "owner-a", a.token());
  suite::expect_error(by_other, 409, "not_owner", "release by another owner");
  suite::expect_error(by_wrong_token, 409, "not_owner", "release with a wrong token");
  expect(still.status == 200 && still.str("owner") == "owner-a" && still.num("token") == a.num("token"),
         "after the refused releases the lock should still be held by owner-a with token " +
             std::to_string(a.token()) + ", GET says " + still.describe());
}

void release_idempotent(const suite& s) {
  auto c = s.open();
  const auto key = s.key("release-idempotent");
  auto a = s.must_acquire(c, key, "owner-a", 30'000);
  auto first = s.release(c, key, "owner-a", a.token());
  expect(first.status == 200, "release by the holder: expected 200, got " + first.describe());
  auto second = s.release(c, key, "owner-a", a.token());
  expect(second.status == 200, "the same release again: expected 200, got " + second.describe());
  auto free = s.get(c, key);
  suite::expect_error(free, 404, "not_held", "GET after the release");
  auto never = s.release(c, s.key("release-never-held"), "owner-a", 1);
  expect(never.status == 200, "release of a key nobody holds: expected 200, got " + never.describe());
}

void tokens_increase(const suite& s) {
  auto c = s.open();
  const auto key = s.key("tokens");
  auto t1 = s.must_acquire(c, key, "owner-a", 30'000).token();
  auto rel = s.release(c, key, "owner-a", t1);
  expect(rel.status == 200, "release: expected 200, got " + rel.describe());
  auto b = s.must_acquire(c, key, "owner-b", 200);
  auto t2 = b.token();
  expect(t2 > t1, "token after a release is " + std::to_string(t2) + ", not larger than " + std::to_string(t1));
  std::this_thread::sleep_until(b.received + 1200ms);
  auto t3 = s.must_acquire(c, key, "owner-c", 30'000).token();
  expect(t3 > t2, "token after an expiry is " + std::to_string(t3) + ", not larger than " + std::to_string(t2));
  auto t4 = s.must_acquire(c, s.key("tokens-other-key"), "owner-d", 30'000).token();
  s.release(c, key, "owner-c", t3);
  s.release(c, s.key("tokens-other-key"), "owner-d", t4);
  expect(t4 > t3, "token on another key is " + std::to_string(t4) + ", not larger than " + std::to_string(t3));
}

void expiry_on_time(const suite& s) {
  auto c = s.open();
  const auto key = s.key("expiry");
  // Held while a read's reply arrives before send(acquire) + ttl; a slow machine may leave no read that fast,
  // so the TTL doubles until one is (inconclusive attempts prove nothing either way).
  for (std::int64_t ttl = 1000; ttl <= 4000; ttl *= 2) {
    const auto ttl_d = milliseconds(ttl);
    auto a = s.must_acquire(c, key + "-" + std::to_string(ttl), "owner-a", ttl);
    const auto k = key + "-" + std::to_string(ttl);
    std::this_thread::sleep_until(a.sent + ttl_d * 6 / 10);
    auto g = s.get(c, k);
    const bool conclusive = g.received < a.sent + ttl_d;
    if (conclusive)
      expect(g.status == 200 && g.num("token") == a.num("token"),
             "a GET answered " + std::to_string((g.received - a.sent) / 1ms) + " ms after sending the acquire of a " +
                 std::to_string(ttl) + " ms lease does not show it held: " + g.describe());
    // Free within 5x the TTL of the acquire's reply.
    const auto bound = a.received + ttl_d * 5;
    for (;;) {
      auto f = s.get(c, k);
      if (f.status == 404) {
        suite::expect_error(f, 404, "not_held", "GET after expiry");
        expect(f.received >= a.sent + ttl_d, "the lease was reported free before its TTL had passed");
        break;
      }
      expect(f.status == 200, "GET while waiting for the expiry: " + f.describe());
      if (steady::now() > bound) {
        s.release(c, k, "owner-a", a.token());
        throw check_failed("a " + std::to_string(ttl) + " ms lease is still held " +
                           std::to_string((steady::now() - a.received) / 1ms) + " ms after it was granted");
      }
      std::this_thread::sleep_for(50ms);
    }
    if (conclusive) return;
  }
  throw check_failed("inconclusive: no GET was answered before the lease's TTL had passed (machine too slow?)");
}

// Starts a long-poll on its own connection and thread.
std::future<reply> long_poll(const suite& s, const std::string& key, std::int64_t token, steady::duration bound) {
  return std::async(std::launch::async, [&s, key, token, bound] {
    auto c = s.open();
    return c.request(http::verb::get, suite::path(key) + "?wait_ms=20000&token=" + std::to_string(token), {},
                     bound);
  });
}

void long_poll_release(const suite& s) {
  auto c = s.open();
  const auto key = s.key("poll-release");
  auto a = s.must_acquire(c, key, "owner-a", 30'000);
  auto poll = long_poll(s, key, a.token(), 15s);
  const bool early = poll.wait_for(500ms) == std::future_status::ready;
  auto rel = s.release(c, key, "owner-a", a.token());
  auto r = poll.get();
  expect(!early, "the long-poll answered while the holder's token was unchanged: " + r.describe());
  expect(rel.status == 200, "release: expected 200, got " + rel.describe());
  expect(r.status != 0, "the long-poll (wait_ms=20000) was not woken within 15 s of the release: " + r.describe());
  suite::expect_error(r, 404, "not_held", "the long-poll's answer after the release");
}

void long_poll_expiry(const suite& s) {
  auto c = s.open();
  const auto key = s.key("poll-expiry");
  auto a = s.must_acquire(c, key, "owner-a", 1000);
  auto r = long_poll(s, key, a.token(), 1000ms * 5 + 3s).get();
  if (r.status == 0) s.release(c, key, "owner-a", a.token());
  expect(r.status != 0, "the long-poll (wait_ms=20000) was not woken within 8 s by the expiry of a 1000 ms lease: " +
                            r.describe());
  suite::expect_error(r, 404, "not_held", "the long-poll's answer after the expiry");
  expect(r.received >= a.sent + 1000ms, "the long-poll reported the lease free before its TTL had passed");
}

// Bad inputs: each on a fresh connection (the server may close it after an error).
reply bad(const suite& s, http::verb method, const std::string& target, std::string body = {}) {
  auto c = s.open();
  return c.request(method, target, std::move(body), s.timeout());
}

void malformed_json(const suite& s) {
  suite::expect_error(bad(s, http::verb::post, suite::path(s.key("bad-json"), "/acquire"), R"({"owner":"x","ttl_ms":)"),
                      400, "bad_request", "truncated JSON");
  suite::expect_error(bad(s, http::verb::post, suite::path(s.key("bad-json"), "/acquire"), "[1,2,3]"), 400,
                      "bad_request", "a JSON array instead of an object");
}

void missing_field(const suite& s) {
  const auto key = s.key("missing-field");
  suite::expect_error(bad(s, http::verb::post, suite::path(key, "/acquire"), R"({"ttl_ms":1000})"), 400,
                      "bad_request", "acquire without owner");
  suite::expect_error(bad(s, http::verb::post, suite::path(key, "/acquire"), R"({"owner":"x"})"), 400,
                      "bad_request", "acquire without ttl_ms");
  suite::expect_error(bad(s, http::verb::post, suite::path(key, "/renew"), R"({"owner":"x","ttl_ms":1000})"), 400,
                      "bad_request", "renew without token");
}

void ttl_out_of_range(const suite& s) {
  const auto key = s.key("ttl-range");
  suite::expect_error(bad(s, http::verb::post, suite::path(key, "/acquire"), R"({"owner":"x","ttl_ms":0})"), 400,
                      "bad_request", "acquire with ttl_ms 0");
  suite::expect_error(bad(s, http::verb::post, suite::path(key, "/acquire"), R"({"owner":"x","ttl_ms":-1000})"),
                      400, "bad_request", "acquire with ttl_ms -1000");
  auto c = s.open();
  suite::expect_error(s.get(c, key), 404, "not_held", "GET after the refused acquires (nothing may change)");
}

void unknown_route(const suite& s) {
  suite::expect_error(bad(s, http::verb::get, "/v1/no-such-route"), 404, "not_found", "GET /v1/no-such-route");
  suite::expect_error(bad(s, http::verb::post, suite::path(s.key("route"), "/frobnicate"), "{}"), 404, "not_found",
                      "POST /v1/locks/{key}/frobnicate");
}

void wrong_method(const suite& s) {
  auto r = bad(s, http::verb::get, suite::path(s.key("method"), "/acquire"));
  suite::expect_error(r, 405, "method_not_allowed", "GET on the acquire route");
  expect(r.allow.find("POST") != std::string::npos, "405 without an Allow header naming POST: Allow: " + r.allow);
}

void body_too_large(const suite& s) {
  const auto key = s.key("large-body");
  std::string body = R"({"owner":"x","ttl_ms":1000,"pad":")" + std::string(70 * 1024, 'a') + "\"}";
  auto r = bad(s, http::verb::post, suite::path(key, "/acquire"), std::move(body));
  suite::expect_error(r, 413, "body_too_large", "a 70 KiB acquire body");
  auto c = s.open();
  suite::expect_error(s.get(c, key), 404, "not_held", "GET after the refused acquire (nothing may change)");
}

void still_serves(const suite& s) {
  auto c = s.open();
  auto h = c.request(http::verb::get, "/healthz", {}, s.timeout());
  expect(h.status == 200 && h.str("status") == "ok", "GET /healthz: expected 200 {\"status\":\"ok\"}, got " + h.describe());
  const auto key = s.key("still-serves");
  auto a = s.must_acquire(c, key, "owner-a", 30'000);
  auto r = s.release(c, key, "owner-a", a.token());
  expect(r.status == 200, "release: expected 200, got " + r.describe());
}

// docs/protocol.md, "value": published with the lease in GET, long-poll and 409 answers, replaced by a
// same-owner re-acquire, kept by renew. A server from before values ignores the field and never answers it.
void value_round_trip(const suite& s) {
  auto c = s.open();
  const auto key = s.key("value");
  auto shown = [&](const reply& r, const std::string& want, const std::string& what) {
    const auto* o = r.json.if_object();
    expect(o && o->if_contains("value"),
           what +
               " has no \"value\" field: the server does not keep a lease's value (docs/protocol.md, "
               "\"value\"): " +
               r.describe());
    expect(r.str("value") == want, what + ": expected value \"" + want + "\", got " + r.describe());
  };
  s.must_acquire(c, key, "valued-a", 30'000, "10.0.0.1:8080");
  shown(s.get(c, key), "10.0.0.1:8080", "GET of a lease acquired with a value");
  shown(c.request(http::verb::get, suite::path(key, "?wait_ms=5000&token=0"), {}, s.timeout()),
        "10.0.0.1:8080", "a long-poll's answer");
  auto held = s.acquire(c, key, "other-b", 30'000, "10.0.0.2:8080");
  suite::expect_error(held, 409, "held", "acquire by another owner while held");
  shown(held, "10.0.0.1:8080", "the 409 held refusal");
  auto again = s.must_acquire(c, key, "valued-a", 30'000, "10.0.0.1:9090");
  shown(s.get(c, key), "10.0.0.1:9090", "GET after a same-owner re-acquire with a new value");
  auto r = s.renew(c, key, "valued-a", again.token(), 30'000);
  expect(r.status == 200, "renew: expected 200, got " + r.describe());
  shown(s.get(c, key), "10.0.0.1:9090", "GET after a renew");
  s.must_acquire(c, key, "valued-a", 30'000);
  auto last = s.get(c, key);
  shown(last, "", "GET after a same-owner re-acquire without a value");
  s.release(c, key, "valued-a", last.token());
}

struct check {
  const char* name;
  void (*run)(const suite&);
};

constexpr check checks[] = {
    {"concurrent acquires have one winner", concurrent_acquires},
    {"acquire while held is refused naming the holder", held_names_holder},
    {"same-owner re-acquire gets a larger token", reacquire_larger_token},
    {"renew is refused for a wrong owner", renew_wrong_owner},
    {"renew is refused for a wrong token", renew_wrong_token},
    {"renew is refused for an expired lease", renew_expired},
    {"release is conditional on owner and token", release_conditional},
    {"release is idempotent", release_idempotent},
    {"tokens increase across release and expiry", tokens_increase},
    {"expiry frees the lock on time", expiry_on_time},
    {"long-poll wakes on release", long_poll_release},
    {"long-poll wakes on expiry", long_poll_expiry},
    {"a lease's value is published, replaced and kept", value_round_trip},
    {"malformed JSON is 400 bad_request", malformed_json},
    {"missing field is 400 bad_request", missing_field},
    {"ttl out of range is 400 bad_request", ttl_out_of_range},
    {"unknown route is 404 not_found", unknown_route},
    {"wrong method is 405 method_not_allowed", wrong_method},
    {"body over 64 KiB is 413 body_too_large", body_too_large},
    {"server still serves after bad inputs", still_serves},
};

}  // namespace

int run_conformance(const std::string& server_url, milliseconds request_timeout) {
  // The checks' own waits are longer than the CLI's default round trip; never bound a request below 10 s.
  suite s(parse_url(server_url), std::max(request_timeout, milliseconds(10'000)));
  {
    auto c = s.open();
    auto h = c.request(http::verb::get, "/healthz", {}, s.timeout());
    if (h.status == 0) throw cli_error(exit_code::unavailable, "conformance: " + server_url + ": " + h.describe());
  }
  int failed = 0;
  for (const auto& ch : checks) {
    std::string reason;
    try {
      ch.run(s);
    } catch (const std::exception& e) {
      reason = e.what();
    }
    std::replace_if(
        reason.begin(), reason.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    if (reason.empty()) {
      std::printf("PASS  %s\n", ch.name);
    } else {
      ++failed;
      std::printf("FAIL  %s: %s\n", ch.name, reason.c_str());
    }
    std::fflush(stdout);
  }
  const int total = static_cast<int>(std::size(checks));
  std::printf("%d of %d checks passed against %s\n", total - failed, total,
              without_credentials(server_url).c_str());
  std::fflush(stdout);
  return failed == 0 ? exit_code::ok : exit_code::internal;
}

}  // namespace baton::cli
