#pragma once
// A PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors, as
// PEFT's save_pretrained writes it), read and checked against the model it adapts.
// An adapted weight W [out, in] computes y = W x + scale B (A x), with A [r, in] and
// B [out, r] the adapter's `lora_A` and `lora_B` and scale lora_alpha / r (or
// lora_alpha / sqrt(r) with `use_rslora`).
//
// Accepted: a Llama-family base (llama, mistral, qwen2, qwen3) with rotate_half q/k
// rows; `target_modules` a list among q_proj, k_proj, v_proj, o_proj, gate_proj,
// up_proj and down_proj, or "all-linear" (all seven: PEFT leaves the output head out);
// every layer adapted; tensors F32, F16 or BF16. Refused, each by name: any other
// peft_type or module, and every setting that would change the math if ignored (DoRA,
// biases, modules_to_save, fan_in_fan_out, per-layer ranks or alphas, a subset of
// layers, ...). A key this reader does not know is refused unless it holds null, false
// or an empty value, so a newer PEFT's feature is never silently dropped.
// Thread contract: reading and parsing are pure functions (of the file system, of the
// bytes); an adapter is an immutable value once built and may be read from any number
// of threads.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/lora_adapter_files.hpp>

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace canopy::backends {

/// The projections an adapter may target, by their HF module names.
inline constexpr std::array<const char*, 7> lora_module_names{
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

/// One adapted weight's low-rank factors.
struct lora_factors {
  tensor_view a; // lora_A: [r, in]
  tensor_view b; // lora_B: [out, r]
};

struct lora_adapter {
  std::string source; // the directory (for messages)
  std::int64_t rank = 0;
  double alpha = 0;
  bool rslora = false;
  double scale = 0; // alpha / rank, or alpha / sqrt(rank) with rslora
  std::vector<std::string>
      modules; // the targeted module names, in lora_module_names' order
  /// Keyed by the canonical name of the weight each pair adapts
  /// ("model.layers.3.self_attn.q_proj.weight").
  std::map<std::string, lora_factors> factors;
  std::shared_ptr<const void> storage; // keeps the viewed bytes alive (or null)
};

/// The canonical name of the weight that `module` (one of lora_module_names) adapts in
/// `layer`: "model.layers.3.self_attn.q_proj.weight",
/// "model.layers.3.mlp.up_proj.weight".
std::string lora_adapted_weight(std::int64_t layer, const std::string& module);

/// The files of the adapter directory `dir`. Throws checkpoint_error naming the
/// directory when it is not one, or when its files hold more than `max_bytes`.
lora_adapter_files read_lora_adapter_files(const std::filesystem::path& dir,
                                           std::uint64_t max_bytes = UINT64_MAX);

/// The adapter in `files` for a model of `base` (from `base_source`, named in
/// messages); its factors view `files.weights`, which must outlive it. Throws
/// checkpoint_error naming the file, and the key or tensor, on any problem.
lora_adapter parse_lora_adapter(const lora_adapter_files& files, const model_config& base,
                                const std::string& base_source);

/// parse_lora_adapter of read_lora_adapter_files(dir); the adapter keeps the files.
lora_adapter load_lora_adapter(const std::filesystem::path& dir, const model_config& base,
                               const std::string& base_source);

} // namespace canopy::backends
