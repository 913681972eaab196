// A stand-in for a worker node of another protocol version, for the tests: it publishes
// a gate with Canopy's interface on a free loopback port, behind the cluster gate
// (cluster_middleman.hpp, no token), prints
// "fake worker node: listening on 127.0.0.1:PORT", and answers every hello with the
// protocol number it was given, until it is killed.
//   fake_worker_node 999

#include <canopy/actor_system_setup.hpp>
#include <canopy/actors/cluster_middleman.hpp>
#include <canopy/messages/node_messages.hpp>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <cstdlib>
#include <iostream>
#include <thread>

using namespace canopy::messages;

int main(int argc, char** argv) {
  const auto protocol = static_cast<std::uint32_t>(argc > 1 ? std::atoi(argv[1]) : 999);
  canopy::engine_config config;
  caf::actor_system_config system_config;
  canopy::configure_actor_system(system_config, config,
                                 canopy::network_role::worker_node);
  caf::actor_system system{system_config};
  auto gate = system.spawn(
      [protocol](node_gate_actor::pointer) -> node_gate_actor::behavior_type {
        return {
            [=](hello_atom, const node_hello&) {
              return node_challenge{protocol, std::vector<std::uint8_t>(32, 1), {}};
            },
            [](auth_atom, const std::vector<std::uint8_t>&) {
              return node_announcement{};
            },
            [](ping_atom, std::uint64_t) { return true; },
            [](drain_atom, std::uint64_t) { return true; },
        };
      });
  auto middleman = canopy::actors::spawn_cluster_middleman(system, {});
  caf::scoped_actor self{system};
  std::uint16_t port = 0;
  self->request(middleman, caf::infinite, caf::publish_atom::value, std::uint16_t{0},
                caf::actor_cast<caf::strong_actor_ptr>(gate), system.message_types(gate),
                std::string("127.0.0.1"), true)
      .receive([&](std::uint16_t bound) { port = bound; },
               [&](caf::error& e) {
                 std::cerr << "fake worker node: " << system.render(e) << std::endl;
                 std::exit(1);
               });
  std::cout << "fake worker node: listening on 127.0.0.1:" << port << std::endl;
  for (;;)
    std::this_thread::sleep_for(std::chrono::hours(1));
}
