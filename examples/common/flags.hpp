// SPDX-License-Identifier: Apache-2.0
#pragma once
// Command-line flags of the SDK examples: `--name value` pairs and `--help`, nothing more. A flag the
// example does not know is an error rather than ignored, so a typo does not run the example against the
// default server.

#include <cstdio>
#include <exception>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace baton::examples {

/// One `--name value` flag; the variable holds the default and receives the value given.
struct flag {
  flag(std::string_view n, std::string& v, std::string_view h) : name(n), text(&v), help(h) {}
  flag(std::string_view n, long& v, std::string_view h) : name(n), number(&v), help(h) {}

  std::string_view name;  // "--server"
  std::string* text = nullptr;
  long* number = nullptr;
  std::string_view help;

  std::string shown() const { return text ? (text->empty() ? "none" : *text) : std::to_string(*number); }

  // Stores `value`; false when a number flag is given something else.
  bool set(const std::string& value) const {
    if (text) {
      *text = value;
      return true;
    }
    std::size_t used = 0;
    try {
      *number = std::stol(value, &used);
    } catch (const std::exception&) {
      return false;
    }
    return used == value.size();
  }
};

inline void print_usage(std::FILE* to, std::string_view usage, std::initializer_list<flag> flags) {
  std::fprintf(to, "usage: %.*s\n", static_cast<int>(usage.size()), usage.data());
  if (flags.size() != 0) std::fprintf(to, "flags:\n");
  for (const flag& f : flags)
    std::fprintf(to, "  %-12.*s %.*s (default: %s)\n", static_cast<int>(f.name.size()), f.name.data(),
                 static_cast<int>(f.help.size()), f.help.data(), f.shown().c_str());
  std::fprintf(to, "  %-12s show this help and exit\n", "--help");
}

/// Reads argv into `flags`. Returns an exit status when the example must stop before doing anything: 0
/// after printing the usage for `--help` or `-h` (to stdout), 2 after a usage error (to stderr).
inline std::optional<int> parse_flags(int argc, char** argv, std::string_view usage,
                                      std::initializer_list<flag> flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_usage(stdout, usage, flags);
      return 0;
    }
  }
  for (int i = 1; i < argc; i += 2) {
    const std::string_view arg = argv[i];
    const flag* known = nullptr;
    for (const flag& f : flags)
      if (f.name == arg) known = &f;
    const char* problem = !known                     ? "unknown flag"
                          : i + 1 >= argc            ? "missing a value after"
                          : !known->set(argv[i + 1]) ? "a number must follow"
                                                     : nullptr;
    if (problem) {
      std::fprintf(stderr, "%s: %s %s\n", argv[0], problem, argv[i]);
      print_usage(stderr, usage, flags);
      return 2;
    }
  }
  return std::nullopt;
}

}  // namespace baton::examples
