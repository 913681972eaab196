// The host's program: the C++ API and, in the host's own actor system, the typed actor
// handle. Exits 0 only when both answer a row that is a distribution over the mock's
// vocabulary, and the same row twice; prints what went wrong otherwise.
#include <canopy/actor_system_setup.hpp>
#include <canopy/engine.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <iostream>

namespace {

bool is_distribution(const at::Tensor& row, std::int64_t vocab) {
  return row.numel() == vocab && std::fabs(row.exp().sum().item<double>() - 1.0) < 1e-3;
}

} // namespace

int main() {
  canopy::engine_config config;
  config.backend = "mock";
  config.vocab_size = 300;
  const canopy::token_seq tokens{1, 2, 3};

  canopy::engine own{config};
  const auto direct = own.next_token_logprobs_sync(tokens);
  if (!is_distribution(direct, 300)) {
    std::cerr << "host: the C++ API answered no distribution\n";
    return 1;
  }

  caf::actor_system_config host_config;
  canopy::configure_actor_system(host_config, config, canopy::front_role(config));
  caf::actor_system host{host_config};
  canopy::engine embedded{host, config};
  caf::scoped_actor self{host};
  int status = 1;
  self->request(embedded.handle(), caf::infinite, canopy::messages::logprobs_atom::value,
                tokens)
      .receive(
          [&](const canopy::messages::shared_logprobs& row) {
            const auto tensor = canopy::to_tensor(row);
            status = is_distribution(tensor, 300) && at::equal(tensor, direct) ? 0 : 1;
            if (status != 0)
              std::cerr << "host: the typed handle's row differs from the C++ API's\n";
          },
          [&](const caf::error& e) { std::cerr << "host: " << host.render(e) << "\n"; });
  if (status == 0)
    std::cout << "host: both forms answered the same distribution over 300 tokens\n";
  return status;
}
