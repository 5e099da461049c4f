// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE framing
#include <boost/test/unit_test.hpp>

#include "framing.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/read.hpp>

#include <memory_resource>
#include <string>
#include <vector>

using namespace baton::server;
namespace beast = boost::beast;
namespace asio = boost::asio;

namespace {

// A synchronous stream that hands out its chunks one read at a time, as a socket hands out what each of the
// client's writes brought; then end of stream.
struct chunk_stream {
  std::vector<std::string> chunks;
  std::size_t next = 0;

  template <class MutableBuffers>
  std::size_t read_some(const MutableBuffers& b, beast::error_code& ec) {
    ec = {};
    if (next == chunks.size()) {
      ec = asio::error::eof;
      return 0;
    }
    auto& c = chunks[next];
    const std::size_t n = asio::buffer_copy(b, asio::buffer(c));
    c.erase(0, n);
    if (c.empty()) ++next;
    return n;
  }
  template <class MutableBuffers>
  std::size_t read_some(const MutableBuffers& b) {
    beast::error_code ec;
    auto n = read_some(b, ec);
    if (ec) throw beast::system_error(ec);
    return n;
  }
};

struct outcome {
  beast::error_code ec;
  bool done = false;
  std::string parsed_body;
  std::string left;  // bytes still in the buffer: the start of the next request
};

constexpr std::size_t body_limit = 64;

// Reads a request's header from `chunks` with limits as the server sets them (smaller), then the rest with
// `rest(stream, buffer, parser, ec)`.
template <class Rest>
outcome read_request(std::vector<std::string> chunks, Rest rest) {
  chunk_stream s{std::move(chunks)};
  beast::flat_buffer buffer;
  request_parser p;
  p.body_limit(body_limit);
  p.header_limit(1024);
  beast::error_code ec;
  http::read_header(s, buffer, p, ec);
  if (!ec) rest(s, buffer, p, ec);
  return {ec, p.is_done(), std::string(p.get().body()), beast::buffers_to_string(buffer.data())};
}

// What the server did before: the header, then http::read for the rest.
outcome read_as_before(std::vector<std::string> chunks) {
  return read_request(std::move(chunks),
                      [](auto& s, auto& buffer, auto& p, auto& ec) { http::read(s, buffer, p, ec); });
}

// What it does now: the header, then what the buffer holds, then http::read only if more is needed.
outcome read_with_buffered(std::vector<std::string> chunks, bool* read_again = nullptr) {
  return read_request(std::move(chunks), [&](auto& s, auto& buffer, auto& p, auto& ec) {
    parse_buffered(p, buffer, ec);
    if (read_again) *read_again = !ec && !p.is_done();
    if (!ec && !p.is_done()) http::read(s, buffer, p, ec);
  });
}

void check_same(const std::vector<std::string>& chunks) {
  const auto a = read_as_before(chunks);
  const auto b = read_with_buffered(chunks);
  BOOST_TEST(a.ec == b.ec, a.ec.message() << " vs " << b.ec.message());
  BOOST_TEST(a.done == b.done);
  BOOST_TEST(a.parsed_body == b.parsed_body);
  BOOST_TEST(a.left == b.left);
}

const std::string post_head =
    "POST /v1/locks/k/acquire HTTP/1.1\r\nHost: localhost\r\n"
    "Content-Type: application/json\r\n";
const std::string json_body = R"({"owner":"w1","ttl_ms":10000})";
const std::string whole =
    post_head + "Content-Length: " + std::to_string(json_body.size()) + "\r\n\r\n" + json_body;

}  // namespace

BOOST_AUTO_TEST_CASE(a_body_read_with_its_header_needs_no_second_read) {
  bool read_again = true;
  const auto r = read_with_buffered({whole}, &read_again);
  BOOST_TEST(!r.ec);
  BOOST_TEST(r.done);
  BOOST_TEST(r.parsed_body == json_body);
  BOOST_TEST(r.left.empty());
  BOOST_TEST(!read_again);
  check_same({whole});
}

BOOST_AUTO_TEST_CASE(a_body_split_across_reads_is_finished_from_the_stream) {
  const std::size_t header_end = whole.size() - json_body.size();
  bool read_again = false;
  const auto r =
      read_with_buffered({whole.substr(0, header_end + 5), whole.substr(header_end + 5)}, &read_again);
  BOOST_TEST(!r.ec);
  BOOST_TEST(r.parsed_body == json_body);
  BOOST_TEST(read_again);
  check_same({whole.substr(0, header_end), whole.substr(header_end)});
  check_same(
      {whole.substr(0, header_end + 5), whole.substr(header_end + 5, 3), whole.substr(header_end + 8)});
  // Byte by byte: every split point of header and body.
  std::vector<std::string> bytes;
  for (char c : whole)
    bytes.emplace_back(1, c);
  check_same(bytes);
}

BOOST_AUTO_TEST_CASE(a_pipelined_request_stays_in_the_buffer_for_the_next_parser) {
  const std::string second = "GET /v1/locks/k HTTP/1.1\r\nHost: localhost\r\n\r\n";
  const auto r = read_with_buffered({whole + second});
  BOOST_TEST(!r.ec);
  BOOST_TEST(r.parsed_body == json_body);
  BOOST_TEST(r.left == second);
  check_same({whole + second});
  check_same({whole + second + whole});
}

BOOST_AUTO_TEST_CASE(a_request_without_a_body_is_done_with_its_header) {
  const std::string get = "GET /v1/locks/k HTTP/1.1\r\nHost: localhost\r\n\r\n";
  bool read_again = true;
  const auto r = read_with_buffered({get}, &read_again);
  BOOST_TEST(!r.ec);
  BOOST_TEST(r.done);
  BOOST_TEST(!read_again);
  check_same({get});
}

BOOST_AUTO_TEST_CASE(a_chunked_body_is_parsed_as_before) {
  const std::string chunked = post_head + "Transfer-Encoding: chunked\r\n\r\n" + "5\r\nhello\r\n0\r\n\r\n";
  const auto r = read_with_buffered({chunked});
  BOOST_TEST(!r.ec);
  BOOST_TEST(r.parsed_body == "hello");
  check_same({chunked});
  check_same({chunked.substr(0, chunked.size() - 4), chunked.substr(chunked.size() - 4)});
}

BOOST_AUTO_TEST_CASE(malformed_bodies_fail_with_the_same_error) {
  // A bad chunk size, a chunk longer than it said, a body cut short by the end of the stream.
  const std::string bad_size = post_head + "Transfer-Encoding: chunked\r\n\r\n" + "zz\r\nhello\r\n0\r\n\r\n";
  const std::string overlong = post_head + "Transfer-Encoding: chunked\r\n\r\n" + "2\r\nhello\r\n0\r\n\r\n";
  const auto r = read_with_buffered({bad_size});
  BOOST_TEST(r.ec);
  BOOST_TEST((r.ec.category() == http::make_error_code(http::error::bad_chunk).category()));
  check_same({bad_size});
  check_same({overlong});
  check_same({whole.substr(0, whole.size() - 3)});
}

BOOST_AUTO_TEST_CASE(an_oversized_body_is_refused_with_body_limit) {
  const std::string big(body_limit + 1, 'x');
  const std::string chunked =
      post_head + "Transfer-Encoding: chunked\r\n\r\n" + "41\r\n" + big + "\r\n0\r\n\r\n";
  const auto r = read_with_buffered({chunked});
  BOOST_TEST((r.ec == http::error::body_limit));
  check_same({chunked});
  const std::string sized = post_head + "Content-Length: 65\r\n\r\n" + big;
  check_same({sized});
}
