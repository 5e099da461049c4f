// SPDX-License-Identifier: Apache-2.0
#include "baton/common/prometheus_text.hpp"

#include <charconv>

namespace baton {

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void prometheus_text::family(std::string_view name, std::string_view help, std::string_view type) {
  out_.append("# HELP ").append(name).append(" ");
  // HELP text escapes only `\` and newlines.
  for (char c : help)
    out_ += c == '\n'   ? std::string_view("\\n")
            : c == '\\' ? std::string_view("\\\\")
                        : std::string_view(&c, 1);
  out_.append("\n# TYPE ").append(name).append(" ").append(type).append("\n");
}

void prometheus_text::begin(std::string_view name, labels l) {
  out_.append(name);
  if (l.size() == 0) {
    out_ += ' ';
    return;
  }
  char sep = '{';
  for (const auto& [k, v] : l) {
    out_ += sep;
    out_.append(k).append("=\"").append(escape_label_value(v)).append("\"");
    sep = ',';
  }
  out_.append("} ");
}

void prometheus_text::sample(std::string_view name, labels l, std::uint64_t value) {
  begin(name, l);
  out_.append(std::to_string(value)).append("\n");
}

void prometheus_text::sample(std::string_view name, labels l, std::int64_t value) {
  begin(name, l);
  out_.append(std::to_string(value)).append("\n");
}

void prometheus_text::sample(std::string_view name, labels l, double value) {
  begin(name, l);
  // The shortest text that reads back as `value` (1796159166.6, not 1796159166.5999999).
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  out_.append(ec == std::errc{} ? std::string_view(buf, static_cast<std::size_t>(end - buf)) : "NaN")
      .append("\n");
}

}  // namespace baton
