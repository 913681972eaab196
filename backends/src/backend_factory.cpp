#include <canopy/backends/backend_factory.hpp>

#include <stdexcept>

namespace canopy::backends {

std::unique_ptr<backend_i> make_backend(const backend_spec& spec) {
  if (spec.kind == "mock") {
    // The mock computes on the host; accepting "cuda:N" would let a configuration
    // look as if it exercised a device when it does not.
    if (spec.device != "cpu")
      throw std::invalid_argument("backend 'mock' runs on the CPU only; device '" +
                                  spec.device + "' is not supported (use \"cpu\")");
    return make_mock_backend(spec.mock);
  }
  throw std::invalid_argument("unknown backend '" + spec.kind + "' (known: mock)");
}

} // namespace canopy::backends
