#include "transformer.hpp"

#include "gpt2_model.hpp"
#include "llama_model.hpp"

namespace canopy::backends {

std::unique_ptr<transformer> make_transformer(const checkpoint& ckpt, at::ScalarType dtype,
                                              at::Device device) {
  if (ckpt.config.arch == architecture::gpt2)
    return std::make_unique<gpt2_model>(ckpt, dtype, device);
  return std::make_unique<llama_model>(ckpt, dtype, device);
}

} // namespace canopy::backends
