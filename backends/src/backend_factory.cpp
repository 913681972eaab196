#include <canopy/backends/backend_factory.hpp>

#include <canopy/backends/checkpoint.hpp>
#include <canopy/backends/torch_backend.hpp>

#include <stdexcept>

namespace canopy::backends {

synthetic_spec builtin_model() {
  synthetic_spec spec;
  spec.arch = architecture::llama;
  spec.hidden = 256;
  spec.layers = 4;
  spec.heads = 8;
  spec.kv_heads = 4;
  spec.vocab = 4096;
  spec.context = 2048;
  spec.seed = 1;
  return spec;
}

std::unique_ptr<backend_i> make_backend(const backend_spec& spec) {
  if (spec.kind == "mock") {
    // The mock computes on the host; accepting "cuda:N" would let a configuration
    // look as if it exercised a device when it does not.
    if (spec.device != "cpu")
      throw std::invalid_argument("backend 'mock' runs on the CPU only; device '" +
                                  spec.device + "' is not supported (use \"cpu\")");
    return make_mock_backend(spec.mock);
  }
  if (spec.kind == "torch") {
    torch_options options;
    options.device = spec.device;
    options.dtype = spec.dtype;
    options.kv_budget_bytes = spec.kv_budget_bytes;
    options.threads = spec.threads;
    return make_torch_backend(spec.model.empty() ? make_synthetic_checkpoint(builtin_model())
                                                 : load_checkpoint(spec.model),
                              options);
  }
  throw std::invalid_argument("unknown backend '" + spec.kind + "' (known: mock, torch)");
}

} // namespace canopy::backends
