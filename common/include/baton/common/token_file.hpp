// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reading a bearer token from a file, shared by the `baton` CLI (--token-file) and baton-agent (token_file).

#include <stdexcept>
#include <string>

namespace baton {

/// A token file that cannot be used. what() is the reason alone ("cannot open: No such file or
/// directory", "the file is empty", ...); it never contains the file's content.
struct token_file_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The token in `path`: the file's content without surrounding whitespace (so `echo TOKEN > file` works),
/// which must be one word of visible characters. Throws token_file_error.
std::string read_token_file(const std::string& path);

}  // namespace baton
