#include <canopy/actor_system_setup.hpp>

#include <canopy/actors/engine_actors.hpp>
#include <canopy/error.hpp>
#include <canopy/messages/registration.hpp>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/thread_hook.hpp>

#include <chrono>
#include <sys/prctl.h>

namespace canopy {

namespace {

// Note [poll sleep]
// A CAF worker thread that finds no work polls again, sleeping
// work-stealing.moderate-sleep-duration (50 us) between polls for its first ~25 ms
// idle. Linux rounds such sleeps up by the thread's timer slack (50 us), so a message
// to an idle thread waited ~50-100 us, and a lone query crosses threads four times.
// Shorter sleeps need the slack cut as well, so every thread of the system gets a
// 1 us slack. Measured on 2 cores, stories260K decode, one compute thread
// (`scripts/peers/bench_llama_cpp.py --models stories260K --workloads decode`, median
// of 3): 4,019 queries/s by default, 6,677 with `--settings "--scheduler_threads 1
// --scheduler_poll_sleep_us 3"`; the polling costs the zero-cost mock's cache hits
// ~20% (`canopy bench --backend mock --workload hits`: 966k against 786k) and takes a
// core from passes when two threads poll, hence not the default.
class timer_slack_hook final : public caf::thread_hook {
public:
  void init(caf::actor_system&) override {}
  void thread_started() override { prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL); }
  void thread_terminates() override {}
};

} // namespace

network_role front_role(const engine_config& config) {
  return config.remote_workers.empty() ? network_role::none : network_role::front;
}

void configure_actor_system(caf::actor_system_config& system_config,
                            const engine_config& config, network_role role) {
  messages::add_message_types(system_config);
  system_config.add_thread_hook<timer_slack_hook>();
  system_config.set("work-stealing.moderate-sleep-duration",
                    caf::timespan{std::chrono::nanoseconds(static_cast<std::int64_t>(
                        config.scheduler_poll_sleep_us * 1000))});
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
  const std::string fix =
      ": call canopy::configure_actor_system on the actor system's config";
  if (!system.has_middleman())
    throw error(errc::invalid_config, "remote workers need CAF's middleman" + fix);
  if (config.tls() && !system.has_openssl_manager())
    throw error(errc::invalid_config, "tls_cert needs CAF's OpenSSL module" + fix);
}

} // namespace canopy
