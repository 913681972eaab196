#pragma once
// A long-running `canopy` process for integration tests (canopy serve, canopy worker),
// or another program of the tests: started with the given arguments, ready once its
// stdout has the line with `marker`
// followed by HOST:PORT (the port it bound, as with --port 0), stopped with SIGTERM
// (or SIGKILL if it ignores that) when the test ends. Its stderr goes to a temporary
// file the test can read; tests may also signal it (SIGKILL, SIGSTOP, SIGCONT).
// Thread contract: one test thread owns the process object.

#include "cli_runner.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>

namespace canopy::testing {

class canopy_process {
public:
  canopy_process(std::vector<std::string> args, std::string marker,
                 const std::string& program = CANOPY_CLI)
      : marker_(std::move(marker)) {
    // Close-on-exec: the process keeps only its stdout end of the pipe.
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe failed");
    const int spawned = spawn_program(program, args, out[1], err_path_, pid_);
    ::close(out[1]);
    out_fd_ = out[0];
    if (spawned != 0)
      throw std::runtime_error("posix_spawn failed: " + std::to_string(spawned));
    read_until_listening();
  }

  ~canopy_process() {
    if (!exit_code_) {
      ::kill(pid_, SIGCONT); // a stopped process cannot act on SIGTERM
      stop(std::chrono::seconds(10));
    }
    ::close(out_fd_);
    std::error_code ignored;
    std::filesystem::remove(err_path_, ignored);
  }
  canopy_process(const canopy_process&) = delete;
  canopy_process& operator=(const canopy_process&) = delete;

  std::uint16_t port() const { return port_; }
  /// "127.0.0.1:PORT".
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  /// Everything printed on stdout until it was ready.
  const std::string& out() const { return out_; }
  std::string err() const { return read_file_bytes(err_path_); }
  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }

  /// Sends SIGTERM and waits up to `patience` for the exit; its exit code, or -1 when
  /// it had to be killed or did not exit normally.
  int stop(std::chrono::milliseconds patience) {
    if (exit_code_)
      return *exit_code_;
    ::kill(pid_, SIGTERM);
    return wait(patience);
  }

  /// Waits for an exit (after a signal sent elsewhere); kills it after `patience`.
  int wait(std::chrono::milliseconds patience) {
    if (exit_code_)
      return *exit_code_;
    const auto deadline = std::chrono::steady_clock::now() + patience;
    int status = 0;
    for (;;) {
      auto done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_)
        break;
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        exit_code_ = -1;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return *exit_code_;
  }

private:
  void read_until_listening() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      auto at = out_.find(marker_);
      if (at != std::string::npos) {
        const auto end = out_.find_first_of(",\n", at);
        const auto colon = out_.rfind(':', end);
        if (end != std::string::npos && colon != std::string::npos && colon > at) {
          port_ = static_cast<std::uint16_t>(
              std::stoi(out_.substr(colon + 1, end - colon - 1)));
          return;
        }
      }
      pollfd p{out_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0)
        continue;
      char buffer[4096];
      auto n = ::read(out_fd_, buffer, sizeof buffer);
      if (n <= 0)
        break; // the process exited
      out_.append(buffer, static_cast<std::size_t>(n));
    }
    throw std::runtime_error("canopy did not print '" + marker_ + "'; stdout: " + out_ +
                             "\nstderr: " + err());
  }

  std::string marker_;
  std::filesystem::path err_path_ = unique_temp_path("canopy-process-err");
  pid_t pid_ = 0;
  int out_fd_ = -1;
  std::string out_;
  std::uint16_t port_ = 0;
  std::optional<int> exit_code_;
};

/// `base`, then `more`: a process's flags with a few added.
inline std::vector<std::string> flags_with(std::vector<std::string> more,
                                           std::vector<std::string> base) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

/// `canopy serve --port 0 args...`, ready once it listens.
inline std::vector<std::string> serve_args(std::vector<std::string> args) {
  args.insert(args.begin(), {"serve", "--port", "0"});
  return args;
}

class serve_process : public canopy_process {
public:
  explicit serve_process(std::vector<std::string> args)
      : canopy_process(serve_args(std::move(args)), "listening on http://") {}
};

/// `canopy worker --listen 127.0.0.1:0 args...` (or the --listen given), ready once
/// it listens.
inline std::vector<std::string> worker_args(std::vector<std::string> args) {
  const bool has_listen = std::find(args.begin(), args.end(), "--listen") != args.end();
  args.insert(args.begin(), "worker");
  if (!has_listen)
    args.insert(args.begin() + 1, {"--listen", "127.0.0.1:0"});
  return args;
}

class worker_process : public canopy_process {
public:
  explicit worker_process(std::vector<std::string> args)
      : canopy_process(worker_args(std::move(args)), "canopy worker: listening on ") {}
};

} // namespace canopy::testing
