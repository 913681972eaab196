#pragma once
// Loading an HF checkpoint directory: config.json (see hf_config.hpp) and the weights
// as model.safetensors, or as shards listed by model.safetensors.index.json
// ({"weight_map": {tensor: shard file}}; each shard is mapped once). Weights are not
// copied: views point into the mapped files, which the checkpoint keeps alive.
// Names are normalized to the canonical ones (checkpoint_schema.hpp): GPT-2 files
// saved from GPT2Model lack the "transformer." prefix and may carry the causal-mask
// buffers h.N.attn.bias / h.N.attn.masked_bias, which are not parameters and are
// dropped (as are llama's model.layers.N.self_attn.rotary_emb.inv_freq buffers, which
// some conversions saved); a tied checkpoint that still carries lm_head.weight of the
// embedding's shape has it dropped too (HF ignores it when tied). Thread contract: a pure
// function of the file system.

#include <canopy/backends/checkpoints/checkpoint.hpp>

#include <filesystem>

namespace canopy::backends {

/// Throws checkpoint_error naming the file (and tensor) on any problem.
checkpoint load_hf_checkpoint(const std::filesystem::path& dir);

/// The config of an HF directory from its config.json alone (the weights need not
/// be there).
model_config load_hf_config(const std::filesystem::path& dir);

} // namespace canopy::backends
