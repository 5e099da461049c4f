// SPDX-License-Identifier: Apache-2.0
#include "answers.hpp"

#include "baton/common/log.hpp"

namespace baton::server {

response make_response(std::pmr::memory_resource* mem, http::status status, unsigned version, bool keep_alive,
                       text&& body, std::string_view content_type) {
  response res{std::piecewise_construct, std::make_tuple(std::move(body)), std::make_tuple(mem)};
  res.result(status);
  res.version(version);
  res.set(http::field::server, "batond");
  res.set(http::field::content_type, content_type);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}
response make_response(std::pmr::memory_resource* mem, http::status status, unsigned version, bool keep_alive,
                       std::string_view body, std::string_view content_type) {
  return make_response(mem, status, version, keep_alive, text(body, mem), content_type);
}
response make_response(std::pmr::memory_resource* mem, http::status status, unsigned version, bool keep_alive,
                       const char* body, std::string_view content_type) {
  return make_response(mem, status, version, keep_alive, std::string_view(body), content_type);
}

void append_wire_bytes(const response& res, bool header_only, text& out) {
  const unsigned version = res.version();
  const unsigned code = res.result_int();
  const std::string_view reason = res.reason();
  std::size_t size = 13 + reason.size() + 4 + (header_only ? 0 : res.body().size());
  for (const auto& f : res)
    size += f.name_string().size() + f.value().size() + 4;
  out.reserve(out.size() + size);
  // As basic_fields::writer writes it: "HTTP/X.Y ### <reason>\r\n", then each "Name: value\r\n".
  char status_line[] = "HTTP/1.1 000 ";
  status_line[5] = static_cast<char>('0' + version / 10);
  status_line[7] = static_cast<char>('0' + version % 10);
  status_line[9] = static_cast<char>('0' + code / 100);
  status_line[10] = static_cast<char>('0' + code / 10 % 10);
  status_line[11] = static_cast<char>('0' + code % 10);
  out.append(status_line, sizeof status_line - 1);
  out += reason;
  out += "\r\n";
  for (const auto& f : res) {
    out += f.name_string();
    out += ": ";
    out += f.value();
    out += "\r\n";
  }
  out += "\r\n";
  if (!header_only) out += res.body();
}

text lease_body(std::pmr::memory_resource* mem, std::string_view key, std::string_view owner,
                std::uint64_t token, std::string_view ttl_name, std::int64_t ttl, std::string_view client,
                std::optional<std::string_view> value) {
  text out(mem);
  out.reserve(80 + key.size() + owner.size() + client.size() + (value ? value->size() : 0));
  out += '{';
  append_member(out, "key", key);
  append_member(out, "owner", owner);
  if (!client.empty()) append_member(out, "client", client);
  append_member(out, "token", token);
  append_member(out, ttl_name, ttl);
  // Answers that describe a holder always carry its value, "" included: a client can tell a server that
  // keeps values from one that predates them (docs/protocol.md).
  if (value) append_member(out, "value", *value);
  out += '}';
  return out;
}

void append_lost(text& out, lost_reason reason) {
  append_member(out, "error", "lost");
  append_member(out, "reason", to_string(reason));
  switch (reason) {
    case lost_reason::not_held:
      append_member(out, "message", "the lock is not held (it is free, or its lease expired)");
      break;
    case lost_reason::owner_mismatch:
      append_member(out, "message", "the lock is held by another owner");
      break;
    case lost_reason::token_mismatch:
      // Another token than the holder's, older or never issued: only the holder's own token renews.
      append_member(out, "message", "the lock is held by this owner with another token");
      break;
    case lost_reason::broken:
      append_member(out, "message", "the lease was broken by an operator (baton break)");
      break;
  }
}

text error_text(std::pmr::memory_resource* mem, std::string_view code, std::string_view message) {
  text out(mem);
  out.reserve(24 + code.size() + message.size());
  out += '{';
  append_member(out, "error", code);
  append_member(out, "message", message);
  out += '}';
  return out;
}

text renew_batch_body(std::pmr::memory_resource* mem, const renew_batch_request& batch,
                      const std::vector<renew_result>& results) {
  text out(mem);
  out.reserve(16 + results.size() * 96);
  out += R"({"results":[)";
  text entry(mem);
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& e = batch.leases[i];
    entry.assign("{");
    append_member(entry, "key", e.key);
    if (std::holds_alternative<renew_ok>(results[i])) {
      append_member(entry, "owner", e.owner);
      append_member(entry, "token", e.token);
      append_member(entry, "ttl_ms", e.ttl.count());
    } else {
      append_lost(entry, std::get<renew_refused>(results[i]).reason);
    }
    entry += '}';
    if (i != 0) out += ',';
    out += entry;
  }
  out += "]}";
  return out;
}

// Only a lone `chunked` transfer coding, and no Content-Length beside it. Anything else is where a front

response error_answer(const answer_context& c, const api_error& e) {
  return make_response(c.mem, static_cast<http::status>(e.status), c.version, c.keep_alive,
                       error_text(c.mem, e.code, e.message));
}

namespace {
// 409 {"error","message","owner","client","token","ttl_remaining_ms","value"}: a refusal that names the
// holder (an acquire's `held`, a break's `token_mismatch`).
text holder_body(const answer_context& c, std::string_view code, std::string_view message,
                 const lease_view& h) {
  text o(c.mem);
  o += '{';
  append_member(o, "error", code);
  append_member(o, "message", message);
  append_member(o, "owner", h.owner);
  if (!h.client.empty()) append_member(o, "client", h.client);
  append_member(o, "token", h.token);
  append_member(o, "ttl_remaining_ms", h.remaining.count());
  append_member(o, "value", h.value);
  o += '}';
  return o;
}
response holder_refusal(const answer_context& c, std::string_view code, std::string_view message,
                        const lease_view& h) {
  return make_response(c.mem, http::status::conflict, c.version, c.keep_alive,
                       holder_body(c, code, message, h));
}

// `"permits":N,"holders":[{"slot","owner","client","token","ttl_remaining_ms","value"},...],"holders_total":n`
// of a key of permits (docs/protocol.md, "semaphores"): the first lock_table::max_holders_shown holders by
// slot, and how many there are. A plain lock's view (permits 0) is a key of 1 permit: its holder, if any, in
// slot 0.
void append_holders(text& o, const lease_view& v) {
  append_member(o, "permits", std::max<std::uint32_t>(v.permits, 1));
  o += R"(,"holders":[)";
  const auto one = [&](std::uint32_t slot, std::string_view owner, std::string_view client,
                       std::uint64_t token, milliseconds remaining, std::string_view value) {
    // append_member() puts a comma after anything but a lone `{`: the first member is written here.
    o += R"({"slot":)";
    o += std::to_string(slot);
    append_member(o, "owner", owner);
    if (!client.empty()) append_member(o, "client", client);
    append_member(o, "token", token);
    append_member(o, "ttl_remaining_ms", remaining.count());
    append_member(o, "value", value);
    o += '}';
  };
  std::size_t total = 0;
  if (v.permits > 1) {
    for (std::size_t i = 0; i < v.holders.size(); ++i) {
      const auto& h = v.holders[i];
      if (i) o += ',';
      one(h.slot, h.owner, h.client, h.token, h.remaining, h.value);
    }
    total = std::max(v.holders_total, v.holders.size());
  } else if (!v.owner.empty()) {
    one(0, v.owner, v.client, v.token, v.remaining, v.value);
    total = 1;
  }
  o += ']';
  append_member(o, "holders_total", total);
}
}  // namespace

response acquire_answer(const answer_context& c, const std::string& key, const acquire_request& r,
                        const acquire_result& result, std::optional<milliseconds> queued) {
  if (auto* g = std::get_if<acquire_granted>(&result)) {
    // The fields are strings: built only when the line is written.
    if (log::enabled(log::level::debug))
      log::debug("acquire", {{"key", key}, {"owner", r.owner}, {"token", g->token}});
    auto body = lease_body(c.mem, key, r.owner, g->token, "ttl_ms", r.ttl.count());
    if (queued || r.lock_delay > milliseconds{0} || r.permits) {
      body.pop_back();  // the closing brace
      if (r.permits) {
        append_member(body, "permits", g->permits);
        append_member(body, "slot", g->slot);
      }
      if (queued) append_member(body, "queued_ms", queued->count());
      if (r.lock_delay > milliseconds{0}) append_member(body, "lock_delay_ms", r.lock_delay.count());
      body += '}';
    }
    return make_response(c.mem, http::status::ok, c.version, c.keep_alive, std::move(body));
  }
  if (const auto* m = std::get_if<acquire_mismatch>(&result)) {
    text o(c.mem);
    o += '{';
    append_member(o, "error", "permits_mismatch");
    append_member(o, "message",
                  "the key is in use with " + std::to_string(m->permits) +
                      " permits; an acquire with another count waits until nothing holds or "
                      "waits for it");
    append_member(o, "permits", m->permits);
    o += '}';
    return make_response(c.mem, http::status::conflict, c.version, c.keep_alive, std::move(o));
  }
  const auto& refused = std::get<acquire_refused>(result);
  const bool delayed = refused.lock_delay_remaining > milliseconds{0};
  const bool permits = r.permits || refused.holder.permits > 1;
  if (!delayed && !permits)
    return holder_refusal(c, "held", "the lock is held by another owner", refused.holder);
  // `held`, so a client that predates lock-delay waits as for a holder: with no holder, ttl_remaining_ms is
  // the delay's remaining time, and no owner holds it.
  auto o = holder_body(c, "held",
                       !refused.holder.holders.empty()
                           ? "every permit of the key is held (or its slot in lock-delay)"
                       : delayed ? "the lock is in lock-delay: its last lease ended by expiry or a break"
                                 : "the lock is held by another owner",
                       refused.holder);
  o.pop_back();
  if (permits) append_holders(o, refused.holder);
  if (delayed) append_member(o, "lock_delay_remaining_ms", refused.lock_delay_remaining.count());
  o += '}';
  return make_response(c.mem, http::status::conflict, c.version, c.keep_alive, std::move(o));
}

// 409 {"error":"lost","reason","message"}: a renew's refusal, and a proclaim's and a record write's.
response lost_answer(const answer_context& c, lost_reason reason) {
  text o(c.mem);
  o += '{';
  append_lost(o, reason);
  o += '}';
  return make_response(c.mem, http::status::conflict, c.version, c.keep_alive, std::move(o));
}

response renew_answer(const answer_context& c, const std::string& key, const renew_request& r,
                      const renew_result& result) {
  if (std::holds_alternative<renew_ok>(result))
    return make_response(c.mem, http::status::ok, c.version, c.keep_alive,
                         lease_body(c.mem, key, r.owner, r.token, "ttl_ms", r.ttl.count()));
  return lost_answer(c, std::get<renew_refused>(result).reason);
}

// 200 {"key","owner","token","value"}: the lease as it now is (its TTL is unchanged, so none is named); a
// refusal is a renew's 409 `lost`, with the same reasons in the same order.
response proclaim_answer(const answer_context& c, const std::string& key, const proclaim_request& r,
                         const proclaim_result& result) {
  if (std::holds_alternative<proclaim_ok>(result)) {
    text o(c.mem);
    o.reserve(64 + key.size() + r.owner.size() + r.value.size());
    o += '{';
    append_member(o, "key", key);
    append_member(o, "owner", r.owner);
    append_member(o, "token", r.token);
    append_member(o, "value", r.value);
    o += '}';
    return make_response(c.mem, http::status::ok, c.version, c.keep_alive, std::move(o));
  }
  return lost_answer(c, std::get<renew_refused>(result).reason);
}

// 200 {"key","token","version"}; a refusal by the lease is a renew's 409 `lost`, with the same reasons in
// the same order.
response record_write_answer(const answer_context& c, const std::string& key,
                             const record_write_result& result) {
  if (const auto* ok = std::get_if<record_written>(&result)) {
    text o(c.mem);
    o += '{';
    append_member(o, "key", key);
    append_member(o, "token", ok->token);
    append_member(o, "version", ok->version);
    o += '}';
    return make_response(c.mem, http::status::ok, c.version, c.keep_alive, std::move(o));
  }
  if (const auto* stale = std::get_if<record_stale>(&result))
    return error_answer(c, {409, "stale_token",
                            "the record was written with token " + std::to_string(stale->record_token) +
                                ", larger than this one; nothing changed"});
  if (const auto* full = std::get_if<record_limit_reached>(&result))
    return error_answer(c, {507, "too_many_records",
                            "the server keeps " + std::to_string(full->limit) +
                                " lock records, its limit (--max-records); nothing changed"});
  return lost_answer(c, std::get<renew_refused>(result).reason);
}

// 200 {"key","value","token","version","owner"}, or 404 no_record.
response record_read_answer(const answer_context& c, const std::string& key,
                            const std::optional<lock_record>& record) {
  if (!record) return error_answer(c, {404, "no_record", "no record was ever written for this key"});
  text o(c.mem);
  o.reserve(64 + key.size() + record->owner.size() + record->value.size() + record->value.size() / 8);
  o += '{';
  append_member(o, "key", key);
  append_member(o, "value", record->value);
  append_member(o, "token", record->token);
  append_member(o, "version", record->version);
  append_member(o, "owner", record->owner);
  if (!record->client.empty()) append_member(o, "client", record->client);
  o += '}';
  return make_response(c.mem, http::status::ok, c.version, c.keep_alive, std::move(o));
}

response release_answer(const answer_context& c, const release_result& result) {
  if (result.outcome == release_outcome::not_owner)
    return error_answer(c, {409, "not_owner", "the lock is held by another owner or token; nothing changed"});
  return make_response(c.mem, http::status::ok, c.version, c.keep_alive,
                       result.outcome == release_outcome::released
                           ? R"({"released":true,"outcome":"released"})"
                           : R"({"released":true,"outcome":"already_free"})");
}

response get_answer(const answer_context& c, const std::string& key, const std::optional<lease_view>& view) {
  if (!view) return error_answer(c, {404, "not_held", "the lock is not held"});
  auto body = lease_body(c.mem, key, view->owner, view->token, "ttl_remaining_ms", view->remaining.count(),
                         view->client, view->value);
  if (view->permits > 1) {
    body.pop_back();
    append_holders(body, *view);
    body += '}';
  }
  return make_response(c.mem, http::status::ok, c.version, c.keep_alive, std::move(body));
}

response list_answer(const answer_context& c, const list_page& page) {
  text o(c.mem);
  o.reserve(32 + page.leases.size() * 160);
  o += R"({"locks":[)";
  for (std::size_t i = 0; i < page.leases.size(); ++i) {
    const auto& l = page.leases[i];
    text entry(c.mem);
    entry += '{';
    append_member(entry, "key", l.key);
    // Room for other kinds of holder (semaphores) in the same listing: a client skips kinds it does not know.
    // A key in lock-delay: kind lock_delay, no owner, the token of the lease it follows, and the delay's
    // remaining time in ttl_remaining_ms too, so a client that reads every entry as a lock still parses it.
    // A permit of a key of more than one: kind permit, with its slot and the key's count.
    const bool delayed = l.lock_delay_remaining > milliseconds{0};
    const bool permit = l.lease.permits > 1;
    append_member(entry, "kind", delayed ? "lock_delay" : permit ? "permit" : "lock");
    if (permit) {
      append_member(entry, "slot", l.lease.slot);
      append_member(entry, "permits", l.lease.permits);
    }
    append_member(entry, "owner", l.lease.owner);
    if (!l.lease.client.empty()) append_member(entry, "client", l.lease.client);
    append_member(entry, "token", l.lease.token);
    append_member(entry, "ttl_remaining_ms", l.lease.remaining.count());
    append_member(entry, "value", l.lease.value);
    if (l.lease.lock_delay > milliseconds{0})
      append_member(entry, "lock_delay_ms", l.lease.lock_delay.count());
    if (delayed) append_member(entry, "lock_delay_remaining_ms", l.lock_delay_remaining.count());
    append_member(entry, "waiters", l.waiters);
    entry += '}';
    if (i) o += ',';
    o += entry;
  }
  o += R"(],"next":)";
  if (page.more)
    append_json_string(o, page.leases.back().key);
  else
    o += "null";
  o += '}';
  return make_response(c.mem, http::status::ok, c.version, c.keep_alive, std::move(o));
}

response break_answer(const answer_context& c, const std::string& key, const break_result& result) {
  if (std::holds_alternative<break_not_held>(result))
    return error_answer(c, {404, "not_held", "the lock is not held (it is free, or its lease expired)"});
  if (const auto* n = std::get_if<break_needs_token>(&result))
    return error_answer(c, {400, "bad_request",
                            "the key has " + std::to_string(n->permits) +
                                " permits: name the permit's token ({\"token\":T}) to break one"});
  if (const auto* b = std::get_if<lease_broken>(&result)) {
    text o(c.mem);
    o += '{';
    append_member(o, "key", key);
    o += R"(,"broken":true)";
    append_member(o, "owner", b->lease.owner);
    if (!b->lease.client.empty()) append_member(o, "client", b->lease.client);
    append_member(o, "token", b->lease.token);
    append_member(o, "ttl_remaining_ms", b->lease.remaining.count());
    if (b->lease.permits > 1) {
      append_member(o, "permits", b->lease.permits);
      append_member(o, "slot", b->lease.slot);
    }
    o += '}';
    return make_response(c.mem, http::status::ok, c.version, c.keep_alive, std::move(o));
  }
  return holder_refusal(c, "token_mismatch",
                        "the lock is held with another token than the one named; nothing changed",
                        std::get<break_token_mismatch>(result).holder);
}

}  // namespace baton::server
