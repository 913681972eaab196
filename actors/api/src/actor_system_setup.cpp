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
// A CAF worker thread that finds no work polls again: 100 times at once, then 500 times
// sleeping work-stealing.moderate-sleep-duration between polls (CAF's default 50 us:
// the first ~25 ms idle), then it waits on a condition variable that the next message
// for it signals. Linux rounds such sleeps up by the thread's timer slack (50 us), so a
// message to a briefly idle thread waited ~50-100 us, and a lone query crosses threads
// four times; every thread of the system gets a 1 us slack, so that a sleep means what
// it says. Canopy's default is no sleep: the 600 polls take well under a millisecond,
// after which an idle thread is woken by the message itself. Measured on 2 cores (AMD
// EPYC Zen 5), one compute thread, alternating: stories260K decode (`canopy bench
// --model ../shared/models/stories260K/hf --workload decode,smc,scoring --steps 256
// --threads_per_worker 1 --scheduler_poll_sleep_us S`) 7,769 / 7,946 queries/s with 0
// against 5,261 / 5,395 with 50, its smc and scoring alike; the 110M Llama's decode,
// smc and scoring alike within the machine's noise. The cost: the zero-cost mock's
// cache hits and misses through the actors, 1.03-1.05M and 185-194k queries/s against
// 1.28-1.35M and 211-238k (`canopy bench --backend mock --workload hits,misses`), both
// several times their goals.
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
