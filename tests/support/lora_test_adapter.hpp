#pragma once
// A PEFT LoRA adapter for a test model (make_synthetic_lora's: all-linear, rank 4,
// alpha 8, float32), and the same model with it merged, from the generator's own
// factors rather than from what the loader read: what every adapted path must agree
// with.
// Thread contract: plain functions.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/synthetic_lora_adapter.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
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

/// Writes an all-linear adapter for `base` into `dir` (synthetic factors, seeded) and
/// returns the same model with it merged: W + scale B A rounded once to float32.
inline checkpoint write_lora_adapter(const checkpoint& base,
                                     const std::filesystem::path& dir,
                                     std::uint64_t seed = 7) {
  backends::synthetic_lora_spec spec;
  spec.rank = lora_rank;
  spec.alpha = lora_alpha;
  spec.seed = seed;
  const auto adapter = backends::make_synthetic_lora(base.config, spec);
  backends::write_lora_adapter(adapter, dir);
  checkpoint merged = base;
  auto storage = std::make_shared<std::vector<std::vector<float>>>();
  storage->reserve(adapter.factors.size());
  for (const auto& [weight, f] : adapter.factors) {
    const auto& w = base.tensors.at(weight);
    EXPECT_EQ(w.shape, (std::vector<std::int64_t>{f.out, f.in})) << weight;
    const auto original = values_of(w);
    std::vector<float> sum(original.size());
    for (std::int64_t o = 0; o < f.out; ++o)
      for (std::int64_t i = 0; i < f.in; ++i) {
        double delta = 0;
        for (std::int64_t k = 0; k < lora_rank; ++k)
          delta += double{f.b[static_cast<std::size_t>(o * lora_rank + k)]} *
                   f.a[static_cast<std::size_t>(k * f.in + i)];
        const auto at = static_cast<std::size_t>(o * f.in + i);
        sum[at] = static_cast<float>(original[at] + adapter.scale() * delta);
      }
    storage->push_back(std::move(sum));
    merged.tensors[weight] =
        tensor_view{weight_dtype::f32, w.shape,
                    reinterpret_cast<const std::byte*>(storage->back().data())};
  }
  merged.storage =
      std::make_shared<std::pair<std::shared_ptr<const void>, decltype(storage)>>(
          base.storage, storage);
  return merged;
}

} // namespace canopy::testing
