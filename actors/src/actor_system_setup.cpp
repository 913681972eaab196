#include <canopy/actor_system_setup.hpp>

#include <canopy/actors/engine_actors.hpp>
#include <canopy/error.hpp>
#include <canopy/messages/registration.hpp>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>

namespace canopy {

network_role front_role(const engine_config& config) {
  return config.remote_workers.empty() ? network_role::none : network_role::front;
}

void configure_actor_system(caf::actor_system_config& system_config,
                            const engine_config& config, network_role role) {
  messages::add_message_types(system_config);
  if (role == network_role::none)
    return;
  system_config.load<caf::io::middleman>();
  const auto timeout = actors::from_ms(config.worker_timeout_ms);
  system_config.set("middleman.heartbeat-interval", timeout / 4);
  system_config.set("middleman.connection-timeout", timeout);
  if (config.tls()) {
    system_config.load<caf::openssl::manager>();
    system_config.openssl_certificate = config.tls_cert;
    system_config.openssl_key = config.tls_key;
    system_config.openssl_cafile = config.tls_ca;
  }
}

void check_actor_system(caf::actor_system& system, const engine_config& config,
                        network_role role) {
  if (role == network_role::none)
    return;
  const std::string fix = ": call canopy::configure_actor_system on the actor system's config";
  if (!system.has_middleman())
    throw error(errc::invalid_config, "remote workers need CAF's middleman" + fix);
  if (config.tls() && !system.has_openssl_manager())
    throw error(errc::invalid_config, "tls_cert needs CAF's OpenSSL module" + fix);
}

} // namespace canopy
