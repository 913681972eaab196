#include <canopy/actors/remote_workers.hpp>

#include <canopy/actors/cluster_auth.hpp>
#include <canopy/actors/cluster_middleman.hpp>
#include <canopy/actors/worker_link_actor.hpp>

#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

namespace canopy::actors {

namespace {

/// "host:port" or "[v6 host]:port" (engine_config validated it).
std::pair<std::string, std::uint16_t> split_address(const std::string& address) {
  const auto colon = address.rfind(':');
  auto host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return {host, static_cast<std::uint16_t>(std::stoul(address.substr(colon + 1)))};
}

} // namespace

void spawn_worker_links(caf::actor_system& system, const engine_config& config,
                        engine_actors& actors) {
  const std::string secret = config.cluster_token_file.empty()
                                 ? std::string{}
                                 : read_cluster_secret(config.cluster_token_file);
  gate_settings settings;
  settings.secret = secret;
  settings.tls = config.tls();
  settings.handshake_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      from_ms(config.worker_timeout_ms));
  auto refusals = std::make_shared<gate_refusals>();
  settings.on_refused = [refusals](const std::string& peer, const std::string& why) {
    refusals->record(peer, why);
  };
  actors.middleman = spawn_cluster_middleman(system, std::move(settings));
  for (std::size_t i = 0; i < config.remote_workers.size(); ++i) {
    link_options options;
    options.address = config.remote_workers[i];
    std::tie(options.host, options.port) = split_address(options.address);
    options.node_index = i;
    options.timeout = from_ms(config.worker_timeout_ms);
    options.secret = secret;
    options.middleman = actors.middleman;
    options.refusals = refusals;
    actors.links.push_back(
        system.spawn(worker_link, options, actors.batcher, actors.metrics));
  }
}

void await_first_attempts(caf::actor_system& system,
                          const std::vector<messages::worker_link_actor>& links,
                          caf::timespan patience) {
  caf::scoped_actor self{system};
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (const auto& link : links) {
    const auto left = std::chrono::duration_cast<caf::timespan>(
        deadline - std::chrono::steady_clock::now());
    if (left <= caf::timespan{0})
      return;
    self->request(link, left, messages::wait_atom::value)
        .receive([](bool) {}, [](const caf::error&) {});
  }
}

} // namespace canopy::actors
