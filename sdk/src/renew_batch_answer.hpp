// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reads the 200 answer of `POST /v1/renew` (docs/protocol.md, "renew batch") straight into the entries'
// replies, with Boost.JSON's push parser: no json::value tree, no object and strings per entry. Private to
// the SDK.
//
// It reads exactly what json::parse followed by reading the tree field by field reads
// (test_renew_batch_answer checks it against that for every outcome and for many generated answers): the same
// parse options (depth 32, no comments, no trailing commas, valid UTF-8 only), members in any order, unknown
// members ignored, the last of duplicate names kept, a token as a JSON number or a decimal string.

#include "baton/backend.hpp"
#include "baton/error.hpp"

#include <boost/json/array.hpp>
#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/object.hpp>
#include <boost/json/string.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>

namespace baton::detail {

/// Reads a decimal string a digit at a time, as etcd writes int64: at least one digit, digits only, and a
/// value that stays below 2^64 - 9 before each digit (the bound uint_field applies).
class decimal_reader {
 public:
  void add(std::string_view part) {
    for (char c : part) {
      if (c < '0' || c > '9' || x_ > (UINT64_MAX - 9) / 10) {
        ok_ = false;
        return;
      }
      x_ = x_ * 10 + static_cast<std::uint64_t>(c - '0');
      digits_ = true;
    }
  }
  bool ok() const { return ok_ && digits_; }
  std::uint64_t value() const { return x_; }

 private:
  std::uint64_t x_ = 0;
  bool ok_ = true;
  bool digits_ = false;
};

enum class batch_answer_status {
  ok,           // one result per entry, each reply filled in
  not_json,     // the body is not JSON
  wrong_shape,  // JSON, but not an object whose "results" is an array of one result per entry
};

namespace renew_answer_detail {

// The push parser's handler. Depth 1 is the answer object, 2 its "results" array, 3 one result; anything
// else is skipped, whatever it holds. Each result is decided when its object (or other value) ends.
class handler {
 public:
  static constexpr std::size_t max_object_size = boost::json::object::max_size();
  static constexpr std::size_t max_array_size = boost::json::array::max_size();
  static constexpr std::size_t max_key_size = boost::json::string::max_size();
  static constexpr std::size_t max_string_size = boost::json::string::max_size();

  explicit handler(std::span<renew_reply> out) : out_(out) {}

  batch_answer_status shape() const {
    return top_object_ && results_ok_ && results_n_ == out_.size() ? batch_answer_status::ok
                                                                   : batch_answer_status::wrong_shape;
  }

  bool on_document_begin(boost::system::error_code&) { return true; }
  bool on_document_end(boost::system::error_code&) { return true; }

  bool on_object_begin(boost::system::error_code&) {
    if (depth_ == 0) top_object_ = true;
    begin_value(true, false);
    ++depth_;
    return true;
  }
  bool on_object_end(std::size_t, boost::system::error_code&) {
    --depth_;
    if (depth_ == 2 && in_results_) end_result();
    return true;
  }
  bool on_array_begin(boost::system::error_code&) {
    begin_value(false, true);
    ++depth_;
    return true;
  }
  bool on_array_end(std::size_t, boost::system::error_code&) {
    --depth_;
    if (depth_ == 1 && in_results_) {
      in_results_ = false;
      results_ok_ = true;
    }
    return true;
  }

  bool on_key_part(std::string_view s, std::size_t, boost::system::error_code&) {
    add_key(s);
    return true;
  }
  bool on_key(std::string_view s, std::size_t, boost::system::error_code&) {
    add_key(s);
    key_done_ = true;
    return true;
  }

  bool on_string_part(std::string_view s, std::size_t, boost::system::error_code&) {
    if (!in_string_) begin_scalar_string();
    add_string(s);
    return true;
  }
  bool on_string(std::string_view s, std::size_t, boost::system::error_code&) {
    if (!in_string_) begin_scalar_string();
    add_string(s);
    in_string_ = false;
    if (depth_ == 3 && r_.object) {
      if (field_ == field::error) r_.lost = error_ == "lost" && !error_long_;
      if (field_ == field::token) r_.token_ok = token_.ok();
    }
    end_scalar();
    return true;
  }

  bool on_number_part(std::string_view, boost::system::error_code&) { return true; }
  bool on_int64(std::int64_t v, std::string_view, boost::system::error_code&) {
    return number(boost::json::value(v));
  }
  bool on_uint64(std::uint64_t v, std::string_view, boost::system::error_code&) {
    return number(boost::json::value(v));
  }
  bool on_double(double v, std::string_view, boost::system::error_code&) {
    return number(boost::json::value(v));
  }
  bool on_bool(bool, boost::system::error_code&) {
    begin_value(false, false);
    end_scalar();
    return true;
  }
  bool on_null(boost::system::error_code&) {
    begin_value(false, false);
    end_scalar();
    return true;
  }
  bool on_comment_part(std::string_view, boost::system::error_code&) { return true; }
  bool on_comment(std::string_view, boost::system::error_code&) { return true; }

 private:
  enum class field { other, error, reason, message, token };

  // The fields of one result read so far; the last of a repeated name counts, as in a json::object.
  struct result {
    bool object = false;  // an object result is open: members at depth 3 are its own
    bool lost = false;
    bool token_ok = false;
  };

  void add_key(std::string_view s) {
    if (key_done_) {
      key_.clear();
      key_long_ = false;
      key_done_ = false;
    }
    if (key_long_ || key_.size() + s.size() > sizeof "message") {
      key_long_ = true;
      return;
    }
    key_.append(s);
  }

  field current_field() const {
    if (key_long_) return field::other;
    if (key_ == "error") return field::error;
    if (key_ == "reason") return field::reason;
    if (key_ == "message") return field::message;
    if (key_ == "token") return field::token;
    return field::other;
  }

  // A value starts at the current depth: the answer itself (0), a member of the answer (1), a result (2),
  // or a member of a result (3).
  void begin_value(bool object, bool array) {
    if (depth_ == 1) {
      const bool results = !key_long_ && key_ == "results";
      if (results) {
        // A later "results" replaces an earlier one, as in a json::object.
        results_ok_ = false;
        results_n_ = 0;
        in_results_ = array;
      }
    } else if (depth_ == 2 && in_results_) {
      r_ = result{};
      r_.object = object;
      reason_of(results_n_).clear();
      message_of(results_n_).clear();
      // A result that is not an object is decided at once: nothing inside it is read.
      if (!object) end_result();
    } else if (depth_ == 3 && r_.object) {
      field_ = current_field();
      // A member that is not a string (or for "token", not a number) takes the place of an earlier one.
      if (field_ == field::error) r_.lost = false;
      if (field_ == field::token) r_.token_ok = false;
      if (field_ == field::reason) reason_of(results_n_).clear();
      if (field_ == field::message) message_of(results_n_).clear();
    }
  }

  void begin_scalar_string() {
    begin_value(false, false);
    in_string_ = true;
    if (depth_ == 3 && r_.object) {
      error_.clear();
      error_long_ = false;
      token_ = decimal_reader{};
    }
  }

  void add_string(std::string_view s) {
    if (depth_ != 3 || !r_.object) return;
    switch (field_) {
      case field::error:
        if (error_long_ || error_.size() + s.size() > 4)
          error_long_ = true;
        else
          error_.append(s);
        break;
      case field::reason:
        reason_of(results_n_).append(s);
        break;
      case field::message:
        message_of(results_n_).append(s);
        break;
      case field::token:
        token_.add(s);
        break;
      case field::other:
        break;
    }
  }

  bool number(const boost::json::value& v) {
    begin_value(false, false);
    if (depth_ == 3 && r_.object && field_ == field::token) {
      boost::system::error_code ec;
      v.to_number<std::uint64_t>(ec);
      r_.token_ok = !ec;
    }
    end_scalar();
    return true;
  }

  void end_scalar() { field_ = field::other; }

  // Replies past the entries' count are not kept (the answer is refused whole), but are counted.
  std::string& reason_of(std::size_t i) { return i < out_.size() ? out_[i].lost_reason : spare_; }
  std::string& message_of(std::size_t i) { return i < out_.size() ? out_[i].diagnostic : spare_; }

  void end_result() {
    const bool object = r_.object;
    r_.object = false;  // closed: what follows at depth 3 is not one of its members
    const std::size_t i = results_n_++;
    if (i >= out_.size()) return;
    renew_reply& one = out_[i];
    if (object && r_.lost) {
      one.ec = error::lease_lost;
    } else {
      one.lost_reason.clear();
      one.diagnostic.clear();
      if (object && r_.token_ok) {
        one.ec = {};
      } else {
        one.ec = error::protocol_error;
        one.diagnostic = "batch renew result " + std::to_string(i) + " is neither a lease nor lost";
      }
    }
  }

  std::span<renew_reply> out_;
  std::size_t depth_ = 0;
  bool top_object_ = false;
  bool in_results_ = false;  // inside the current "results" array
  bool results_ok_ = false;  // the last "results" was an array, read to its end
  std::size_t results_n_ = 0;
  result r_;
  field field_ = field::other;
  std::string key_;
  bool key_long_ = false;
  bool key_done_ = true;
  bool in_string_ = false;
  std::string error_;
  bool error_long_ = false;
  decimal_reader token_;
  std::string spare_;
};

}  // namespace renew_answer_detail

/// Reads a batch renew answer's body into `out` (one reply per entry of the request, in order): ec empty for
/// a renewed lease, error::lease_lost with lost_reason and the server's message as diagnostic, or
/// error::protocol_error for a result that is neither. Anything but `ok` leaves `out` in no useful state:
/// the caller gives every entry the answer's error, as for any unreadable answer.
inline batch_answer_status read_renew_batch_answer(std::string_view body, std::span<renew_reply> out) {
  boost::json::basic_parser<renew_answer_detail::handler> p(boost::json::parse_options{}, out);
  boost::system::error_code ec;
  const auto n = p.write_some(false, body.data(), body.size(), ec);
  // As json::parse: text after the value is an error.
  if (ec || n < body.size()) return batch_answer_status::not_json;
  return p.handler().shape();
}

}  // namespace baton::detail
