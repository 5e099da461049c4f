// SPDX-License-Identifier: Apache-2.0
// A program that answers --help and --version as batond, baton-agent and baton do (a "usage:" line with a
// second form on an indented line, which packaging/man/usage.awk rewrites), for the man-page rules' check.
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("%s 0.0.0\n", PROGRAM);
    return 0;
  }
  std::printf(
      "usage: %s [--option VALUE]\n       %s other-form ARG\n\nOptions:\n"
      "  --option VALUE   what the option does\n  --help           this text\n",
      PROGRAM, PROGRAM);
  return 0;
}
