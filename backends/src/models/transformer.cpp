#include "models/transformer.hpp"

#include "models/gpt2_model.hpp"
#include "models/llama_model.hpp"

#include <stdexcept>
#include <string>

namespace canopy::backends {

std::uint64_t transformer::matmul_flops(std::int64_t tokens, std::int64_t key_visits,
                                        std::int64_t rows) const {
  const auto& c = config();
  const auto D = c.hidden_size, F = c.intermediate_size, hd = c.head_dim;
  const auto H = c.num_heads, KV = c.num_kv_heads;
  // Multiply-adds per token of one layer's weight matrices.
  const auto per_token = c.arch == architecture::gpt2
                             ? D * 3 * D + D * D + 2 * D * F
                             : D * (H + 2 * KV) * hd + H * hd * D + 3 * D * F;
  const auto layers = 2 * per_token * tokens + 2 * 2 * H * hd * key_visits;
  return static_cast<std::uint64_t>(c.num_layers * layers + 2 * D * c.vocab_size * rows);
}

std::unique_ptr<transformer> make_transformer(const checkpoint& ckpt,
                                              at::ScalarType dtype, at::Device device,
                                              std::optional<weight_format> format) {
  if (format && (dtype != at::kFloat || !device.is_cpu()))
    throw std::invalid_argument("weight_dtype " + weight_format_name(*format) +
                                " runs on the CPU with dtype float32");
  if (ckpt.config.arch == architecture::gpt2) {
    if (format)
      throw std::invalid_argument("weight_dtype " + weight_format_name(*format) +
                                  " serves the Llama family; GPT-2 runs with float "
                                  "weights");
    return std::make_unique<gpt2_model>(ckpt, dtype, device);
  }
  return std::make_unique<llama_model>(ckpt, dtype, device, format);
}

} // namespace canopy::backends
