#pragma once
// A PEFT LoRA adapter for a test model, written as PEFT writes one (all-linear, rank 4,
// alpha 8, seeded random factors in float32), and the same model with it merged:
// what every adapted path must agree with.
// Thread contract: plain functions.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/checkpoint_writer.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace canopy::testing {

using backends::checkpoint;
using backends::tensor_view;
using backends::weight_dtype;

inline constexpr std::int64_t lora_rank = 4;
inline constexpr double lora_alpha = 8; // scale 2

/// A float32 weight's values (every oracle model is stored in float32).
inline std::vector<double> values_of(const tensor_view& v) {
  EXPECT_EQ(v.dtype, weight_dtype::f32);
  std::vector<float> f(static_cast<std::size_t>(backends::numel(v)));
  std::memcpy(f.data(), v.data, f.size() * sizeof(float));
  return {f.begin(), f.end()};
}

/// Writes an all-linear adapter for `base` into `dir` (random factors, seeded) and
/// returns the same model with it merged: W + scale B A rounded once to float32.
inline checkpoint write_lora_adapter(const checkpoint& base,
                                     const std::filesystem::path& dir) {
  checkpoint merged = base;
  auto storage = std::make_shared<std::vector<std::vector<float>>>();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::map<std::string, std::vector<float>> factors;
  std::map<std::string, std::vector<std::int64_t>> shapes;
  const std::vector<std::pair<std::string, std::string>> modules{
      {"self_attn", "q_proj"}, {"self_attn", "k_proj"}, {"self_attn", "v_proj"},
      {"self_attn", "o_proj"}, {"mlp", "gate_proj"},    {"mlp", "up_proj"},
      {"mlp", "down_proj"}};
  storage->reserve(static_cast<std::size_t>(base.config.num_layers) * modules.size());
  for (std::int64_t l = 0; l < base.config.num_layers; ++l)
    for (const auto& [block, module] : modules) {
      const std::string path =
          "model.layers." + std::to_string(l) + "." + block + "." + module;
      const auto& w = base.tensors.at(path + ".weight");
      const auto rows = w.shape[0], inputs = w.shape[1];
      std::vector<float> a(static_cast<std::size_t>(lora_rank * inputs)),
          b(static_cast<std::size_t>(rows * lora_rank));
      for (auto& x : a)
        x = normal(rng);
      for (auto& x : b)
        x = normal(rng);
      const auto original = values_of(w);
      std::vector<float> sum(original.size());
      for (std::int64_t o = 0; o < rows; ++o)
        for (std::int64_t i = 0; i < inputs; ++i) {
          double delta = 0;
          for (std::int64_t k = 0; k < lora_rank; ++k)
            delta += double{b[static_cast<std::size_t>(o * lora_rank + k)]} *
                     a[static_cast<std::size_t>(k * inputs + i)];
          sum[static_cast<std::size_t>(o * inputs + i)] =
              static_cast<float>(original[static_cast<std::size_t>(o * inputs + i)] +
                                 lora_alpha / lora_rank * delta);
        }
      storage->push_back(std::move(sum));
      merged.tensors[path + ".weight"] =
          tensor_view{weight_dtype::f32, w.shape,
                      reinterpret_cast<const std::byte*>(storage->back().data())};
      const std::string name = "base_model.model." + path;
      shapes[name + ".lora_A.weight"] = {lora_rank, inputs};
      shapes[name + ".lora_B.weight"] = {rows, lora_rank};
      factors[name + ".lora_A.weight"] = std::move(a);
      factors[name + ".lora_B.weight"] = std::move(b);
    }
  std::map<std::string, tensor_view> tensors;
  for (const auto& [name, values] : factors)
    tensors[name] = tensor_view{weight_dtype::f32, shapes.at(name),
                                reinterpret_cast<const std::byte*>(values.data())};
  backends::write_safetensors_file(dir / "adapter_model.safetensors", tensors);
  const nlohmann::json config{{"peft_type", "LORA"},
                              {"r", lora_rank},
                              {"lora_alpha", lora_alpha},
                              {"target_modules", "all-linear"},
                              {"bias", "none"}};
  std::ofstream(dir / "adapter_config.json") << config.dump();
  merged.storage =
      std::make_shared<std::pair<std::shared_ptr<const void>, decltype(storage)>>(
          base.storage, storage);
  return merged;
}

} // namespace canopy::testing
