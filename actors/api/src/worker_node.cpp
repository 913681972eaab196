#include <canopy/worker_node.hpp>

#include <canopy/actor_system_setup.hpp>
#include <canopy/actors/cluster_auth.hpp>
#include <canopy/actors/cluster_middleman.hpp>
#include <canopy/actors/engine_actors.hpp>
#include <canopy/actors/gate_shield.hpp>
#include <canopy/actors/node_device_actor.hpp>
#include <canopy/actors/node_gate_actor.hpp>
#include <canopy/error.hpp>
#include <canopy/messages/node_messages.hpp>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <thread>

namespace canopy {

using namespace messages;

struct worker_node::impl {
  engine_config config;
  listen_address listen;
  caf::actor_system_config system_config;
  std::unique_ptr<caf::actor_system> system;
  backends::model_info model;
  std::vector<std::string> devices;
  node_gate_actor gate;
  caf::io::middleman_actor middleman; // publishes the gate (cluster_middleman.hpp)
  std::uint64_t owner_key = actors::random_session_token(); // never leaves the process
  bool drained = false;

  /// Publishes the gate, behind its shield (gate_shield.hpp), on `listen`: every
  /// connection behind the cluster token's challenge-response (and TLS when
  /// configured), `log` told of each peer turned away. Returns the port bound. Asks the
  /// middleman actor as caf::io::publish asks CAF's.
  caf::expected<std::uint16_t> publish_gate(const std::string& secret,
                                            std::function<void(const std::string&)> log) {
    actors::gate_settings settings;
    settings.secret = secret;
    if (log)
      settings.on_refused = [log](const std::string& peer, const std::string& why) {
        log("turned away a peer at " + peer + ": it " + why);
      };
    settings.tls = config.tls();
    settings.handshake_timeout =
        std::chrono::milliseconds(static_cast<std::int64_t>(config.worker_timeout_ms));
    middleman = actors::spawn_cluster_middleman(*system, std::move(settings));
    caf::expected<std::uint16_t> port = caf::sec::runtime_error;
    caf::scoped_actor self{*system};
    self->request(middleman, caf::infinite, caf::publish_atom::value, listen.port,
                  actors::shield_gate(*system, gate), system->message_types(gate),
                  listen.host, true)
        .receive([&](std::uint16_t bound) { port = bound; },
                 [&](caf::error& e) { port = std::move(e); });
    return port;
  }

  /// Drains (see worker_node::drain), then ends the gate and the middleman, which
  /// live until told, and the system, whose destructor waits for every actor.
  void shut_down(worker_node& node) {
    node.drain();
    caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
    gate = nullptr;
    if (middleman)
      caf::anon_send_exit(middleman, caf::exit_reason::kill); // it ignores the others
    middleman = nullptr; // its thread ends only once nothing holds it
    system.reset();
  }
};

worker_node::worker_node(engine_config config, listen_address listen,
                         std::function<void(const std::string&)> log)
    : impl_(std::make_unique<impl>()) {
  config.validate();
  auto& d = *impl_;
  d.config = std::move(config);
  d.listen = std::move(listen);
  const std::string secret =
      d.config.cluster_token_file.empty()
          ? std::string{}
          : actors::read_cluster_secret(d.config.cluster_token_file);
  if (secret.empty() && !actors::is_loopback(d.listen.host))
    throw error(errc::invalid_config,
                "a worker node listening on " + d.listen.host +
                    " (not loopback) needs cluster_token_file: anyone who reaches it "
                    "could use its devices");
  if (!d.config.remote_workers.empty())
    throw error(errc::invalid_config, "a worker node takes no remote_workers");
  configure_actor_system(d.system_config, d.config, network_role::worker_node);
  const auto threads = d.config.scheduler_threads != 0
                           ? d.config.scheduler_threads
                           : std::max(2u, std::thread::hardware_concurrency());
  d.system_config.set("scheduler.max-threads", static_cast<std::size_t>(threads));
  d.system = std::make_unique<caf::actor_system>(d.system_config);

  auto backends = actors::make_backends(d.config);
  if (backends.empty())
    throw error(errc::invalid_config,
                "a worker node needs a device (workers >= 1 or devices)");
  d.devices = d.config.device_list();
  d.model = backends.front()->info();
  actors::gate_options gate;
  gate.secret = secret;
  gate.owner_key = d.owner_key;
  gate.log = log;
  for (std::size_t i = 0; i < backends.size(); ++i) {
    device_announcement a;
    a.device = d.devices.at(i);
    a.model = backends[i]->info();
    a.kv_budget_bytes = actors::enforced_kv_budget(d.config.kv_budget_bytes, a.model);
    a.spec = actors::backend_spec_for(d.config, a.device);
    auto holder =
        std::make_shared<std::unique_ptr<backends::backend_i>>(std::move(backends[i]));
    a.handle = d.system->spawn<caf::detached>(actors::node_device, holder, d.owner_key);
    gate.devices.push_back(std::move(a));
  }
  d.gate = d.system->spawn(actors::node_gate, std::move(gate));
  auto published = d.publish_gate(secret, std::move(log));
  if (!published) {
    const auto why = d.system->render(published.error());
    d.shut_down(*this);
    throw error(errc::invalid_config, "cannot listen on " + d.listen.host + ":" +
                                          std::to_string(d.listen.port) + ": " + why);
  }
  d.listen.port = *published;
}

worker_node::~worker_node() {
  impl_->shut_down(*this);
}

std::uint16_t worker_node::port() const {
  return impl_->listen.port;
}
const std::string& worker_node::host() const {
  return impl_->listen.host;
}
std::string worker_node::address() const {
  return actors::peer_label(impl_->listen.host, impl_->listen.port);
}
const backends::model_info& worker_node::model() const {
  return impl_->model;
}
const std::vector<std::string>& worker_node::devices() const {
  return impl_->devices;
}

void worker_node::drain() {
  auto& d = *impl_;
  if (d.drained || !d.gate)
    return;
  d.drained = true;
  if (d.listen.port != 0)
    d.system->middleman().close(d.listen.port); // no new connection
  caf::scoped_actor self{*d.system};
  // Bounded: devices finish their passes (however long those take), then each front
  // has 2 s to confirm; pass_timeout_ms bounds a pass.
  self->request(
          d.gate,
          std::chrono::milliseconds(static_cast<std::int64_t>(d.config.pass_timeout_ms)) +
              std::chrono::seconds(5),
          drain_atom::value, d.owner_key)
      .receive([](bool) {}, [](const caf::error&) {});
}

} // namespace canopy
