#include "bench/worker_processes.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace canopy::app {

namespace {

/// Starts `canopy worker --listen 127.0.0.1:0 --config FILE`; its stdout comes back on
/// `out_fd`, its stderr goes to `err_file`.
pid_t spawn_worker(const std::string& config_file, int stdout_fd,
                   const std::string& err_file) {
  std::vector<std::string> args = {"/proc/self/exe", "worker",   "--listen",
                                   "127.0.0.1:0",    "--config", config_file};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  posix_spawn_file_actions_addopen(&actions, 2, err_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int failed =
      posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (failed != 0)
    throw std::runtime_error("cannot start canopy worker: posix_spawn failed");
  return pid;
}

/// The port of the worker's "listening on HOST:PORT, ..." line, read within a minute.
std::uint16_t read_port(int fd, const std::string& err_file) {
  const std::string marker = "listening on ";
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto at = out.find(marker);
    const auto end = at == std::string::npos ? at : out.find_first_of(",\n", at);
    if (end != std::string::npos) {
      const auto colon = out.rfind(':', end);
      return static_cast<std::uint16_t>(
          std::stoi(out.substr(colon + 1, end - colon - 1)));
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    char buffer[1024];
    const auto n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0)
      break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  std::ifstream err(err_file);
  const std::string why{std::istreambuf_iterator<char>(err),
                        std::istreambuf_iterator<char>()};
  throw std::runtime_error("canopy worker did not start: " + why);
}

void stop(pid_t pid) {
  ::kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

} // namespace

worker_processes::worker_processes(std::size_t count, const engine_config& config) {
  // The bench's settings, for one device each and no remote workers of their own.
  auto settings = nlohmann::json::parse(config.to_json());
  settings["workers"] = 1;
  settings["devices"] = nlohmann::json::array();
  settings["remote_workers"] = nlohmann::json::array();
  config_file_ = "/tmp/canopy-bench-workers-" + std::to_string(::getpid()) + ".json";
  std::ofstream(config_file_) << settings.dump();
  try {
    for (std::size_t i = 0; i < count; ++i) {
      int out[2];
      if (::pipe2(out, O_CLOEXEC) != 0)
        throw std::runtime_error("cannot make a pipe");
      const auto err_file = config_file_ + ".err" + std::to_string(i);
      pids_.push_back(spawn_worker(config_file_, out[1], err_file));
      ::close(out[1]);
      const auto port = read_port(out[0], err_file);
      ::close(out[0]);
      std::remove(err_file.c_str());
      ports_.push_back(port);
      addresses_.push_back("127.0.0.1:" + std::to_string(port));
    }
  } catch (...) {
    for (auto pid : pids_)
      stop(pid);
    std::remove(config_file_.c_str());
    throw;
  }
}

worker_processes::~worker_processes() {
  for (auto pid : pids_)
    ::kill(pid, SIGTERM); // all at once, then wait for each
  for (auto pid : pids_)
    stop(pid);
  std::remove(config_file_.c_str());
}

} // namespace canopy::app
