#pragma once
// Runs the built `canopy` program (path from the CANOPY_CLI compile definition) with
// arguments passed as they are, no shell in between, and returns its exit code and
// both outputs. stdout and stderr go to temporary files rather than pipes, so a
// command writing much to both can never block against the test reading one.
// spawn_canopy starts it for fixtures that keep it running (canopy_process.hpp).
// Thread contract: pure functions of the file system; run_canopy may be called from
// several threads (each call uses its own temporary files).

#include <gtest/gtest.h>

#include "scratch_files.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace canopy::testing {

struct cli_result {
  int exit_code = -1; // -1: did not exit normally
  std::string out;    // stdout, exact bytes
  std::string err;    // stderr
};

inline std::string read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

/// A fresh path under the temporary directory, unique within and across processes.
inline std::filesystem::path unique_temp_path(const std::string& stem) {
  static std::atomic<int> counter{0};
  return temp_root() /
         (stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
}

/// Starts `program args...` with stdin from /dev/null, stdout onto the open descriptor
/// `stdout_fd` and stderr into the file `err_path`. posix_spawn's result: 0 when it
/// started (its id in `pid`), else an errno value.
inline int spawn_program(const std::string& program, const std::vector<std::string>& args,
                         int stdout_fd, const std::filesystem::path& err_path,
                         pid_t& pid) {
  std::vector<std::string> argv_store{program};
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_store)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  int spawned = posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (spawned == 0)
    spawned = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return spawned;
}

/// spawn_program for the built `canopy`.
inline int spawn_canopy(const std::vector<std::string>& args, int stdout_fd,
                        const std::filesystem::path& err_path, pid_t& pid) {
  return spawn_program(CANOPY_CLI, args, stdout_fd, err_path, pid);
}

/// Runs `canopy args...` and waits for it.
inline cli_result run_canopy(const std::vector<std::string>& args) {
  const auto out_path = unique_temp_path("canopy-cli-out");
  const auto err_path = unique_temp_path("canopy-cli-err");
  // Close-on-exec: only this command's stdout, never another thread's spawn, holds it.
  const int out =
      ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  pid_t pid = 0;
  const int spawned = spawn_canopy(args, out, err_path, pid);
  if (out >= 0)
    ::close(out);
  cli_result result;
  if (spawned != 0) {
    result.err = "posix_spawn failed: " + std::to_string(spawned);
  } else {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status))
      result.exit_code = WEXITSTATUS(status);
    result.out = read_file_bytes(out_path);
    result.err = read_file_bytes(err_path);
  }
  std::error_code ignored;
  std::filesystem::remove(out_path, ignored);
  std::filesystem::remove(err_path, ignored);
  return result;
}

/// For assertion messages: what the command printed.
inline std::string describe(const cli_result& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstderr: " + r.err +
         "\nstdout (first 500 bytes): " + r.out.substr(0, 500);
}

} // namespace canopy::testing
