// SPDX-License-Identifier: Apache-2.0
#pragma once
// `baton conformance` over HTTP: the suite the checks share (the server's address, the run's keys, the
// protocol's requests spelled once, the tokens seen, the restart phase's state). Private to the CLI.

#include "advertised_features.hpp"
#include "conformance_check.hpp"
#include "conformance_wire.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace baton::cli::http_conformance {

class suite {
 public:
  suite(server_address addr, milliseconds timeout, std::optional<std::string> restart_command)
      : addr_(std::move(addr)),
        timeout_(timeout),
        prefix_(run_prefix()),
        restart_command_(std::move(restart_command)) {}

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
    return saw_token(c.request(http::verb::post, path(key, "/acquire"), json::serialize(body), timeout_));
  }
  // A queued acquire (feature acquire_queue): waits at the server up to `wait_ms`, and here up to `bound`.
  // `on_written` as connection::request's.
  reply acquire_queued(connection& c, const std::string& key, const std::string& owner, std::int64_t ttl_ms,
                       std::int64_t wait_ms, steady::duration bound,
                       const std::function<void()>& on_written = {}) const {
    return saw_token(c.request(http::verb::post, path(key, "/acquire?wait_ms=" + std::to_string(wait_ms)),
                               json::serialize(json::object{{"owner", owner}, {"ttl_ms", ttl_ms}}), bound,
                               on_written));
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
  reply proclaim(connection& c, const std::string& key, const std::string& owner, std::int64_t token,
                 const std::string& value) const {
    return c.request(http::verb::post, path(key, "/proclaim"),
                     json::serialize(json::object{{"owner", owner}, {"token", token}, {"value", value}}),
                     timeout_);
  }

  reply write_record(connection& c, const std::string& key, const std::string& owner, std::int64_t token,
                     const std::string& value) const {
    return c.request(http::verb::put, path(key, "/record"),
                     json::serialize(json::object{{"owner", owner}, {"token", token}, {"value", value}}),
                     timeout_);
  }
  reply read_record(connection& c, const std::string& key) const {
    return c.request(http::verb::get, path(key, "/record"), {}, timeout_);
  }

  // An acquire that must succeed; returns its reply.
  reply must_acquire(connection& c, const std::string& key, const std::string& owner, std::int64_t ttl_ms,
                     std::optional<std::string> value = std::nullopt) const {
    auto r = acquire(c, key, owner, ttl_ms, std::move(value));
    expect(r.status == 200, "acquire by " + owner + " (ttl " + std::to_string(ttl_ms) +
                                " ms): expected 200, got " + r.describe());
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

  reply poll(connection& c, const std::string& key, std::int64_t token, steady::duration bound) const {
    return c.request(http::verb::get, path(key) + "?wait_ms=20000&token=" + std::to_string(token), {}, bound);
  }

  milliseconds timeout() const { return timeout_; }
  std::int64_t max_token() const { return max_token_.load(); }
  const std::optional<std::string>& restart_command() const { return restart_command_; }

  // The restart checks' common ground, set once by the restart phase; skipped without --restart-command.
  const restart_state& restarted() const {
    if (!restart_command_) throw check_skipped("no --restart-command");
    if (!restart_.error.empty()) throw check_failed(restart_.error);
    return restart_;
  }
  void set_restarted(restart_state r) { restart_ = std::move(r); }

  // POST /v1/renew with these entries (key, owner, token, ttl_ms).
  struct batch_entry {
    std::string key, owner;
    std::int64_t token, ttl_ms;
  };
  reply renew_batch(connection& c, const std::vector<batch_entry>& entries) const {
    json::array leases;
    for (const auto& e : entries)
      leases.push_back(
          json::object{{"key", e.key}, {"owner", e.owner}, {"token", e.token}, {"ttl_ms", e.ttl_ms}});
    return c.request(http::verb::post, "/v1/renew",
                     json::serialize(json::object{{"leases", std::move(leases)}}), timeout_);
  }
  // What GET /v1/capabilities advertises: asked at the first check that needs it, and again only while the
  // answers tell nothing (a 5xx, no answer), as docs/protocol.md asks of a client.
  const advertised_features& advertised() const {
    if (!advertised_.known()) {
      auto c = open();
      auto r = c.request(http::verb::get, "/v1/capabilities", {}, timeout_);
      advertised_ = advertised_features::read(r.status, r.json, r.describe());
    }
    return advertised_;
  }
  // Every check of an optional feature starts here: it runs only when the server advertises the feature,
  // and is skipped as not advertised otherwise (advertised_features::require).
  void require_feature(std::string_view feature) const { advertised().require(feature); }
  bool has_feature(std::string_view feature) const { return advertised().has(feature); }
  // The lease whose TTL a batch raised before the restart (restart mode, when the server has batches).
  struct batch_raise {
    std::string key, owner;
    std::int64_t token = 0;
    std::string error;
  };
  mutable std::optional<batch_raise> batch_raised;

  // A remark printed after a passed check's name.
  void note(std::string text) const { note_ = std::move(text); }
  std::string take_note() const { return std::exchange(note_, {}); }

 private:
  // Granted or naming a holder, the token was issued: no restart may issue it, or a smaller one, again.
  reply saw_token(reply r) const {
    if (auto t = r.num("token"); t && (r.status == 200 || r.status == 409)) {
      auto seen = max_token_.load();
      while (*t > seen && !max_token_.compare_exchange_weak(seen, *t)) {
      }
    }
    return r;
  }

  server_address addr_;
  milliseconds timeout_;
  std::string prefix_;
  std::optional<std::string> restart_command_;
  restart_state restart_;
  mutable std::atomic<std::int64_t> max_token_{0};
  mutable std::string note_;
  mutable advertised_features advertised_;
};

// One check of docs/protocol.md over HTTP, under the name `baton conformance` prints.
struct check {
  const char* name;
  void (*run)(const suite&);
  // Why no backend can make it, said after "not applicable to an etcd backend: " (null: nothing to add).
  const char* off_backend = nullptr;
};

// The checks in the order they run (http_checks.cpp); restart_checks() (http_restart_checks.cpp) run after
// the restart phase.
std::span<const check> checks();
std::span<const check> restart_checks();

// Leaves a lease held and a lock released, runs --restart-command, and waits for the server to come back.
restart_state restart_server(const suite& s);

}  // namespace baton::cli::http_conformance
