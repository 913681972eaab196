#include <canopy/backends/checkpoints/synthetic_lora_adapter.hpp>

#include <canopy/backends/checkpoints/checkpoint_schema.hpp>
#include <canopy/backends/checkpoints/checkpoint_writer.hpp>
#include <canopy/backends/checkpoints/lora_adapter.hpp>
#include <canopy/backends/checkpoints/synthetic_checkpoint.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace canopy::backends {

namespace {

std::vector<float> normal_values(const synthetic_lora_spec& spec,
                                 const std::string& stream, std::int64_t count) {
  std::vector<float> out(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<float>(spec.stddev * synthetic_normal(spec.seed, stream, i));
  return out;
}

/// PEFT's name for a factor of the weight `weight` ("model.layers.0.mlp.up_proj.weight"):
/// "base_model.model.model.layers.0.mlp.up_proj.lora_A.weight".
std::string peft_name(const std::string& weight, const char* factor) {
  const auto module = weight.substr(0, weight.size() - std::strlen(".weight"));
  return "base_model.model." + module + "." + factor + ".weight";
}

} // namespace

synthetic_lora make_synthetic_lora(const model_config& base,
                                   const synthetic_lora_spec& spec) {
  if (spec.rank < 1)
    throw std::invalid_argument("synthetic_lora_spec: rank must be positive (got " +
                                std::to_string(spec.rank) + ")");
  if (!(spec.alpha > 0) || !std::isfinite(spec.alpha))
    throw std::invalid_argument("synthetic_lora_spec: alpha must be positive");
  if (!(spec.stddev > 0) || !std::isfinite(spec.stddev))
    throw std::invalid_argument("synthetic_lora_spec: stddev must be positive");
  if (!llama_style(base.arch))
    throw std::invalid_argument(
        std::string("synthetic_lora_spec: LoRA adapts Llama-family "
                    "models, not ") +
        to_string(base.arch));
  std::map<std::string, std::vector<std::int64_t>> shapes;
  std::int64_t narrowest = INT64_MAX;
  for (const auto& tensor : expected_tensors(base)) {
    shapes[tensor.name] = tensor.shape;
    if (tensor.shape.size() == 2 && tensor.name.rfind("model.layers.", 0) == 0)
      narrowest = std::min({narrowest, tensor.shape[0], tensor.shape[1]});
  }
  // A rank past the narrowest projection adds parameters, not expressiveness; the cap
  // also keeps a mistyped rank from allocating without bound.
  if (spec.rank > narrowest)
    throw std::invalid_argument(
        "synthetic_lora_spec: rank must be at most " + std::to_string(narrowest) +
        " (the narrowest adapted projection), got " + std::to_string(spec.rank));
  synthetic_lora out;
  out.spec = spec;
  for (std::int64_t layer = 0; layer < base.num_layers; ++layer)
    for (const char* module : lora_module_names) {
      const auto weight = lora_adapted_weight(layer, module);
      const auto& shape = shapes.at(weight);
      synthetic_lora_factors f;
      f.out = shape[0];
      f.in = shape[1];
      f.a = normal_values(spec, "lora_A:" + weight, spec.rank * f.in);
      f.b = normal_values(spec, "lora_B:" + weight, f.out * spec.rank);
      out.factors.emplace(weight, std::move(f));
    }
  return out;
}

void write_lora_adapter(const synthetic_lora& adapter, const std::filesystem::path& dir) {
  create_output_directory(dir);
  const auto rank = adapter.spec.rank;
  std::map<std::string, tensor_view> tensors;
  for (const auto& [weight, f] : adapter.factors) {
    tensors[peft_name(weight, "lora_A")] = tensor_view{
        weight_dtype::f32, {rank, f.in}, reinterpret_cast<const std::byte*>(f.a.data())};
    tensors[peft_name(weight, "lora_B")] = tensor_view{
        weight_dtype::f32, {f.out, rank}, reinterpret_cast<const std::byte*>(f.b.data())};
  }
  write_safetensors_file(dir / "adapter_model.safetensors", tensors, {{"format", "pt"}});
  const nlohmann::json config{{"peft_type", "LORA"},
                              {"r", rank},
                              {"lora_alpha", adapter.spec.alpha},
                              {"target_modules", "all-linear"},
                              {"bias", "none"}};
  write_file(dir / "adapter_config.json", config.dump(2));
}

} // namespace canopy::backends
