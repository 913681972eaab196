#pragma once
// Seeded synthetic LoRA adapters, for tests, benchmarks and `canopy make-adapter`: every
// projection of every layer adapted (PEFT's "all-linear"), factors drawn from
// synthetic_normal's portable stream, so the same spec for the same model gives the
// same bytes on every machine. Written as PEFT's save_pretrained writes an adapter, so
// that load_lora_adapter and PEFT itself read it.
// Thread contract: pure functions (of the file system, for the writer).

#include <canopy/backends/checkpoints/model_config.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace canopy::backends {

struct synthetic_lora_spec {
  std::int64_t rank = 4;
  double alpha = 8;     // scale alpha / rank
  double stddev = 0.05; // of every factor's elements
  std::uint64_t seed = 1;
};

/// One adapted weight's factors, row-major float32.
struct synthetic_lora_factors {
  std::int64_t out = 0, in = 0; // the adapted weight's shape
  std::vector<float> a;         // [rank, in]
  std::vector<float> b;         // [out, rank]
};

struct synthetic_lora {
  synthetic_lora_spec spec;
  /// Keyed by the canonical name of the weight each pair adapts (lora_adapted_weight).
  std::map<std::string, synthetic_lora_factors> factors;

  double scale() const { return spec.alpha / static_cast<double>(spec.rank); }
};

/// The adapter for a model of `base`. Throws std::invalid_argument naming the field when
/// the spec cannot describe one (rank < 1 or past the narrowest adapted projection,
/// alpha or stddev not positive and finite) or the base is not of the Llama family.
synthetic_lora make_synthetic_lora(const model_config& base,
                                   const synthetic_lora_spec& spec);

/// Writes `dir`/adapter_config.json and `dir`/adapter_model.safetensors, creating `dir`
/// if needed. Throws checkpoint_error naming the file when it cannot be written.
void write_lora_adapter(const synthetic_lora& adapter, const std::filesystem::path& dir);

} // namespace canopy::backends
