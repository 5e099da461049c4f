// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: a TCP proxy on loopback that injects the faults of a real network (lost replies, lost
// requests, resets, partitions, latency, refused connections) between an HTTP/1.1 client and batond.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace baton::test {

/// Splits one direction of an HTTP/1.1 byte stream into messages, so faults can be applied per request or
/// per reply rather than per TCP segment. It understands just enough framing for batond's traffic: a start
/// line, headers, and a body delimited by Content-Length (or, for a reply without one, by the end of the
/// connection). Anything else (Transfer-Encoding, a malformed start line, a header block over 64 KiB) makes
/// the stream opaque: it has no message boundaries from then on. Pure: no sockets, no clock.
class http_framer {
 public:
  enum class kind { request, response };

  /// A prefix of the input that lies within one message (or, once opaque, within no message).
  struct segment {
    std::size_t size = 0;
    bool starts_message = false;  // its first byte is the first byte of a message
    bool ends_message = false;    // its last byte is the last byte of a message
  };

  explicit http_framer(kind k) : kind_(k) {}

  /// Consumes the longest prefix of `bytes` that belongs to a single message and describes it; call again
  /// with the rest. An empty input gives an empty segment.
  segment next(std::string_view bytes);

  /// True once the stream stopped looking like Content-Length framed HTTP/1.1.
  bool opaque() const { return state_ == state::opaque; }

 private:
  enum class state { header, body, until_close, opaque };
  bool start_line_valid() const;
  // Reads the completed header block; false when the message cannot be framed.
  bool begin_body();

  kind kind_;
  state state_ = state::header;
  std::string header_;  // the current message's start line and headers, until the blank line
  bool start_line_checked_ = false;
  std::uint64_t body_left_ = 0;
};

/// What happens to the client's connection after a reply to it was swallowed.
enum class drop_style {
  hang,   // the connection stays open and silent: the client only learns of the loss by timing out
  reset,  // the proxy resets the client's connection (RST) once the whole reply has been swallowed
};

/// A proxy from `listen_address`:port() (default 127.0.0.1) to 127.0.0.1:upstream_port. Each accepted
/// connection gets its own upstream connection; bytes flow unchanged until a fault is configured. Runs its
/// own io_context on its own thread. Every member function is thread-safe and may be called from any thread
/// except the proxy's own. Faults apply from the next chunk read after the call returns; chunks already being
/// written are not recalled. Counters only grow.
class fault_proxy {
 public:
  /// Listens on 127.0.0.1 on an ephemeral port and starts the proxy's thread. Throws on failure to listen.
  /// Nothing is checked about the upstream until a client connects; if connecting to it then fails, the
  /// client's connection is reset.
  explicit fault_proxy(unsigned short upstream_port, const std::string& listen_address = "127.0.0.1");
  /// Closes every connection and the listener, stops the thread and joins it.
  ~fault_proxy();
  fault_proxy(const fault_proxy&) = delete;
  fault_proxy& operator=(const fault_proxy&) = delete;

  /// The port clients connect to.
  unsigned short port() const;

  /// Connections accepted from now on go to 127.0.0.1:`p` (a restarted server on a new port); open ones
  /// keep their upstream.
  void set_upstream_port(unsigned short p);

  // ---- Faults

  /// Delays every chunk before it is forwarded, in either direction (zero: no delay). Chunks of one
  /// direction are forwarded in order, so a request-reply round trip takes at least twice `d`.
  void set_delay(std::chrono::milliseconds d);

  /// Swallows the next `n` replies from the upstream (across all connections): the server received and
  /// processed the request, the client never hears back. After each swallowed reply the connection is
  /// either silent for good (hang: nothing more is forwarded either way, and a close by either side is not
  /// passed on) or reset (RST to the client). Replaces any drops still pending; `n <= 0` cancels them.
  void drop_responses(int n, drop_style style);

  /// Sends `reply`, a complete HTTP/1.1 response, to the client in place of each of the next `n` replies
  /// from the upstream (across all connections): the server received and applied the request, the client
  /// hears something else, such as a 503 that leaves it unsure whether the change was made. A reply is
  /// replaced once it is complete (batond frames every reply by Content-Length); one the server cuts short
  /// is lost without a replacement. drop_responses takes precedence. Replaces any replacements still
  /// pending; `n <= 0` cancels them.
  void replace_responses(int n, std::string reply);

  /// Swallows the next `n` requests from clients (across all connections): the server never sees them, and
  /// the connection hangs as with drop_style::hang. Replaces any drops still pending; `n <= 0` cancels them.
  void drop_requests(int n);

  /// Resets (RST, SO_LINGER 0) both sides of every open connection; returns once the resets are sent.
  /// Connections accepted afterwards are unaffected.
  void reset_all();

  /// While on, every connection, open or new, reads and discards what either side sends and passes on no
  /// close, like a network partition. A connection that lost part of a message this way may be out of step
  /// with the server afterwards; use a fresh connection once the partition ends.
  void set_blackhole(bool on);

  /// Sends a copy of each of the next `n` complete requests (across all connections) to the upstream again,
  /// `delay` after the original was forwarded, on a fresh connection whose reply is read and discarded: a
  /// retransmitted request, and with a delay one that arrives after later requests (reordered). The
  /// original is forwarded unchanged. Replaces any duplications still pending; `n <= 0` cancels them.
  void duplicate_requests(int n, std::chrono::milliseconds delay);

  /// While on, new connections are accepted and immediately reset (RST); open connections are unaffected.
  void set_refuse(bool on);

  // ---- Counters, to assert that a fault really happened

  /// Connections the listener accepted, refused ones included.
  std::size_t connections_accepted() const;
  /// Connections reset by set_refuse.
  std::size_t connections_refused() const;
  /// Connections reset by reset_all or drop_style::reset.
  std::size_t connections_reset() const;
  /// Complete requests forwarded to the upstream.
  std::size_t requests_forwarded() const;
  /// Complete replies forwarded to clients.
  std::size_t responses_forwarded() const;
  /// Requests swallowed by drop_requests (counted when their first byte arrives).
  std::size_t requests_dropped() const;
  /// Replies swallowed by drop_responses (counted when their first byte arrives, so the server has
  /// already applied the request).
  std::size_t responses_dropped() const;
  /// Replies replaced by replace_responses (counted when the replaced reply is complete, so the server has
  /// applied the request).
  std::size_t responses_replaced() const;
  /// Copies sent by duplicate_requests (counted when the copy is written to the upstream).
  std::size_t requests_duplicated() const;
  /// Bytes discarded by the blackhole, in either direction.
  std::size_t bytes_blackholed() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace baton::test
