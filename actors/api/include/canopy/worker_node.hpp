#pragma once
// A worker node: the process `canopy worker` runs, or any host that wants to lend its
// devices to fronts on other machines. It loads the model as an engine would (one
// worker per device, `devices`/`workers`), and publishes one gate actor through CAF's
// network layer (TLS with tls_*), which admits fronts that prove the cluster secret
// (cluster_token_file) and hands them its devices. Only the gate can be reached; the
// devices serve admitted fronts' sessions alone.
//
//   canopy::worker_node node{config, {"0.0.0.0", 7101}};  // needs cluster_token_file
//   node.drain();                                          // on SIGTERM
//
// Thread contract: construct, drain and destroy from one thread; the accessors are
// immutable after construction.

#include <canopy/backends/backend.hpp>
#include <canopy/engine_config.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace canopy {

struct listen_address {
  std::string host = "127.0.0.1"; // loopback unless told otherwise
  std::uint16_t port = 7101;      // 0: any free port (port() says which)
};

class worker_node {
public:
  /// Throws canopy::error(errc::invalid_config) for a bad config, a node with no local
  /// device, a non-loopback address without cluster_token_file, or a port it cannot
  /// bind. `log` receives one line per event (fronts admitted and refused, sessions
  /// ended with the KV they freed).
  worker_node(engine_config config, listen_address listen,
              std::function<void(const std::string&)> log = {});
  /// Drains first when drain() was not called.
  ~worker_node();
  worker_node(const worker_node&) = delete;
  worker_node& operator=(const worker_node&) = delete;

  std::uint16_t port() const;
  const std::string& host() const;
  /// "host:port", an IPv6 host in brackets ("[::1]:7101"), as fronts name the node.
  std::string address() const;
  const backends::model_info& model() const;
  const std::vector<std::string>& devices() const;

  /// Stops admitting fronts, tells the admitted ones it leaves (they send no new
  /// pass), lets every device finish the passes it holds, and returns once each front
  /// confirmed it received everything (or, for a front that does not answer, after a
  /// few seconds).
  void drain();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace canopy
