// SPDX-License-Identifier: Apache-2.0
#include "http_response.hpp"

#include <charconv>

namespace baton::bench {
namespace {

// ASCII case folding: header names are ASCII, and std::tolower's locale lookup showed up in profiles.
char fold(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (fold(a[i]) != fold(b[i])) return false;
  return true;
}

bool icontains(std::string_view haystack, std::string_view needle) {
  if (needle.size() > haystack.size()) return false;
  for (std::size_t i = 0; i + needle.size() <= haystack.size(); ++i)
    if (iequals(haystack.substr(i, needle.size()), needle)) return true;
  return false;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// Decodes a chunked body starting at `pos`; returns the offset just past the final CRLF, 0 if more bytes
// are needed, npos if malformed.
std::size_t read_chunks(std::string_view in, std::size_t pos, std::string& body) {
  body.clear();
  for (;;) {
    auto eol = in.find("\r\n", pos);
    if (eol == std::string_view::npos) return 0;
    auto size_text = in.substr(pos, eol - pos);
    size_text = size_text.substr(0, size_text.find(';'));  // chunk extensions are ignored
    std::size_t size = 0;
    auto [end, ec] = std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
    if (ec != std::errc{} || end != size_text.data() + size_text.size()) return std::string_view::npos;
    pos = eol + 2;
    if (size == 0) {
      // Optional trailer lines, then an empty line.
      for (;;) {
        eol = in.find("\r\n", pos);
        if (eol == std::string_view::npos) return 0;
        bool empty = eol == pos;
        pos = eol + 2;
        if (empty) return pos;
      }
    }
    if (in.size() < pos + size + 2) return 0;
    if (in.substr(pos + size, 2) != "\r\n") return std::string_view::npos;
    body.append(in.substr(pos, size));
    pos += size + 2;
  }
}

}  // namespace

parse_status parse_http_response(std::string_view in, std::string& chunked_body, http_response& out,
                                 std::size_t max_header_bytes) {
  auto header_end = in.find("\r\n\r\n");
  if (header_end == std::string_view::npos)
    return in.size() > max_header_bytes ? parse_status::malformed : parse_status::need_more;

  // "HTTP/1.1 200 OK"
  auto line_end = in.find("\r\n");
  auto status_line = in.substr(0, line_end);
  if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1.") return parse_status::malformed;
  int status = 0;
  auto [sp, sec] = std::from_chars(status_line.data() + 9, status_line.data() + 12, status);
  if (sec != std::errc{} || sp != status_line.data() + 12) return parse_status::malformed;

  std::size_t content_length = 0;
  bool has_length = false, chunked = false;
  out.close = status_line[7] == '0';  // HTTP/1.0 closes unless told otherwise; neither server sends it
  for (std::size_t pos = line_end + 2; pos < header_end + 2;) {
    auto eol = in.find("\r\n", pos);
    auto line = in.substr(pos, eol - pos);
    pos = eol + 2;
    auto colon = line.find(':');
    if (colon == std::string_view::npos) return parse_status::malformed;
    auto name = line.substr(0, colon);
    auto value = trim(line.substr(colon + 1));
    if (iequals(name, "content-length")) {
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), content_length);
      if (ec != std::errc{} || end != value.data() + value.size()) return parse_status::malformed;
      has_length = true;
    } else if (iequals(name, "transfer-encoding")) {
      chunked = icontains(value, "chunked");
    } else if (iequals(name, "connection")) {
      out.close = icontains(value, "close");
    }
  }

  const std::size_t body_start = header_end + 4;
  out.status = status;
  if (chunked) {
    auto end = read_chunks(in, body_start, chunked_body);
    if (end == std::string_view::npos) return parse_status::malformed;
    if (end == 0) return parse_status::need_more;
    out.body = chunked_body;
    out.consumed = end;
    return parse_status::complete;
  }
  // Neither server answers a POST without a length (and 1xx/204/304 never appear in this benchmark).
  if (!has_length) return parse_status::malformed;
  if (in.size() < body_start + content_length) return parse_status::need_more;
  out.body = in.substr(body_start, content_length);
  out.consumed = body_start + content_length;
  return parse_status::complete;
}

}  // namespace baton::bench
