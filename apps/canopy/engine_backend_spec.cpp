#include "engine_backend_spec.hpp"

#include <chrono>

namespace canopy::app {

namespace {
std::chrono::nanoseconds from_us(double us) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double, std::micro>(us));
}
} // namespace

backends::backend_spec engine_backend_spec(const engine_config& config) {
  backends::backend_spec spec;
  spec.kind = config.backend;
  spec.device = config.device_list().front();
  spec.mock.vocab_size = config.vocab_size;
  spec.mock.context_length = config.context_length;
  spec.mock.kv_bytes_per_token = config.mock_kv_bytes_per_token;
  spec.mock.seed = config.mock_seed;
  spec.mock.cost_per_pass = from_us(config.mock_cost_per_pass_us);
  spec.mock.cost_per_token = from_us(config.mock_cost_per_token_us);
  return spec;
}

} // namespace canopy::app
