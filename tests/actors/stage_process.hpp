// A real `troupe stage` worker process for the remote-stage tests: started
// with posix_spawn on a 127.0.0.1 port, its "listening on" line read from
// its stdout (port 0: the kernel's choice), killed, stopped or resumed by
// signal, and always reaped.
#pragma once

#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

extern char** environ;

namespace troupe::test {

inline std::string troupe_binary() { return std::string(TROUPE_BINARY_DIR) + "/troupe"; }

class StageProcess {
 public:
  StageProcess() = default;
  StageProcess(const StageProcess&) = delete;
  StageProcess& operator=(const StageProcess&) = delete;
  ~StageProcess() { stop(); }

  // `troupe stage ARGS --listen 127.0.0.1:PORT`; false (with a test
  // failure) when it exits or says nothing within the limit.
  bool start(const std::vector<std::string>& args, uint16_t port = 0) {
    stop();
    int fds[2];
    if (pipe(fds) != 0) return false;
    std::vector<std::string> argv{troupe_binary(), "stage"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--listen");
    argv.push_back("127.0.0.1:" + std::to_string(port));
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    const int rc = posix_spawn(&pid_, cargv[0], &actions, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
      ::close(fds[0]);
      pid_ = -1;
      ADD_FAILURE() << "cannot start " << cargv[0];
      return false;
    }
    out_ = fds[0];
    const std::string line = read_line(std::chrono::seconds(30));
    const size_t at = line.find("listening on 127.0.0.1:");
    if (at == std::string::npos) {
      ADD_FAILURE() << "the stage worker did not start: '" << line << "'";
      stop();
      return false;
    }
    port_ = static_cast<uint16_t>(std::stoi(line.substr(at + 23)));
    return true;
  }

  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  bool alive() const { return pid_ > 0 && ::kill(pid_, 0) == 0; }
  void signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }

  // SIGKILL (a crash) or SIGTERM, then reap.
  void stop(int sig = SIGTERM) {
    if (pid_ > 0) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, sig);
      int status = 0;
      waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    if (out_ >= 0) {
      ::close(out_);
      out_ = -1;
    }
  }

 private:
  std::string read_line(std::chrono::seconds limit) {
    std::string line;
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{.fd = out_, .events = POLLIN};
      if (::poll(&p, 1, 100) <= 0) continue;
      char c = 0;
      if (::read(out_, &c, 1) != 1) break;
      if (c == '\n') return line;
      line += c;
    }
    return line;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  uint16_t port_ = 0;
};

}  // namespace troupe::test
