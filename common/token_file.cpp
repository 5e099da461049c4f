// SPDX-License-Identifier: Apache-2.0
#include "baton/common/token_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace baton {

std::string read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw token_file_error(std::string("cannot open: ") + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw token_file_error(std::string("cannot read: ") + std::strerror(errno));
  std::string token = text.str();
  const auto first = token.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) throw token_file_error("the file is empty");
  token = token.substr(first, token.find_last_not_of(" \t\r\n") - first + 1);
  for (unsigned char c : token)
    if (c <= 0x20 || c == 0x7f)
      throw token_file_error("must hold one token without spaces or control characters");
  return token;
}

}  // namespace baton
