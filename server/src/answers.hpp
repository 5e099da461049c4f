// SPDX-License-Identifier: Apache-2.0
#pragma once
// batond's answers: the HTTP response around them and the JSON bodies of every route, written as text. With
// protocol.* (what a request may say) this is the whole wire format of docs/protocol.md in two files.

#include "http_message.hpp"
#include "lock_table.hpp"
#include "protocol.hpp"

#include <charconv>
#include <concepts>
#include <cstdint>
#include <memory_resource>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace baton::server {

/// What every answer to one request is built with; its memory comes from `mem`, the request's arena.
struct answer_context {
  unsigned version;
  bool keep_alive;
  std::pmr::memory_resource* mem;
};

// `mem`: the request's arena, or std::pmr::new_delete_resource() for an answer outside a request's life (a
// refused connection).
response make_response(std::pmr::memory_resource* mem, http::status status, unsigned version, bool keep_alive,
                       text&& body, std::string_view content_type = "application/json");
response make_response(std::pmr::memory_resource* mem, http::status status, unsigned version, bool keep_alive,
                       std::string_view body, std::string_view content_type = "application/json");
response make_response(std::pmr::memory_resource* mem, http::status status, unsigned version, bool keep_alive,
                       const char* body, std::string_view content_type = "application/json");

/// Appends `res` to `out` as the bytes Beast's serializer writes for it: the status line, the fields in
/// their order, the blank line and, unless `header_only` (the answer to a HEAD), the body. Written through
/// the serializer, an answer cost about 16,000 instructions of buffer-sequence iteration; copied into one
/// buffer, about 500 (docs/benchmarks.md, "Server CPU per durable request"). `res` must not be chunked (no
/// answer of batond is).
void append_wire_bytes(const response& res, bool header_only, text& out);

// The answers are written as text rather than through a JSON DOM: members in the order a json::object
// built in that order serializes them, strings escaped as its serializer escapes them (append_json_string),
// so the bytes are the same without a value, a table and a copy per answer. `out` holds one object's text
// from its `{`: a member right after the brace takes no comma.
inline void append_member(text& out, std::string_view name, std::string_view value) {
  out += out.size() > 1 ? ",\"" : "\"";
  out += name;
  out += "\":";
  append_json_string(out, value);
}
template <std::integral Int>
void append_member(text& out, std::string_view name, Int value) {
  out += out.size() > 1 ? ",\"" : "\"";
  out += name;
  out += "\":";
  char digits[24];  // 20 digits and a sign at most
  out.append(digits, std::to_chars(digits, digits + sizeof digits, value).ptr);
}

/// A lease as a 200 body describes it: key, owner, client (when authenticated), token, the TTL under
/// `ttl_name`, and the value when given.
text lease_body(std::pmr::memory_resource* mem, std::string_view key, std::string_view owner,
                std::uint64_t token, std::string_view ttl_name, std::int64_t ttl,
                std::string_view client = {}, std::optional<std::string_view> value = std::nullopt);
/// The members of a renew's 409 `lost`, and of a refused entry of a batch (which has the key before them).
void append_lost(text& out, lost_reason reason);
/// {"error":code,"message":message}.
text error_text(std::pmr::memory_resource* mem, std::string_view code, std::string_view message);
/// {"results":[...]} in the batch's order: each a single renew's 200 body, or its 409 body with the key.
text renew_batch_body(std::pmr::memory_resource* mem, const renew_batch_request& batch,
                      const std::vector<renew_result>& results);

/// The answers of the lock routes, from the service's results.
response error_answer(const answer_context& c, const api_error& e);
/// `queued`: a queued acquire (feature acquire_queue), whose grant also says how long it waited.
response acquire_answer(const answer_context& c, const std::string& key, const acquire_request& r,
                        const acquire_result& result, std::optional<milliseconds> queued = std::nullopt);
response renew_answer(const answer_context& c, const std::string& key, const renew_request& r,
                      const renew_result& result);
response proclaim_answer(const answer_context& c, const std::string& key, const proclaim_request& r,
                         const proclaim_result& result);
response release_answer(const answer_context& c, const release_result& result);
response record_write_answer(const answer_context& c, const std::string& key,
                             const record_write_result& result);
response record_read_answer(const answer_context& c, const std::string& key,
                            const std::optional<lock_record>& record);
response get_answer(const answer_context& c, const std::string& key, const std::optional<lease_view>& view);
/// 200 {"locks":[{"key","kind":"lock","owner","client","token","ttl_remaining_ms","value","waiters"},...],
/// "next"}: `next` is the cursor of the following page (the last key shown), or null after the last page.
response list_answer(const answer_context& c, const list_page& page);
/// 200 {"key","broken":true,"owner","client","token","ttl_remaining_ms"}; 404 not_held; 409
/// token_mismatch naming the holder (as a 409 held does).
response break_answer(const answer_context& c, const std::string& key, const break_result& result);

}  // namespace baton::server
