#pragma once
// A decoder-only transformer run over one ragged pass: the packed new tokens of all
// items go through every layer together; attention reads each item's cached prefix
// from the pool and its own new KV. Implemented by llama_model and gpt2_model.
// Thread contract: const after construction; forward() from the worker's thread.

#include "kv/pass_kv.hpp"
#include "models/lora_weights.hpp"
#include "models/ragged_attention.hpp"
#include "models/weight_format.hpp"

#include <canopy/backends/checkpoints/checkpoint.hpp>

#include <ATen/ATen.h>

#include <memory>
#include <optional>

namespace canopy::backends {

class transformer {
public:
  virtual ~transformer() = default;
  virtual const model_config& config() const = 0;
  /// Memory the weights take on their device.
  virtual std::size_t weight_bytes() const = 0;
  /// Of those, the tables a pass reads by row, a row per token (token and position
  /// embeddings), less any the LM head multiplies by as well (tied blocks): what a decode
  /// step does not read whole.
  virtual std::size_t lookup_table_bytes() const = 0;
  /// tokens: [T] int64 packed new tokens; rows: [R] int64 packed rows whose next-token
  /// distribution is wanted; `adapters`: the spans of tokens computed under a LoRA
  /// adapter (the Llama family only; a GPT-2 throws std::invalid_argument for any).
  /// Stores new KV through `kv`. Returns [R, V] float32 natural-log probabilities on the
  /// model's device.
  virtual at::Tensor forward(const at::Tensor& tokens, const device_layout& layout,
                             const pass_kv& kv, const at::Tensor& rows,
                             const lora_spans& adapters) const = 0;

  /// Readies what a forward reads for positions [0, end) (RoPE's tables), so that a
  /// pass reaching no further allocates nothing for them. Returns a number that changes
  /// whenever those tensors move: a step recorded before (recorded_step.hpp) read the old
  /// ones and must be recorded again. Throws std::invalid_argument past the context.
  virtual std::int64_t prepare_positions(std::int64_t end) const = 0;

  /// FLOPs of the matrix products of a pass: every layer's projections for each of
  /// `tokens`, attention scores and weighted values for `key_visits` (query, key)
  /// pairs, and the head for `rows` rows.
  std::uint64_t matmul_flops(std::int64_t tokens, std::int64_t key_visits,
                             std::int64_t rows) const;
};

/// Builds the model the checkpoint describes, weights converted to `dtype` on `device`,
/// its matrices in `format` when set (the Llama family, float32 on the CPU; throws
/// std::invalid_argument otherwise).
std::unique_ptr<transformer> make_transformer(const checkpoint& ckpt,
                                              at::ScalarType dtype, at::Device device,
                                              std::optional<weight_format> format);

} // namespace canopy::backends
