#pragma once
// A worker's KV storage: per layer, K and V planes of `capacity` token rows plus one
// zero row that padded attention reads, in the worker's kv_format, allocated once from
// its KV byte budget. And kv_rows, what one layer's attention reads keys from.
// Thread contract: the worker's thread only.

#include "kv_format.hpp"

#include <ATen/ATen.h>

#include <memory>
#include <utility>
#include <vector>

namespace canopy::backends {

/// One layer's keys and values as attention reads them: the storage's planes in its
/// format, or a pass's packed keys in the compute dtype (Note [key sources]).
struct kv_rows {
  const kv_format* format = nullptr;
  kv_plane keys, values;
  at::ScalarType compute = at::kFloat;

  /// Rows `index` [N] of K and of V, each [N, KV, hd] in the compute dtype.
  std::pair<at::Tensor, at::Tensor> gather(const at::Tensor& index) const {
    return {format->gather(keys, index, compute), format->gather(values, index, compute)};
  }
};

class kv_storage {
public:
  kv_storage(std::unique_ptr<kv_format> format, at::ScalarType compute, std::int64_t layers,
             std::int64_t capacity, std::int64_t kv_heads, std::int64_t head_dim,
             at::Device device);

  const kv_format& format() const { return *format_; }
  std::int64_t zero_row() const { return zero_row_; }

  /// Stores new KV k, v [S, KV, hd] of `layer` at rows `slots` [S].
  void write(std::int64_t layer, const at::Tensor& slots, const at::Tensor& k,
             const at::Tensor& v);
  /// Stores one token's float32 k, v [KV * hd] of `layer` at row `slot` (CPU).
  void write_row(std::int64_t layer, std::int64_t slot, const float* k, const float* v);
  /// What attention reads of `layer` in place.
  kv_rows layer(std::int64_t layer) const;
  /// Packed keys [N, KV, hd] in the compute dtype as attention reads them.
  kv_rows packed(at::Tensor keys, at::Tensor values) const;
  /// x [S, KV, hd] as it reads back once stored (a packed pass's new KV reads what
  /// a pooled one would, so a full storage does not change an answer).
  at::Tensor as_stored(const at::Tensor& x) const;

private:
  std::unique_ptr<kv_format> format_;
  std::unique_ptr<kv_format> compute_format_; // packed keys
  at::ScalarType compute_;
  std::vector<kv_plane> keys_, values_;
  std::int64_t zero_row_;
};

} // namespace canopy::backends
