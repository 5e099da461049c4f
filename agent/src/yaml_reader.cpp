// SPDX-License-Identifier: Apache-2.0
#include "yaml_reader.hpp"

namespace baton::agent::detail {
namespace {

// Levenshtein distance, for "did you mean" on unknown keys.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string unknown_key_reason(std::string_view key, std::span<const std::string_view> allowed) {
  std::string_view best;
  std::size_t best_distance = key.size() <= 4 ? 1 : 2;  // further than this is a guess, not a typo
  for (const auto candidate : allowed) {
    const auto d = edit_distance(key, candidate);
    if (d <= best_distance) best = candidate, best_distance = d;
  }
  if (!best.empty()) return "unknown key (did you mean " + std::string(best) + "?)";
  std::string list;
  for (const auto candidate : allowed)
    list += (list.empty() ? "" : ", ") + std::string(candidate);
  return "unknown key (expected one of: " + list + ")";
}

std::string kind_of(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a string";
    default:
      return "nothing";
  }
}

std::string child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

}  // namespace baton::agent::detail
