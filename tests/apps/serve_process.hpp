#pragma once
// A `canopy serve` process for integration tests: started with the given arguments on
// a free loopback port (--port 0), ready once it printed its listening line, stopped
// with SIGTERM (or SIGKILL if it ignores that) when the test ends. Its stderr goes
// to a temporary file the test can read.
// Thread contract: one test thread owns the process object.

#include "cli_runner.hpp"

#include <chrono>
#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>

namespace canopy::testing {

class serve_process {
public:
  explicit serve_process(std::vector<std::string> args) {
    args.insert(args.begin(), {"serve", "--port", "0"});
    // Close-on-exec: the server keeps only its stdout end of the pipe.
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe failed");
    const int spawned = spawn_canopy(args, out[1], err_path_, pid_);
    ::close(out[1]);
    out_fd_ = out[0];
    if (spawned != 0)
      throw std::runtime_error("posix_spawn failed: " + std::to_string(spawned));
    read_until_listening();
  }

  ~serve_process() {
    if (!exit_code_)
      stop(std::chrono::seconds(10));
    ::close(out_fd_);
    std::error_code ignored;
    std::filesystem::remove(err_path_, ignored);
  }
  serve_process(const serve_process&) = delete;
  serve_process& operator=(const serve_process&) = delete;

  std::uint16_t port() const { return port_; }
  /// Everything printed on stdout so far.
  const std::string& out() const { return out_; }
  std::string err() const { return read_file_bytes(err_path_); }

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

  pid_t pid() const { return pid_; }

private:
  void read_until_listening() {
    const std::string marker = "listening on http://";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      auto at = out_.find(marker);
      if (at != std::string::npos) {
        auto colon = out_.find(':', at + marker.size());
        auto end = out_.find('\n', at);
        if (colon != std::string::npos && end != std::string::npos) {
          port_ = static_cast<std::uint16_t>(std::stoi(out_.substr(colon + 1, end - colon - 1)));
          return;
        }
      }
      pollfd p{out_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0)
        continue;
      char buffer[4096];
      auto n = ::read(out_fd_, buffer, sizeof buffer);
      if (n <= 0)
        break; // the server exited
      out_.append(buffer, static_cast<std::size_t>(n));
    }
    throw std::runtime_error("canopy serve did not start listening; stdout: " + out_ +
                             "\nstderr: " + err());
  }

  std::filesystem::path err_path_ = unique_temp_path("canopy-serve-err");
  pid_t pid_ = 0;
  int out_fd_ = -1;
  std::string out_;
  std::uint16_t port_ = 0;
  std::optional<int> exit_code_;
};

} // namespace canopy::testing
