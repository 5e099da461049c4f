// SPDX-License-Identifier: Apache-2.0
#pragma once
// fenced-store's HTTP API as a pure function from a parsed request to a response (no sockets), so every route
// and every refusal can be read in one place:
//
//   PUT /items/{key}   Fencing-Token: N, optional Fencing-Resource: R (default "default"), body = value;
//                      a semaphore's permit adds Fencing-Slot: S and Fencing-Permits: P (docs/fencing.md)
//                      200 {"key","token","version"} | 409 {"error":"stale_token","message","highest_token"}
//   GET /items/{key}   200 {"key","value","token"} | 404 not_found
//   GET /fences        200 {"fences":{"<resource>":<highest token>,...}}
//   GET /history       200 JSON lines {"ts_us","key","resource","token","accepted","highest_token"[,"slot",
//                      "permits"]}
//   GET /healthz       200 {"status":"ok"}
//
// Every error body is {"error":"<code>","message":"<readable reason>"}.

#include "item_store.hpp"

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace fenced_store {

using request = boost::beast::http::request<boost::beast::http::string_body>;
using response = boost::beast::http::response<boost::beast::http::string_body>;

/// Largest accepted request body (an item's value).
inline constexpr std::size_t max_body_bytes = 1024 * 1024;
/// Largest accepted request header block.
inline constexpr std::size_t max_header_bytes = 16 * 1024;
/// Largest key or resource name, in bytes after percent-decoding.
inline constexpr std::size_t max_name_bytes = 512;
/// The resource a write is fenced against when it names none: the whole store.
inline constexpr std::string_view default_resource = "default";

/// Answers one request. Never throws for bad input (that becomes a 4xx); may throw std::bad_alloc.
response handle(item_store& store, const request& req);

/// A JSON error response: {"error": code, "message": message}.
response error_response(unsigned status, std::string_view code, std::string_view message, unsigned version,
                        bool keep_alive);

}  // namespace fenced_store
