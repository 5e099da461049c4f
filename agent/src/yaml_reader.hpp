// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reading the agent's YAML file: typed values out of yaml-cpp's tree with the node's position and key path in
// every error, "did you mean" for unknown keys, and the count of documents in a stream. Knows nothing of the
// agent's keys (config.cpp, the schema, does). Private to the agent's configuration code.

#include "config.hpp"
#include "config_checks.hpp"

#include "baton/common/duration.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace baton::agent::detail {

/// "unknown key (did you mean <close one>?)", or the list of `allowed` keys when none is close.
std::string unknown_key_reason(std::string_view key, std::span<const std::string_view> allowed);
/// "a mapping", "a list", ...: what a node is, for messages.
std::string kind_of(const YAML::Node& n);
/// The key path of `key` under `path` ("" for the top level): `election.ttl`.
std::string child(const std::string& path, std::string_view key);

// Reads typed values out of the YAML tree, failing with the node's position and key path. yaml-cpp's own
// as<T>() is not used: it accepts YAML 1.1 spellings (`yes`, `on`) and its errors carry no key path.
class reader {
 public:
  explicit reader(std::string_view file) : file_(file) {}

  [[noreturn]] void fail(const YAML::Mark& at, const std::string& key, const std::string& reason) const {
    if (at.is_null()) throw config_error(file_, 0, 0, key, reason);
    throw config_error(file_, at.line + 1, at.column + 1, key, reason);
  }
  [[noreturn]] void fail(const YAML::Node& at, const std::string& key, const std::string& reason) const {
    fail(at.Mark(), key, reason);
  }
  void check(const YAML::Node& at, const std::string& key, const std::string& reason) const {
    if (!reason.empty()) fail(at, key, reason);
  }

  /// Calls `each(name, key, value)` for every entry of the mapping `map`, refusing non-mappings, non-string
  /// keys and repeated keys (yaml-cpp would silently keep one of them).
  void entries(
      const YAML::Node& map, const std::string& path,
      const std::function<void(const std::string&, const YAML::Node&, const YAML::Node&)>& each) const {
    if (!map.IsMap()) fail(map, path, "expected a mapping, got " + kind_of(map));
    std::vector<std::pair<std::string, int>> seen;
    for (const auto& entry : map) {
      const YAML::Node& key = entry.first;
      if (!key.IsScalar()) fail(key, path, "keys must be strings, got " + kind_of(key));
      const auto previous =
          std::find_if(seen.begin(), seen.end(), [&](auto& s) { return s.first == key.Scalar(); });
      if (previous != seen.end())
        fail(key, child(path, key.Scalar()),
             "duplicate key (first at line " + std::to_string(previous->second) + ")");
      seen.emplace_back(key.Scalar(), key.Mark().line + 1);
      // Pointed at the key: yaml-cpp places an empty value at the start of the next line.
      if (entry.second.IsNull())
        fail(key, child(path, key.Scalar()), "has no value (leave the key out for the default)");
      each(key.Scalar(), key, entry.second);
    }
  }

  /// Checks that `map` is a mapping whose keys are all in `allowed`.
  void known_keys(const YAML::Node& map, const std::string& path,
                  std::span<const std::string_view> allowed) const {
    if (!map.IsMap()) fail(map, path, "expected a mapping, got " + kind_of(map));
    for (const auto& entry : map) {
      const YAML::Node& key = entry.first;
      if (key.IsScalar() && std::find(allowed.begin(), allowed.end(), key.Scalar()) == allowed.end())
        fail(key, child(path, key.Scalar()), unknown_key_reason(key.Scalar(), allowed));
    }
    entries(map, path, [](auto&, auto&, auto&) {});
  }

  std::string text(const YAML::Node& n, const std::string& path) const {
    if (n.IsNull()) fail(n, path, "has no value (leave the key out for the default)");
    if (!n.IsScalar()) fail(n, path, "expected a string, got " + kind_of(n));
    return n.Scalar();
  }

  std::chrono::milliseconds duration(const YAML::Node& n, const std::string& path) const {
    const auto s = text(n, path);
    if (const auto d = baton::parse_duration(s)) return *d;
    if (!s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); }))
      fail(n, path, quoted(s) + " has no unit (write " + s + "s, " + s + "ms, " + s + "m or " + s + "h)");
    fail(n, path, quoted(s) + " is not a duration (write e.g. 500ms, 10s, 2m or 1h30m)");
  }

  std::chrono::milliseconds positive_duration(const YAML::Node& n, const std::string& path) const {
    const auto d = duration(n, path);
    if (d.count() <= 0) fail(n, path, "must be positive (leave the key out for the default)");
    return d;
  }

  bool boolean(const YAML::Node& n, const std::string& path) const {
    const auto s = text(n, path);
    // YAML 1.2 booleans only: `yes`/`no`/`on`/`off` are strings there, so they are refused, not guessed.
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    fail(n, path, "expected true or false, got " + quoted(s));
  }

  double number(const YAML::Node& n, const std::string& path) const {
    const auto s = text(n, path);
    double value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || !std::isfinite(value))
      fail(n, path, "expected a number, got " + quoted(s));
    return value;
  }

  /// A whole number from `min` to `max`.
  std::size_t count(const YAML::Node& n, const std::string& path, std::size_t min, std::size_t max) const {
    const auto s = text(n, path);
    std::size_t value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || value < min || value > max)
      fail(n, path,
           "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max) + ", got " +
               quoted(s));
    return value;
  }

  template <class E>
  E choice(const YAML::Node& n, const std::string& path,
           std::initializer_list<std::pair<std::string_view, E>> options) const {
    const auto s = text(n, path);
    std::string names;
    std::size_t i = 0;
    for (const auto& [name, value] : options) {
      if (s == name) return value;
      if (i > 0) names += i + 1 == options.size() ? " or " : ", ";
      names += name;
      ++i;
    }
    fail(n, path, "expected " + names + ", got " + quoted(s));
  }

 private:
  std::string file_;
};

// Counts the documents of a stream and notes where the second one's content starts. yaml-cpp 0.7's LoadAll
// never returns on some malformed streams (a stray `,` yields empty document after empty document without
// consuming input, allocating all the while), so parse_config reads at most two documents this way and then
// loads the first with Load().
class document_counter final : public YAML::EventHandler {
 public:
  int documents = 0;
  std::optional<YAML::Mark> second_at;

  void OnDocumentStart(const YAML::Mark& m) override {
    if (++documents == 2) second_start_ = m;
  }
  void OnDocumentEnd() override {
    if (documents == 2 && !second_at) second_at = second_start_;
  }
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override {
    node(m);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    node(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    node(m);
  }
  void OnMapEnd() override {}

 private:
  void node(const YAML::Mark& m) {
    if (documents == 2 && !second_at) second_at = m;
  }
  YAML::Mark second_start_;
};

}  // namespace baton::agent::detail
