// SPDX-License-Identifier: Apache-2.0
// The HTTP backend: docs/protocol.md over a pool of HTTP/1.1 keep-alive connections (http_transport).

#include "baton/backend.hpp"
#include "baton/common/tls_context.hpp"
#include "baton/error.hpp"
#include "http_transport.hpp"
#include "renew_batch_answer.hpp"
#include "renew_batch_body.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>

#include <algorithm>
#include <chrono>
#include <span>
#include <vector>

namespace baton {
namespace {
using detail::http_result;
using detail::string_field;
using detail::uint_field;

namespace asio = boost::asio;
namespace json = boost::json;

// Maps a status the operation does not expect to an error, keeping the server's message.
void unexpected(http_result& r) {
  std::string msg = string_field(r.body, "message");
  const std::string code = string_field(r.body, "error");
  // A limit refuses before anything changes. Any other 503 (storage_unavailable, or one from a proxy) may
  // come after the change reached the server: its outcome is unknown, which storage_unavailable says.
  const bool at_limit =
      r.status == 429 || (r.status == 503 && (code == "too_many_waiters" || code == "too_many_connections"));
  // No such resource here (404, 405 and 410 from batond or from another HTTP service at that address): the
  // URL does not lead to the lock protocol. Retrying cannot help, and an acquire would wait for ever.
  const bool not_the_protocol = r.status == 404 || r.status == 405 || r.status == 410;
  if (not_the_protocol) {
    r.ec = error::protocol_error;
    r.diagnostic = "HTTP " + std::to_string(r.status) + (msg.empty() ? "" : ": " + msg) +
                   ": no Baton lock protocol at this URL (server_url must name the server's root, such as "
                   "http://host:7070, without /v1 or another path the server does not have)";
    return;
  }
  if (r.status == 400)
    r.ec = error::bad_request;
  else if (r.status == 401)
    r.ec = error::unauthorized;
  else if (r.status == 403)
    r.ec = error::forbidden;
  else if (at_limit)
    r.ec = error::server_busy;
  else if (r.status == 503)
    r.ec = error::storage_unavailable;
  else
    r.ec = error::server_error;
  r.diagnostic = "HTTP " + std::to_string(r.status) + (msg.empty() ? "" : ": " + msg);
}

class http_backend final : public backend {
  // Whether the server has an optional feature (GET /v1/capabilities).
  enum class support { unknown, yes, no };

 public:
  http_backend(asio::any_io_executor ex, const client_config& config) : ex_(std::move(ex)), config_(config) {
    auto u = boost::urls::parse_absolute_uri(config.server_url);
    if (!u || (u->scheme() != "http" && u->scheme() != "https") || u->host().empty())
      throw exception(error::invalid_config,
                      "unsupported server URL \"" + without_credentials(config.server_url) + "\"");
    const bool https = u->scheme() == "https";
    std::string host = u->host_address();
    if (u->host_type() == boost::urls::host_type::ipv6 && host.size() > 2 && host.front() == '[')
      host = host.substr(1, host.size() - 2);
    transport_ = std::make_unique<detail::http_transport>(
        ex_, host, u->has_port() ? std::string(u->port()) : std::string(https ? "443" : "80"),
        std::string(u->encoded_host_and_port()), config.max_idle_connections, config.max_connections,
        https ? detail::make_client_tls(config.tls) : nullptr);
    if (!config.bearer_token.empty()) transport_->set_authorization("Bearer " + config.bearer_token);
    base_path_ = std::string(u->encoded_path());
    while (!base_path_.empty() && base_path_.back() == '/')
      base_path_.pop_back();
  }

  asio::awaitable<acquire_reply> acquire(std::string key, std::string owner, milliseconds ttl,
                                         std::string value, milliseconds timeout) override {
    co_return co_await send_acquire(lock_path(key) + "/acquire", owner, ttl, value, milliseconds{0}, timeout);
  }

  // Sent only to a server that advertises `lock_delay`: an older one ignores an unknown field, and would
  // grant a lease without the delay the caller counts on.
  asio::awaitable<acquire_reply> acquire_with_delay(std::string key, std::string owner, milliseconds ttl,
                                                    std::string value, milliseconds lock_delay,
                                                    std::optional<milliseconds> wait,
                                                    milliseconds timeout) override {
    acquire_reply out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    if (!co_await feature_ready(delay_, no_delay, timeout, out)) co_return out;
    if (wait && !co_await feature_ready(queue_, no_queue, left(deadline), out)) co_return out;
    auto target = lock_path(key) + "/acquire";
    if (wait)
      target +=
          "?wait_ms=" + std::to_string(std::clamp(*wait, milliseconds(1), milliseconds(30'000)).count());
    co_return co_await send_acquire(std::move(target), owner, ttl, value, lock_delay, left(deadline));
  }

  asio::awaitable<acquire_reply> acquire_queued(std::string key, std::string owner, milliseconds ttl,
                                                std::string value, milliseconds wait,
                                                milliseconds timeout) override {
    acquire_reply out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    if (!co_await feature_ready(queue_, no_queue, timeout, out)) co_return out;
    // At most 30 s in one request (batond clamps at 60 s; proxies end quiet requests): a longer wait is
    // answered `held` then, and the caller queues again.
    wait = std::clamp(wait, milliseconds(1), milliseconds(30'000));
    auto target = lock_path(key) + "/acquire?wait_ms=" + std::to_string(wait.count());
    co_return co_await send_acquire(std::move(target), owner, ttl, value, milliseconds{0}, left(deadline));
  }

  // A semaphore's permit: `permits` sent only to a server that advertises `semaphores` (an older one would
  // ignore the field and grant a lock: a second holder where the caller counts on a shared key, and a first
  // holder where it counts on N). 1 permit is a lock's acquire, sent as it always was.
  asio::awaitable<acquire_reply> acquire_with(acquire_request q) override {
    if (q.permits <= 1) co_return co_await backend::acquire_with(std::move(q));
    acquire_reply out;
    const auto deadline = std::chrono::steady_clock::now() + q.timeout;
    if (!co_await feature_ready(semaphores_, no_semaphores, q.timeout, out)) co_return out;
    if (permits_max_ > 0 && q.permits > permits_max_) {
      out.ec = error::invalid_config;
      out.diagnostic = std::to_string(q.permits) + " permits asked; this server allows at most " +
                       std::to_string(permits_max_) + " (permits_max in /v1/capabilities)";
      co_return out;
    }
    if (q.lock_delay > milliseconds{0} && !co_await feature_ready(delay_, no_delay, left(deadline), out))
      co_return out;
    if (q.wait && !co_await feature_ready(queue_, no_queue, left(deadline), out)) co_return out;
    auto target = lock_path(q.key) + "/acquire";
    if (q.wait)
      target +=
          "?wait_ms=" + std::to_string(std::clamp(*q.wait, milliseconds(1), milliseconds(30'000)).count());
    co_return co_await send_acquire(std::move(target), q.owner, q.ttl, q.value, q.lock_delay, left(deadline),
                                    q.permits);
  }

  // An acquire, plain or queued: the same body and the same answers (a queued grant adds queued_ms).
  asio::awaitable<acquire_reply> send_acquire(std::string target, const std::string& owner, milliseconds ttl,
                                              const std::string& value, milliseconds lock_delay,
                                              milliseconds timeout, std::uint32_t permits = 1) {
    json::object body{{"owner", owner}, {"ttl_ms", ttl.count()}};
    // Sent only when there is one: an acquire without a value is the same request as before values.
    if (!value.empty()) body["value"] = value;
    if (lock_delay > milliseconds{0}) body["lock_delay_ms"] = lock_delay.count();
    if (permits > 1) body["permits"] = permits;
    auto r = co_await transport_->request("POST", std::move(target), json::serialize(body), timeout);
    acquire_reply out;
    if (!r.ec) {
      if (r.status == 200) {
        if (!uint_field(r.body, "token", out.token) || out.token == 0)
          protocol(r, "acquire answer has no token");
        // A grant must echo the lock-delay asked for (or a larger one, kept from the same owner's lease): a
        // server that ignored the field would free the key at once after an expiry, while the caller counts
        // on the delay. Such a grant is refused, and handed back (the token stays in the reply for that).
        std::uint64_t kept = 0;
        if (lock_delay > milliseconds{0} && !r.ec &&
            (!uint_field(r.body, "lock_delay_ms", kept) ||
             kept < static_cast<std::uint64_t>(lock_delay.count())))
          protocol(r, "the server granted the lease without the lock-delay asked for (lock_delay_ms " +
                          std::to_string(lock_delay.count()) + "); the grant is released");
        std::uint64_t queued = 0;
        if (uint_field(r.body, "queued_ms", queued))
          out.queued = milliseconds(static_cast<std::int64_t>(std::min<std::uint64_t>(queued, 1ull << 40)));
        read_permits(r, permits, out.permits, &out.slot);
      } else if (r.status == 409 && string_field(r.body, "error") == "held") {
        r.ec = error::held;
        read_holder(r.body, out.holder);
        read_permits(r, 0, out.permits, nullptr);
        if (const auto* hs = r.body.as_object().if_contains("holders"); hs && hs->is_array()) {
          for (const auto& h : hs->as_array()) {
            holder_info one;
            std::uint64_t slot = 0;
            if (!h.is_object() || !uint_field(h, "slot", slot) || slot >= out.permits ||
                !uint_field(h, "token", one.token)) {
              protocol(r, "a holder of the held answer lacks slot or token, or its slot is out of range");
              break;
            }
            read_holder(h, one);
            one.slot = static_cast<std::uint32_t>(slot);
            out.holders.push_back(std::move(one));
          }
        }
        if (!r.ec || r.ec == error::held) r.diagnostic = string_field(r.body, "message");
      } else if (r.status == 409 && string_field(r.body, "error") == "permits_mismatch") {
        r.ec = error::permits_mismatch;
        read_permits(r, 0, out.permits, nullptr);
        if (r.ec == error::permits_mismatch) r.diagnostic = string_field(r.body, "message");
      } else {
        unexpected(r);
      }
    }
    co_return with_outcome(std::move(out), r);
  }

  asio::awaitable<renew_reply> renew(std::string key, std::string owner, std::uint64_t token,
                                     milliseconds ttl, milliseconds timeout) override {
    json::object body{{"owner", owner}, {"token", token}, {"ttl_ms", ttl.count()}};
    auto r = co_await transport_->request("POST", lock_path(key) + "/renew", json::serialize(body), timeout);
    renew_reply out;
    if (!r.ec && r.status != 200 && !read_lost(r, out)) unexpected(r);
    co_return with_outcome(std::move(out), r);
  }

  asio::awaitable<release_reply> release(std::string key, std::string owner, std::uint64_t token,
                                         milliseconds timeout) override {
    json::object body{{"owner", owner}, {"token", token}};
    auto r =
        co_await transport_->request("POST", lock_path(key) + "/release", json::serialize(body), timeout);
    release_reply out;
    if (!r.ec) {
      if (r.status == 200) {
        // "outcome" is optional in the protocol; without it a 200 means released.
        out.outcome = string_field(r.body, "outcome") == "already_free" ? release_outcome::already_free
                                                                        : release_outcome::released;
      } else if (r.status == 409 && string_field(r.body, "error") == "not_owner") {
        out.outcome = release_outcome::not_owner;
        r.diagnostic = string_field(r.body, "message");
      } else {
        unexpected(r);
      }
    }
    co_return with_outcome(std::move(out), r);
  }

  // Sent only to a server that advertises `proclaim`: to one without the route, a 404 would read as "no lock
  // protocol here", and nothing else means the same (docs/protocol.md, "proclaim").
  asio::awaitable<proclaim_reply> proclaim(std::string key, std::string owner, std::uint64_t token,
                                           std::string value, milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    proclaim_reply out;
    if (!co_await feature_ready(proclaim_, no_proclaim, timeout, out)) co_return out;
    auto r = co_await send_value("POST", lock_path(key) + "/proclaim", owner, token, value, deadline);
    if (!r.ec && r.status != 200 && !read_lost(r, out) && !lost_route(r, proclaim_, no_proclaim))
      unexpected(r);
    co_return with_outcome(std::move(out), r);
  }

  // Sent only to a server that advertises `lock_record`, as proclaim is, and only a value within the
  // server's record_max_bytes (a larger one would be refused, and its body could be over the body limit).
  asio::awaitable<record_write_reply> write_record(std::string key, std::string owner, std::uint64_t token,
                                                   std::string value, milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    record_write_reply out;
    if (!co_await feature_ready(record_, no_record, timeout, out)) co_return out;
    if (value.size() > record_max_) {
      out.ec = error::invalid_config;
      out.diagnostic = "the record value is " + std::to_string(value.size()) +
                       " bytes; this server keeps at most " + std::to_string(record_max_) +
                       " (record_max_bytes in /v1/capabilities)";
      co_return out;
    }
    auto r = co_await send_value("PUT", lock_path(key) + "/record", owner, token, value, deadline);
    if (!r.ec && r.status == 200) {
      if (!uint_field(r.body, "version", out.version) || out.version == 0)
        protocol(r, "record write answer has no version");
    } else if (!r.ec && !read_lost(r, out)) {
      if (r.status == 409 && string_field(r.body, "error") == "stale_token") {
        r.ec = error::stale_token;
        r.diagnostic = string_field(r.body, "message");
      } else if (!lost_route(r, record_, no_record)) {
        unexpected(r);
      }
    }
    co_return with_outcome(std::move(out), r);
  }

  asio::awaitable<record_read_reply> read_record(std::string key, milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    record_read_reply out;
    if (!co_await feature_ready(record_, no_record, timeout, out)) co_return out;
    auto r = co_await transport_->request("GET", lock_path(key) + "/record", {}, left(deadline));
    if (!r.ec && r.status == 200) {
      lock_record rec;
      const auto* value = r.body.is_object() ? r.body.as_object().if_contains("value") : nullptr;
      if (!value || !value->is_string() || !uint_field(r.body, "token", rec.token) ||
          !uint_field(r.body, "version", rec.version)) {
        protocol(r, "record answer lacks value, token or version");
      } else {
        rec.value = value->as_string();
        rec.owner = string_field(r.body, "owner");
        out.record = std::move(rec);
      }
    } else if (!r.ec && !(r.status == 404 && string_field(r.body, "error") == "no_record") &&
               !lost_route(r, record_, no_record)) {
      unexpected(r);
    }
    co_return with_outcome(std::move(out), r);
  }

  asio::awaitable<get_reply> get(std::string key, std::optional<wait_for_change> wait,
                                 milliseconds timeout) override {
    std::string target = lock_path(key);
    if (wait)
      target += "?wait_ms=" + std::to_string(wait->wait.count()) + "&token=" + std::to_string(wait->token);
    // The value is worth sending only to a server that knows it; another would ignore it, and the wait would
    // answer at a change of holder only, as the caller was told it may.
    if (wait && wait->value && proclaim_ == support::yes)
      target += "&value=" + boost::urls::encode(*wait->value, boost::urls::unreserved_chars);
    auto r = co_await transport_->request("GET", target, {}, timeout);
    get_reply out;
    if (!r.ec) {
      if (r.status == 200) {
        holder_info h;
        h.owner = string_field(r.body, "owner");
        std::uint64_t remaining = 0;
        if (!uint_field(r.body, "token", h.token) || !uint_field(r.body, "ttl_remaining_ms", remaining))
          protocol(r, "lock answer lacks token or ttl_remaining_ms");
        h.ttl_remaining = milliseconds(static_cast<std::int64_t>(remaining));
        h.value = string_field(r.body, "value");  // absent from servers before values: empty
        std::uint64_t slot = 0;
        if (uint_field(r.body, "slot", slot))
          h.slot = static_cast<std::uint32_t>(std::min<std::uint64_t>(slot, 65535));
        out.holder = std::move(h);
        read_permits(r, 0, out.permits, nullptr);
        const auto* hs = r.body.is_object() ? r.body.as_object().if_contains("holders") : nullptr;
        if (!r.ec && hs && hs->is_array()) {
          for (const auto& v : hs->as_array()) {
            holder_info one;
            std::uint64_t s = 0;
            if (!v.is_object() || !uint_field(v, "slot", s) || s >= out.permits ||
                !uint_field(v, "token", one.token)) {
              protocol(r, "a holder of the lock answer lacks slot or token, or its slot is out of range");
              break;
            }
            read_holder(v, one);
            one.slot = static_cast<std::uint32_t>(s);
            out.holders.push_back(std::move(one));
          }
        }
      } else if (r.status == 404 && string_field(r.body, "error") == "not_held") {
      } else {
        unexpected(r);
      }
    }
    co_return with_outcome(std::move(out), r);
  }

  // Sent only to a server that advertises `list_locks`, as proclaim is.
  asio::awaitable<list_reply> list(std::string prefix, std::string after, std::size_t limit,
                                   milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    list_reply out;
    if (!co_await feature_ready(list_, no_list, timeout, out)) co_return out;
    std::string target = base_path_ +
                         "/v1/locks?prefix=" + boost::urls::encode(prefix, boost::urls::unreserved_chars) +
                         "&limit=" + std::to_string(limit);
    if (!after.empty()) target += "&after=" + boost::urls::encode(after, boost::urls::unreserved_chars);
    auto r = co_await transport_->request("GET", std::move(target), {}, left(deadline));
    if (!r.ec && r.status == 200) {
      const auto* locks = r.body.is_object() ? r.body.as_object().if_contains("locks") : nullptr;
      const auto* next = r.body.is_object() ? r.body.as_object().if_contains("next") : nullptr;
      if (!locks || !locks->is_array() || !next || !(next->is_null() || next->is_string())) {
        protocol(r, "list answer lacks locks or next");
      } else {
        if (next->is_string()) out.page.next = next->as_string();
        for (const auto& l : locks->as_array()) {
          listed_lock one;
          std::uint64_t remaining = 0;
          one.key = string_field(l, "key");
          one.kind = string_field(l, "kind");
          if (one.key.empty() || !uint_field(l, "token", one.holder.token) ||
              !uint_field(l, "ttl_remaining_ms", remaining)) {
            protocol(r, "list entry lacks key, token or ttl_remaining_ms");
            break;
          }
          one.holder.owner = string_field(l, "owner");
          one.holder.ttl_remaining = milliseconds(static_cast<std::int64_t>(remaining));
          one.holder.value = string_field(l, "value");
          one.client = string_field(l, "client");
          uint_field(l, "waiters", one.waiters);
          std::uint64_t slot = 0, permits = 1;
          if (uint_field(l, "permits", permits))
            one.permits = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(permits, 1, 65535));
          if (uint_field(l, "slot", slot))
            one.holder.slot = static_cast<std::uint32_t>(std::min<std::uint64_t>(slot, 65535));
          std::uint64_t delayed = 0;
          if (uint_field(l, "lock_delay_remaining_ms", delayed))
            one.holder.lock_delay_remaining =
                milliseconds(static_cast<std::int64_t>(std::min<std::uint64_t>(delayed, 1ull << 40)));
          out.page.locks.push_back(std::move(one));
        }
      }
    } else if (!r.ec && !lost_route(r, list_, no_list)) {
      unexpected(r);
    }
    co_return with_outcome(std::move(out), r);
  }

  asio::awaitable<break_reply> break_lease(std::string key, std::optional<std::uint64_t> token,
                                           milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    break_reply out;
    if (!co_await feature_ready(break_, no_break, timeout, out)) co_return out;
    json::object body;
    if (token) body["token"] = *token;
    auto r = co_await transport_->request("POST", lock_path(key) + "/break", json::serialize(body),
                                          left(deadline));
    if (!r.ec &&
        (r.status == 200 || (r.status == 409 && string_field(r.body, "error") == "token_mismatch"))) {
      std::uint64_t remaining = 0;
      if (!uint_field(r.body, "token", out.holder.token) ||
          !uint_field(r.body, "ttl_remaining_ms", remaining)) {
        protocol(r, "break answer lacks token or ttl_remaining_ms");
      } else {
        out.holder.owner = string_field(r.body, "owner");
        out.holder.ttl_remaining = milliseconds(static_cast<std::int64_t>(remaining));
        out.holder.value = string_field(r.body, "value");
        out.client = string_field(r.body, "client");
        if (r.status == 409) {
          r.ec = error::token_mismatch;
          r.diagnostic = string_field(r.body, "message");
        }
      }
    } else if (!r.ec && r.status == 404 && string_field(r.body, "error") == "not_held") {
      r.ec = error::not_held;
      r.diagnostic = string_field(r.body, "message");
    } else if (!r.ec && !lost_route(r, break_, no_break)) {
      unexpected(r);
    }
    co_return with_outcome(std::move(out), r);
  }

  asio::awaitable<std::vector<renew_reply>> renew_batch(std::span<const renew_entry> entries,
                                                        milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    // A server without the feature is asked again now and then: it may have been upgraded behind its URL.
    if (batch_ == support::no && std::chrono::steady_clock::now() - learned_at_ >= ask_again_after)
      batch_ = support::unknown;
    if (batch_ == support::unknown) co_await learn_capabilities(timeout);
    if (batch_ != support::yes) co_return co_await backend::renew_batch(entries, left(deadline));
    std::vector<renew_reply> out(entries.size());
    // Consecutive entries, as many as both server limits allow, per request; each entry's text is written
    // straight into the body, and taken back out when it would not fit.
    constexpr std::string_view head = R"({"leases":[)", tail = "]}";
    for (std::size_t first = 0; first < entries.size();) {
      std::string body;
      body.reserve(
          std::min(body_max_, head.size() + tail.size() + 96 * std::min(entries.size() - first, batch_max_)));
      body += head;
      std::size_t end = first;
      while (end < entries.size() && end - first < batch_max_) {
        const auto before = body.size();
        if (end > first) body += ',';
        detail::append_renew_entry(body, entries[end]);
        // Each entry is counted with a separator byte, the first one too.
        if (body.size() + (end == first ? 1 : 0) + tail.size() > body_max_) {
          body.resize(before);
          break;
        }
        ++end;
      }
      if (end == first) {
        // One entry alone exceeds the body limit (a very long key and owner): a renew of its own fits.
        const auto& e = entries[first];
        out[first] = co_await renew(e.key, e.owner, e.token, e.ttl, left(deadline));
        ++first;
        continue;
      }
      body += tail;
      // The answer comes as text: a 200 is read straight into the replies (read_batch_answer); anything
      // else is rare, and read as any other answer.
      auto r = co_await transport_->request("POST", base_path_ + "/v1/renew", std::move(body), left(deadline),
                                            detail::answer_form::text);
      if (!r.ec && r.status != 200) detail::parse_json_body(r);
      if (!r.ec && (r.status == 404 || r.status == 413)) {
        // 404: the server lost the feature (a downgrade behind the same URL, or a proxy in front that knows
        // only the single routes). 413: its body limit shrank since it was asked. Either way the batch was
        // not read, and single renews mean the same; the limits are asked again at a later batch.
        batch_ = r.status == 404 ? support::no : support::unknown;
        learned_at_ = std::chrono::steady_clock::now();
        auto singles = co_await backend::renew_batch(entries.subspan(first), left(deadline));
        std::move(singles.begin(), singles.end(), out.begin() + static_cast<std::ptrdiff_t>(first));
        co_return out;
      }
      read_batch_answer(r, out, first, end);
      first = end;
    }
    co_return out;
  }

  void close() override { transport_->close(); }
  tls_reload_result reload_tls(std::optional<tls_config> tls) override {
    return detail::reload_client_tls(transport_->tls(), std::move(tls));
  }

 private:
  // Every reply type carries the request's error and the server's message the same way.
  template <class Reply>
  static Reply with_outcome(Reply out, http_result& r) {
    out.ec = r.ec;
    out.diagnostic = std::move(r.diagnostic);
    return out;
  }

  // A 409 `lost` (renew's, and proclaim's): error::lease_lost with its reason; false for any other answer.
  template <class Reply>
  static bool read_lost(http_result& r, Reply& out) {
    if (r.status != 409 || string_field(r.body, "error") != "lost") return false;
    r.ec = error::lease_lost;
    out.lost_reason = string_field(r.body, "reason");
    r.diagnostic = string_field(r.body, "message");
    return true;
  }

  static void protocol(http_result& r, std::string what) {
    r.ec = error::protocol_error;
    r.diagnostic = std::move(what);
  }

  std::string lock_path(std::string_view key) const {
    // The key is one path segment: encode everything but unreserved characters, '/' included. A key that is
    // `.` or `..` is a dot segment, which HTTP libraries and proxies on the way may remove (RFC 3986, 5.2.4):
    // its dots are encoded too (docs/protocol.md), so `..` travels as `%2E%2E`.
    if (key == "." || key == "..") return base_path_ + "/v1/locks/" + (key == "." ? "%2E" : "%2E%2E");
    return base_path_ + "/v1/locks/" + boost::urls::encode(key, boost::urls::unreserved_chars);
  }

  // The owner, token, TTL left, value and lock-delay of a holder (a held answer's top level, one of its
  // `holders`, a GET's answer).
  static void read_holder(const json::value& v, holder_info& h) {
    h.owner = string_field(v, "owner");
    uint_field(v, "token", h.token);
    std::uint64_t remaining = 0;
    uint_field(v, "ttl_remaining_ms", remaining);
    h.ttl_remaining = milliseconds(static_cast<std::int64_t>(std::min<std::uint64_t>(remaining, 1ull << 40)));
    h.value = string_field(v, "value");
    std::uint64_t delayed = 0;
    if (uint_field(v, "lock_delay_remaining_ms", delayed))
      h.lock_delay_remaining =
          milliseconds(static_cast<std::int64_t>(std::min<std::uint64_t>(delayed, 1ull << 40)));
  }

  // An answer's `permits` (1 when absent: a lock, or a server before semaphores) and, with `slot`, its
  // `slot`. `asked` (0: none) is a grant's own count: a grant of another count, or a slot out of its range,
  // breaks the protocol.
  static void read_permits(http_result& r, std::uint32_t asked, std::uint32_t& permits, std::uint32_t* slot) {
    std::uint64_t n = 1, s = 0;
    const bool has_n = uint_field(r.body, "permits", n);
    const bool has_s = uint_field(r.body, "slot", s);
    if (has_n && (n < 1 || n > 65535)) {
      protocol(r, "the answer's permits is out of range");
      return;
    }
    permits = static_cast<std::uint32_t>(n);
    if (!slot) return;
    if (asked > 1 && (!has_n || !has_s || n != asked || s >= n)) {
      protocol(r, "a semaphore's grant lacks its permits or slot, or they do not match the request");
      return;
    }
    if (s >= n) {
      protocol(r, "the grant's slot is out of range");
      return;
    }
    *slot = static_cast<std::uint32_t>(s);
  }

  static milliseconds left(std::chrono::steady_clock::time_point deadline) {
    return std::max(milliseconds(1),
                    std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now()));
  }

  // Asks GET /v1/capabilities. A 404 (no endpoint) or an answer without a feature means the server lacks it
  // until `ask_again_after` has passed (single renews; no proclaim); any other failure says nothing, and is
  // asked again at the next batch or proclaim. Returns the failed answer, if it failed so.
  asio::awaitable<std::optional<http_result>> learn_capabilities(milliseconds timeout) {
    auto r = co_await transport_->request("GET", base_path_ + "/v1/capabilities", {}, timeout);
    if (r.ec) co_return r;
    learned_at_ = std::chrono::steady_clock::now();
    if (r.status == 404) {
      batch_ = proclaim_ = record_ = queue_ = list_ = break_ = delay_ = semaphores_ = support::no;
      co_return std::nullopt;
    }
    if (r.status != 200 || !r.body.is_object()) {
      unexpected(r);
      if (r.status == 200) protocol(r, "capabilities answer is not a JSON object");
      co_return r;
    }
    batch_ = proclaim_ = record_ = queue_ = list_ = break_ = delay_ = semaphores_ = support::no;
    std::uint64_t n = 0;
    const auto* features = r.body.as_object().if_contains("features");
    if (!features || !features->is_array()) co_return std::nullopt;
    const auto& f = features->as_array();
    auto has = [&f](std::string_view name) {
      return std::find(f.begin(), f.end(), json::value(name)) != f.end();
    };
    if (has("proclaim")) proclaim_ = support::yes;
    if (has("acquire_queue")) queue_ = support::yes;
    if (has("list_locks")) list_ = support::yes;
    if (has("break_lease")) break_ = support::yes;
    if (has("lock_delay")) delay_ = support::yes;
    if (has("semaphores")) {
      semaphores_ = support::yes;
      // Without the server's figure, the server's own answer bounds the count (400 naming it).
      permits_max_ = uint_field(r.body, "permits_max", n) && n > 0
                         ? static_cast<std::uint32_t>(std::min<std::uint64_t>(n, 65535))
                         : 0;
    }
    if (has("lock_record")) {
      record_ = support::yes;
      // Without the server's figure, the protocol's least (16 KiB).
      record_max_ = uint_field(r.body, "record_max_bytes", n) && n > 0 ? static_cast<std::size_t>(n) : 16384;
    }
    if (!has("renew_batch")) co_return std::nullopt;
    if (!uint_field(r.body, "renew_batch_max", n) || n == 0) co_return std::nullopt;
    batch_max_ = static_cast<std::size_t>(n);
    // Without the server's body limit, the protocol's default one (8 KiB).
    body_max_ = uint_field(r.body, "max_body_bytes", n) && n > 0 ? static_cast<std::size_t>(n) : 8192;
    batch_ = support::yes;
    co_return std::nullopt;
  }

  // Whether the server has `feature`, asking GET /v1/capabilities when that is not known, or was "no" long
  // enough ago to ask again. When it may not be sent, `out` says why: invalid_config (`missing`, nothing
  // sent), or the error of the capabilities request.
  template <class Reply>
  asio::awaitable<bool> feature_ready(support& feature, const char* missing, milliseconds timeout,
                                      Reply& out) {
    if (feature == support::no && std::chrono::steady_clock::now() - learned_at_ >= ask_again_after)
      feature = support::unknown;
    if (feature == support::unknown) {
      if (auto failed = co_await learn_capabilities(timeout)) {
        out.ec = failed->ec;
        out.diagnostic = "could not read the server's capabilities: " + failed->diagnostic;
        co_return false;
      }
    }
    if (feature == support::yes) co_return true;
    out.ec = error::invalid_config;
    out.diagnostic = missing;
    co_return false;
  }

  // A request whose body is {"owner","token","value"} (a proclaim's, a record write's).
  asio::awaitable<http_result> send_value(std::string_view method, std::string target,
                                          const std::string& owner, std::uint64_t token,
                                          const std::string& value,
                                          std::chrono::steady_clock::time_point deadline) {
    json::object body{{"owner", owner}, {"token", token}, {"value", value}};
    co_return co_await transport_->request(method, std::move(target), json::serialize(body), left(deadline));
  }

  // A 404 to a route the server advertised: it lost the route since it was asked (a downgrade behind the
  // same URL), and nothing changed. Returns false for any other answer.
  bool lost_route(http_result& r, support& feature, const char* missing) {
    if (r.status != 404) return false;
    feature = support::no;
    learned_at_ = std::chrono::steady_clock::now();
    r.ec = error::invalid_config;
    r.diagnostic = missing;
    return true;
  }

  // Fills out[first, end) from a batch answer (its 200 body still text, any other already parsed); a failed
  // request or a malformed answer gives each entry the same error (its outcome unknown, as for a renew whose
  // answer was lost or unreadable).
  static void read_batch_answer(http_result& r, std::vector<renew_reply>& out, std::size_t first,
                                std::size_t end) {
    if (!r.ec) {
      if (r.status == 200) {
        const auto replies = std::span(out).subspan(first, end - first);
        switch (detail::read_renew_batch_answer(r.text, replies)) {
          case detail::batch_answer_status::ok:
            return;
          case detail::batch_answer_status::not_json:
            // Parsed again as any answer, for the same error and message; never taken as an answer.
            detail::parse_json_body(r);
            if (!r.ec) protocol(r, "HTTP 200 with a body that is not JSON");
            break;
          case detail::batch_answer_status::wrong_shape:
            protocol(r, "batch renew answer lacks one result per entry");
            break;
        }
      } else {
        unexpected(r);
      }
    }
    for (std::size_t i = first; i < end; ++i) {
      renew_reply& one = out[i];
      one.ec = r.ec;
      one.diagnostic = r.diagnostic;
      one.lost_reason.clear();
    }
  }

  static constexpr auto ask_again_after = std::chrono::minutes(5);
  static constexpr const char* no_proclaim =
      "this server does not support proclaim (no feature \"proclaim\" in /v1/capabilities)";
  static constexpr const char* no_queue =
      "this server does not queue acquires (no feature \"acquire_queue\" in /v1/capabilities)";
  static constexpr const char* no_list =
      "this server cannot list locks (no feature \"list_locks\" in /v1/capabilities)";
  static constexpr const char* no_delay =
      "lock-delay is not supported by this server (no feature \"lock_delay\" in /v1/capabilities)";
  static constexpr const char* no_break =
      "this server cannot break leases (no feature \"break_lease\" in /v1/capabilities)";
  static constexpr const char* no_semaphores =
      "this server has no semaphores (no feature \"semaphores\" in /v1/capabilities): more than 1 permit "
      "cannot be asked of it";
  static constexpr const char* no_record =
      "this server does not keep lock records (no feature \"lock_record\" in /v1/capabilities)";
  support batch_ = support::unknown;
  support proclaim_ = support::unknown;
  support record_ = support::unknown;
  support queue_ = support::unknown;
  support list_ = support::unknown;
  support break_ = support::unknown;
  support delay_ = support::unknown;
  support semaphores_ = support::unknown;
  std::uint32_t permits_max_ = 0;
  std::size_t record_max_ = 0;
  std::chrono::steady_clock::time_point learned_at_{};
  std::size_t batch_max_ = 0;
  std::size_t body_max_ = 0;

  asio::any_io_executor ex_;
  client_config config_;
  std::string base_path_;
  std::unique_ptr<detail::http_transport> transport_;
};

}  // namespace

asio::awaitable<proclaim_reply> backend::proclaim(std::string, std::string, std::uint64_t, std::string,
                                                  milliseconds) {
  proclaim_reply out;
  out.ec = error::invalid_config;
  out.diagnostic = "this backend does not support proclaim (docs/protocol.md, \"proclaim\")";
  co_return out;
}

asio::awaitable<record_write_reply> backend::write_record(std::string, std::string, std::uint64_t,
                                                          std::string, milliseconds) {
  record_write_reply out;
  out.ec = error::invalid_config;
  out.diagnostic = "this backend does not keep lock records (docs/protocol.md, \"record\")";
  co_return out;
}

asio::awaitable<record_read_reply> backend::read_record(std::string, milliseconds) {
  record_read_reply out;
  out.ec = error::invalid_config;
  out.diagnostic = "this backend does not keep lock records (docs/protocol.md, \"record\")";
  co_return out;
}

asio::awaitable<list_reply> backend::list(std::string, std::string, std::size_t, milliseconds) {
  list_reply out;
  out.ec = error::invalid_config;
  out.diagnostic = "this backend cannot list locks (docs/protocol.md, \"list\")";
  co_return out;
}

asio::awaitable<break_reply> backend::break_lease(std::string, std::optional<std::uint64_t>, milliseconds) {
  break_reply out;
  out.ec = error::invalid_config;
  out.diagnostic = "this backend cannot break leases (docs/protocol.md, \"break\")";
  co_return out;
}

asio::awaitable<acquire_reply> backend::acquire_queued(std::string, std::string, milliseconds, std::string,
                                                       milliseconds, milliseconds) {
  acquire_reply out;
  out.ec = error::invalid_config;
  out.diagnostic = "this backend does not queue acquires (docs/protocol.md, \"queued acquire\")";
  co_return out;
}

asio::awaitable<acquire_reply> backend::acquire_with(acquire_request q) {
  if (q.permits > 1) {
    acquire_reply out;
    out.ec = error::invalid_config;
    out.diagnostic =
        "this backend has no semaphores (docs/protocol.md, \"Semaphores\"): " + std::to_string(q.permits) +
        " permits asked";
    co_return out;
  }
  if (q.lock_delay > milliseconds{0})
    co_return co_await acquire_with_delay(std::move(q.key), std::move(q.owner), q.ttl, std::move(q.value),
                                          q.lock_delay, q.wait, q.timeout);
  if (q.wait)
    co_return co_await acquire_queued(std::move(q.key), std::move(q.owner), q.ttl, std::move(q.value),
                                      *q.wait, q.timeout);
  co_return co_await acquire(std::move(q.key), std::move(q.owner), q.ttl, std::move(q.value), q.timeout);
}

asio::awaitable<acquire_reply> backend::acquire_with_delay(std::string, std::string, milliseconds,
                                                           std::string, milliseconds,
                                                           std::optional<milliseconds>, milliseconds) {
  acquire_reply out;
  out.ec = error::invalid_config;
  out.diagnostic = "lock-delay is not supported by this backend (docs/protocol.md, \"Lock-delay\")";
  co_return out;
}

tls_reload_result backend::reload_tls(std::optional<tls_config>) {
  tls_reload_result out;
  out.ec = error::invalid_config;
  out.diagnostic = "this client's backend has no TLS files to read again";
  return out;
}

std::unique_ptr<loss_watch> backend::watch_loss(const std::string&, const std::string&, std::uint64_t,
                                                std::function<void(std::string_view)>) {
  return nullptr;
}

asio::awaitable<std::vector<renew_reply>> backend::renew_batch(std::span<const renew_entry> entries,
                                                               milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<renew_reply> out(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= milliseconds(0)) {
      out[i].ec = error::request_timeout;
      out[i].diagnostic = "not sent: the batch's time ran out";
      continue;
    }
    const auto& e = entries[i];
    out[i] = co_await renew(e.key, e.owner, e.token, e.ttl, left);
    // Cancelled: the rest is abandoned (not sent).
    if (out[i].ec == asio::error::operation_aborted) {
      for (std::size_t j = i + 1; j < entries.size(); ++j)
        out[j].ec = asio::error::operation_aborted;
      break;
    }
  }
  co_return out;
}

std::shared_ptr<backend> make_etcd_backend(const asio::any_io_executor& ex, const client_config& config);

std::shared_ptr<backend> make_backend(const asio::any_io_executor& ex, const client_config& config) {
  config.validate();
  if (config.server_url.rfind("etcd://", 0) == 0 || config.server_url.rfind("etcds://", 0) == 0)
    return make_etcd_backend(ex, config);
  return std::make_shared<http_backend>(ex, config);
}

}  // namespace baton
