#pragma once
// What a checkpoint must contain, given its config: the exact set of canonical tensor
// names and shapes, checked the same way for every file format, so a file that loads
// is one the models can run (no missing, extra or misshapen weight, no config that
// contradicts the weights).
//   llama-style (llama, mistral, qwen2, qwen3): model.embed_tokens.weight [V,D]
//          model.layers.N.self_attn.q_proj.weight [H*hd,D], k_proj/v_proj [KV*hd,D],
//          o_proj [D,H*hd]; with qkv_bias (qwen2) q_proj/k_proj/v_proj.bias [H*hd],
//          [KV*hd]; with qk_norm (qwen3) self_attn.q_norm/k_norm.weight [hd];
//          model.layers.N.mlp.gate_proj/up_proj [F,D], down_proj [D,F];
//          model.layers.N.input_layernorm.weight, post_attention_layernorm.weight [D];
//          model.norm.weight [D]; lm_head.weight [V,D] only when untied
//   gpt2:  transformer.wte.weight [V,D], transformer.wpe.weight [C,D]
//          transformer.h.N.ln_1/ln_2.{weight,bias} [D]
//          transformer.h.N.attn.c_attn.weight [D,3D] (Conv1D: [in,out]), bias [3D]
//          transformer.h.N.attn.c_proj.weight [D,D], bias [D]
//          transformer.h.N.mlp.c_fc.weight [D,F], bias [F]; mlp.c_proj.weight [F,D], bias
//          [D] transformer.ln_f.{weight,bias} [D]; lm_head.weight [V,D] only when untied
// Thread contract: pure functions.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/model_config.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace canopy::backends {

struct tensor_spec {
  std::string name;
  std::vector<std::int64_t> shape;
};

/// One line for messages: "llama (hidden 64, intermediate 172, layers 5, ...)".
std::string describe_config(const model_config& config);

/// Throws checkpoint_error "<source>: ..." when the config cannot describe a model:
/// a non-positive size, heads not divisible by kv heads, an odd llama head_dim (RoPE
/// rotates pairs), gpt2 with head_dim * heads != hidden or with a llama-style feature,
/// a non-positive eps or theta, rope scaling constants HF's formulas cannot use, a
/// negative sliding window,
/// bos/eos outside the vocabulary, sizes whose products overflow.
void validate_model_config(const model_config& config, const std::string& source);

/// The canonical tensors of a valid config, in a fixed order (embeddings, layers in
/// order, final norm, lm_head).
std::vector<tensor_spec> expected_tensors(const model_config& config);

/// Checks `tensors` against expected_tensors(config): throws checkpoint_error listing
/// shape mismatches, missing and unexpected tensors by name. A tensor's file is
/// tensor_files[name] when given (sharded checkpoints), else `source`.
void check_tensor_schema(const model_config& config,
                         const std::map<std::string, tensor_view>& tensors,
                         const std::string& source,
                         const std::map<std::string, std::string>& tensor_files = {});

/// validate_model_config + check_tensor_schema on a whole checkpoint.
void check_checkpoint(const checkpoint& ckpt);

} // namespace canopy::backends
