#pragma once
// `canopy worker` processes on loopback that the bench starts for a measurement
// (--spawn-workers): each runs one device with the bench's own engine settings, so
// a front driving them computes what an in-process engine would. They are stopped with
// SIGTERM (SIGKILL after 10 s) when the object dies.
// Thread contract: one thread owns the object.

#include <canopy/engine_config.hpp>

#include <cstdint>
#include <string>
#include <sys/types.h>
#include <vector>

namespace canopy::app {

class worker_processes {
public:
  /// Starts `count` workers and waits until each listens; throws std::runtime_error
  /// with the worker's own message when one does not start.
  worker_processes(std::size_t count, const engine_config& config);
  ~worker_processes();
  worker_processes(const worker_processes&) = delete;
  worker_processes& operator=(const worker_processes&) = delete;

  /// "127.0.0.1:PORT" of each, for remote_workers.
  const std::vector<std::string>& addresses() const { return addresses_; }
  const std::vector<std::uint16_t>& ports() const { return ports_; }

private:
  std::vector<pid_t> pids_;
  std::vector<std::string> addresses_;
  std::vector<std::uint16_t> ports_;
  std::string config_file_;
};

} // namespace canopy::app
