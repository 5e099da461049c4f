// SPDX-License-Identifier: Apache-2.0
#include "process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace baton::test {

finished_process run_to_end(std::vector<std::string> argv, const std::string& stderr_path,
                            std::chrono::milliseconds bound) {
  child_process p(std::move(argv), stderr_path);
  finished_process r;
  try {
    for (;;)
      r.out += p.read_line(bound) + "\n";  // until the end of output
  } catch (const std::exception&) {
  }
  r.code = p.wait(bound);
  std::ifstream in(stderr_path);
  std::stringstream s;
  s << in.rdbuf();
  r.err = s.str();
  return r;
}

child_process::child_process(std::vector<std::string> argv, std::string stderr_path,
                             std::vector<std::string> extra_env) {
  // The environment is built before fork: only async-signal-safe calls are allowed in the child of a
  // process that may have other threads.
  std::vector<std::string> env = std::move(extra_env);
  for (char** e = environ; *e; ++e) {
    std::string_view var(*e);
    auto name = var.substr(0, var.find('=') + 1);
    bool replaced = false;
    for (const auto& x : env)
      replaced = replaced || x.rfind(name, 0) == 0;
    if (!replaced) env.emplace_back(var);
  }
  std::vector<char*> envp;
  for (auto& e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(a.data());
  args.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork: " + std::string(std::strerror(errno)));
  if (pid_ == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    if (!stderr_path.empty()) {
      int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (err >= 0) ::dup2(err, STDERR_FILENO);
    }
    ::execve(args[0], args.data(), envp.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(fds[1]);
  stdout_fd_ = fds[0];
}

child_process::~child_process() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    wait(std::chrono::seconds(10));
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

std::string child_process::read_line(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto nl = buffered_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("timed out waiting for a line from the child's stdout");
    pollfd p{stdout_fd_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(stdout_fd_, buf, sizeof buf);
    if (n <= 0) throw std::runtime_error("child closed its stdout before printing a line");
    buffered_.append(buf, static_cast<std::size_t>(n));
  }
}

void child_process::signal(int sig) {
  if (!reaped_) ::kill(pid_, sig);
}

bool child_process::running() {
  if (reaped_ || pid_ <= 0) return false;
  int st;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  return true;
}

int child_process::wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status_;
}

}  // namespace baton::test
