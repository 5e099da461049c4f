// SPDX-License-Identifier: Apache-2.0
#include "target.hpp"

#include "resp_reply.hpp"

#include <array>
#include <charconv>
#include <optional>

namespace baton::bench {

std::string_view to_string(op_kind op) {
  switch (op) {
    case op_kind::setup:
      return "setup";
    case op_kind::acquire:
      return "acquire";
    case op_kind::renew:
      return "renew";
    case op_kind::release:
      return "release";
    case op_kind::cycle:
      return "cycle";
  }
  return "unknown";
}

namespace {

void append_uint(std::string& out, std::uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

// Reads the decimal digits right after the first `marker` in `body`. Both servers put the field we need
// first (batond's "token", the txn header's "revision", the lease's "ID"), and the keys we send are
// base64 or plain ASCII, so a substring search is exact here and far cheaper than a JSON parser.
std::optional<std::uint64_t> uint_after(std::string_view body, std::string_view marker) {
  auto at = body.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  const char* first = body.data() + at + marker.size();
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(first, body.data() + body.size(), v);
  if (ec != std::errc{} || end == first) return std::nullopt;
  return v;
}

// "http_404" etc. with static storage, so a failure label is a string_view the report can keep.
std::string_view http_label(int status) {
  static const auto labels = [] {
    std::array<std::string, 600> a;
    for (int i = 0; i < 600; ++i)
      a[static_cast<std::size_t>(i)] = "http_" + std::to_string(i);
    return a;
  }();
  if (status < 0 || status >= 600) return "http_other";
  return labels[static_cast<std::size_t>(status)];
}

// Request line, the headers both servers need, and the body. The constant parts are literals; nothing
// here allocates once `out` has grown to its steady size.
void format_post(std::string& out, std::string_view host, std::string_view path, std::string_view body) {
  out.clear();
  out += "POST ";
  out += path;
  out += " HTTP/1.1\r\nHost: ";
  out += host;
  out += "\r\nContent-Type: application/json\r\nContent-Length: ";
  append_uint(out, body.size());
  out += "\r\n\r\n";
  out += body;
}

// Formats into thread-local scratch buffers: targets are shared by every connection, possibly on several
// load generator threads.
struct scratch {
  std::string path;
  std::string body;
  std::string key;
};
scratch& local_scratch() {
  thread_local scratch s;
  return s;
}

class batond_target final : public target {
 public:
  explicit batond_target(target_options o) : o_(std::move(o)) {}

  bool next_request(op_kind op, connection_state& s, std::string& out) override {
    auto& sc = local_scratch();
    switch (op) {
      case op_kind::setup:
        return false;
      case op_kind::acquire:
        key_path(sc.path, s, s.next_key++);
        sc.path += "/acquire";
        acquire_body(sc.body, s);
        break;
      case op_kind::renew: {
        if (s.held.empty()) return false;
        const auto& h = s.held[s.renew_cursor++ % s.held.size()];
        key_path(sc.path, s, h.key_number);
        sc.path += "/renew";
        owner_token_body(sc.body, s, h.token, true);
        break;
      }
      case op_kind::release: {
        if (s.release_cursor >= s.held.size()) return false;
        const auto& h = s.held[s.release_cursor++];
        key_path(sc.path, s, h.key_number);
        sc.path += "/release";
        owner_token_body(sc.body, s, h.token, false);
        break;
      }
      case op_kind::cycle:
        cycle_path(sc.path, s);
        if (s.cycle_step == 0) {
          sc.path += "/acquire";
          acquire_body(sc.body, s);
        } else {
          sc.path += "/release";
          owner_token_body(sc.body, s, s.cycle_token, false);
        }
        break;
    }
    format_post(out, o_.host_header, sc.path, sc.body);
    return true;
  }

  step_result on_response(op_kind op, connection_state& s, int status, std::string_view body) override {
    if (status != 200) {
      if (op == op_kind::cycle) s.cycle_step = 0;
      return {step_result::kind::failed, http_label(status)};
    }
    switch (op) {
      case op_kind::setup:
        break;
      case op_kind::acquire: {
        auto token = uint_after(body, "\"token\":");
        if (!token) return {step_result::kind::failed, "bad_body"};
        s.held.push_back({s.next_key - 1, *token});
        break;
      }
      case op_kind::renew:
        break;
      case op_kind::release:
        if (body.find("\"released\":true") == std::string_view::npos)
          return {step_result::kind::failed, "bad_body"};
        break;
      case op_kind::cycle:
        if (s.cycle_step == 0) {
          auto token = uint_after(body, "\"token\":");
          if (!token) return {step_result::kind::failed, "bad_body"};
          s.cycle_token = *token;
          s.cycle_step = 1;
          return {step_result::kind::more};
        }
        s.cycle_step = 0;
        if (body.find("\"released\":true") == std::string_view::npos)
          return {step_result::kind::failed, "bad_body"};
        break;
    }
    return {step_result::kind::done};
  }

 private:
  // "/v1/locks/<prefix>%2F<id>%2F<n>": one path segment, so the slashes of the key are percent-encoded.
  void key_path(std::string& path, const connection_state& s, std::uint64_t n) const {
    path = "/v1/locks/";
    path += o_.key_prefix;
    path += "%2F";
    append_uint(path, s.id);
    path += "%2F";
    append_uint(path, n);
  }
  void cycle_path(std::string& path, const connection_state& s) const {
    path = "/v1/locks/";
    path += o_.key_prefix;
    path += "%2Fcycle%2F";
    append_uint(path, s.id);
  }
  void acquire_body(std::string& body, const connection_state& s) const {
    body = "{\"owner\":\"";
    body += s.owner;
    body += "\",\"ttl_ms\":";
    append_uint(body, o_.ttl_ms);
    body += '}';
  }
  // Renew asks for the same TTL the lock was acquired with: a longer one would make batond log an
  // extend record and wait for its fsync, and renew is meant to be measured as the memory-only path.
  void owner_token_body(std::string& body, const connection_state& s, std::uint64_t token,
                        bool with_ttl) const {
    body = "{\"owner\":\"";
    body += s.owner;
    body += "\",\"token\":";
    append_uint(body, token);
    if (with_ttl) {
      body += ",\"ttl_ms\":";
      append_uint(body, o_.ttl_ms);
    }
    body += '}';
  }

  target_options o_;
};

void append_base64(std::string& out, std::string_view in) {
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    std::uint32_t v = (std::uint32_t{static_cast<unsigned char>(in[i])} << 16) |
                      (std::uint32_t{static_cast<unsigned char>(in[i + 1])} << 8) |
                      std::uint32_t{static_cast<unsigned char>(in[i + 2])};
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  if (std::size_t rest = in.size() - i; rest > 0) {
    std::uint32_t v = std::uint32_t{static_cast<unsigned char>(in[i])} << 16;
    if (rest == 2) v |= std::uint32_t{static_cast<unsigned char>(in[i + 1])} << 8;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += rest == 2 ? alphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
}

// etcd has no lock primitive on its KV API; this is the recipe etcd's own concurrency package builds on:
// a key attached to a lease, created only if absent (create_revision == 0); the key's create_revision is
// the fencing token; renewing is a lease keep-alive; releasing deletes the key only if it is still ours.
class etcd_target final : public target {
 public:
  explicit etcd_target(target_options o) : o_(std::move(o)) {}

  bool next_request(op_kind op, connection_state& s, std::string& out) override {
    auto& sc = local_scratch();
    const char* path = "/v3/kv/txn";
    switch (op) {
      case op_kind::setup:
        path = "/v3/lease/grant";
        sc.body = "{\"TTL\":\"";
        append_uint(sc.body, (o_.ttl_ms + 999) / 1000);
        sc.body += "\"}";
        break;
      case op_kind::acquire:
        key_b64(sc.key, s, s.next_key++);
        put_if_absent_body(sc.body, s, sc.key);
        break;
      case op_kind::renew:
        if (s.held.empty()) return false;
        path = "/v3/lease/keepalive";
        sc.body = "{\"ID\":\"";
        sc.body += s.lease_id;
        sc.body += "\"}";
        break;
      case op_kind::release: {
        if (s.release_cursor >= s.held.size()) return false;
        const auto& h = s.held[s.release_cursor++];
        key_b64(sc.key, s, h.key_number);
        delete_if_ours_body(sc.body, sc.key, h.token);
        break;
      }
      case op_kind::cycle:
        cycle_key_b64(sc.key, s);
        if (s.cycle_step == 0)
          put_if_absent_body(sc.body, s, sc.key);
        else
          delete_if_ours_body(sc.body, sc.key, s.cycle_token);
        break;
    }
    format_post(out, o_.host_header, path, sc.body);
    return true;
  }

  step_result on_response(op_kind op, connection_state& s, int status, std::string_view body) override {
    if (status != 200) {
      if (op == op_kind::cycle) s.cycle_step = 0;
      return {step_result::kind::failed, http_label(status)};
    }
    // The gateway leaves out false booleans, so a refused transaction is one without "succeeded":true.
    const bool succeeded = body.find("\"succeeded\":true") != std::string_view::npos;
    switch (op) {
      case op_kind::setup: {
        auto id = uint_after(body, "\"ID\":\"");
        if (!id) return {step_result::kind::failed, "bad_body"};
        s.lease_id = std::to_string(*id);
        break;
      }
      case op_kind::acquire: {
        if (!succeeded) return {step_result::kind::failed, "refused"};
        // The put is the transaction's only write, so its revision is the key's create_revision.
        auto rev = uint_after(body, "\"revision\":\"");
        if (!rev) return {step_result::kind::failed, "bad_body"};
        s.held.push_back({s.next_key - 1, *rev});
        break;
      }
      case op_kind::renew:
        // An unknown or expired lease comes back as 200 without a TTL.
        if (body.find("\"TTL\":\"") == std::string_view::npos) return {step_result::kind::failed, "refused"};
        break;
      case op_kind::release:
        if (!succeeded) return {step_result::kind::failed, "refused"};
        break;
      case op_kind::cycle:
        if (s.cycle_step == 0) {
          auto rev = uint_after(body, "\"revision\":\"");
          if (!succeeded || !rev) return {step_result::kind::failed, succeeded ? "bad_body" : "refused"};
          s.cycle_token = *rev;
          s.cycle_step = 1;
          return {step_result::kind::more};
        }
        s.cycle_step = 0;
        if (!succeeded) return {step_result::kind::failed, "refused"};
        break;
    }
    return {step_result::kind::done};
  }

 private:
  void key_b64(std::string& out, const connection_state& s, std::uint64_t n) const {
    auto& raw = local_scratch().path;  // path is unused by this target: reuse it for the raw key
    raw = o_.key_prefix;
    raw += '/';
    append_uint(raw, s.id);
    raw += '/';
    append_uint(raw, n);
    out.clear();
    append_base64(out, raw);
  }
  void cycle_key_b64(std::string& out, const connection_state& s) const {
    auto& raw = local_scratch().path;
    raw = o_.key_prefix;
    raw += "/cycle/";
    append_uint(raw, s.id);
    out.clear();
    append_base64(out, raw);
  }
  void put_if_absent_body(std::string& body, const connection_state& s, std::string_view key) const {
    body = R"({"compare":[{"key":")";
    body += key;
    body +=
        R"(","target":"CREATE","result":"EQUAL","create_revision":"0"}],"success":[{"request_put":{"key":")";
    body += key;
    body += R"(","value":")";
    append_base64(body, s.owner);
    body += R"(","lease":")";
    body += s.lease_id;
    body += R"("}}],"failure":[{"request_range":{"key":")";
    body += key;
    body += R"("}}]})";
  }
  void delete_if_ours_body(std::string& body, std::string_view key, std::uint64_t token) const {
    body = R"({"compare":[{"key":")";
    body += key;
    body += R"(","target":"CREATE","result":"EQUAL","create_revision":")";
    append_uint(body, token);
    body += R"("}],"success":[{"request_delete_range":{"key":")";
    body += key;
    body += R"("}}]})";
  }

  target_options o_;
};

// RESP request encoding: an array of bulk strings, the form every Redis command accepts.
void resp_array_header(std::string& out, std::size_t n) {
  out += '*';
  append_uint(out, n);
  out += "\r\n";
}
void resp_bulk(std::string& out, std::string_view v) {
  out += '$';
  append_uint(out, v.size());
  out += "\r\n";
  out += v;
  out += "\r\n";
}

// The lock recipe most Redis users write by hand: SET NX PX to take the key with a TTL; release and renew as
// scripts, so the "is it still mine" check and the write are one atomic step on the server. Scripts are sent
// with EVAL each time (Redis caches the compiled script by its hash, so only the bytes are repeated).
constexpr std::string_view redis_release_script =
    "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end";
constexpr std::string_view redis_renew_script =
    "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('pexpire',KEYS[1],ARGV[2]) else return 0 "
    "end";

class redis_target final : public target {
 public:
  explicit redis_target(target_options o) : o_(std::move(o)), ttl_text_(std::to_string(o_.ttl_ms)) {}

  bool next_request(op_kind op, connection_state& s, std::string& out) override {
    auto& key = local_scratch().key;
    out.clear();
    switch (op) {
      case op_kind::setup:
        return false;
      case op_kind::acquire:
        plain_key(key, s, s.next_key++);
        set_nx(out, key, s);
        return true;
      case op_kind::renew: {
        if (s.held.empty()) return false;
        plain_key(key, s, s.held[s.renew_cursor++ % s.held.size()].key_number);
        resp_array_header(out, 6);
        resp_bulk(out, "EVAL");
        resp_bulk(out, redis_renew_script);
        resp_bulk(out, "1");
        resp_bulk(out, key);
        resp_bulk(out, s.owner);
        resp_bulk(out, ttl_text_);
        return true;
      }
      case op_kind::release:
        if (s.release_cursor >= s.held.size()) return false;
        plain_key(key, s, s.held[s.release_cursor++].key_number);
        compare_and_delete(out, key, s);
        return true;
      case op_kind::cycle:
        key = o_.key_prefix;
        key += "/cycle/";
        append_uint(key, s.id);
        if (s.cycle_step == 0)
          set_nx(out, key, s);
        else
          compare_and_delete(out, key, s);
        return true;
    }
    return false;
  }

  step_result on_response(op_kind op, connection_state& s, int type, std::string_view payload) override {
    if (type == '-') {
      if (op == op_kind::cycle) s.cycle_step = 0;
      return {step_result::kind::failed, "redis_error"};
    }
    const bool ok = op == op_kind::acquire || (op == op_kind::cycle && s.cycle_step == 0)
                        ? type == '+' && payload == "OK"
                        : type == ':' && payload == "1";
    switch (op) {
      case op_kind::setup:
        break;
      case op_kind::acquire:
        if (!ok) return {step_result::kind::failed, "refused"};
        s.held.push_back({s.next_key - 1, 0});
        break;
      case op_kind::renew:
      case op_kind::release:
        if (!ok) return {step_result::kind::failed, "refused"};
        break;
      case op_kind::cycle:
        if (!ok) {
          s.cycle_step = 0;
          return {step_result::kind::failed, "refused"};
        }
        if (s.cycle_step == 0) {
          s.cycle_step = 1;
          return {step_result::kind::more};
        }
        s.cycle_step = 0;
        break;
    }
    return {step_result::kind::done};
  }

  parse_status parse_response(std::string_view in, std::string&, http_response& out) override {
    resp_reply r;
    auto status = parse_resp_reply(in, r);
    if (status != parse_status::complete) return status;
    out = {};
    out.status = r.type;
    out.body = r.payload;
    out.consumed = r.consumed;
    return status;
  }

 private:
  void plain_key(std::string& out, const connection_state& s, std::uint64_t n) const {
    out = o_.key_prefix;
    out += '/';
    append_uint(out, s.id);
    out += '/';
    append_uint(out, n);
  }
  void set_nx(std::string& out, std::string_view key, const connection_state& s) const {
    resp_array_header(out, 6);
    resp_bulk(out, "SET");
    resp_bulk(out, key);
    resp_bulk(out, s.owner);
    resp_bulk(out, "NX");
    resp_bulk(out, "PX");
    resp_bulk(out, ttl_text_);
  }
  void compare_and_delete(std::string& out, std::string_view key, const connection_state& s) const {
    resp_array_header(out, 5);
    resp_bulk(out, "EVAL");
    resp_bulk(out, redis_release_script);
    resp_bulk(out, "1");
    resp_bulk(out, key);
    resp_bulk(out, s.owner);
  }

  target_options o_;
  std::string ttl_text_;
};

}  // namespace

std::unique_ptr<target> make_redis_target(target_options options) {
  return std::make_unique<redis_target>(std::move(options));
}
std::unique_ptr<target> make_batond_target(target_options options) {
  return std::make_unique<batond_target>(std::move(options));
}
std::unique_ptr<target> make_etcd_target(target_options options) {
  return std::make_unique<etcd_target>(std::move(options));
}

}  // namespace baton::bench
