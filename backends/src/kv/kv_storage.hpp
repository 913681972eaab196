#pragma once
// A worker's KV storage: per layer, K and V planes of `capacity` token rows plus one
// zero row that padded attention reads, in the worker's kv_format, allocated once from
// its KV byte budget, and optionally the residual copies of its newest tokens
// (kv_residual.hpp). And kv_rows, what one layer's attention reads keys from.
// Thread contract: the worker's thread only.

#include "kv/kv_format.hpp"
#include "kv/kv_residual.hpp"

#include <ATen/ATen.h>

#include <memory>
#include <utility>
#include <vector>

namespace canopy::backends {

/// One layer's keys and values as attention reads them: the storage's planes in its
/// format (and residual copies), or a pass's packed keys in the compute dtype (Note
/// [key sources]).
struct kv_rows {
  const kv_format* format = nullptr;
  kv_plane keys, values;
  at::ScalarType compute = at::kFloat;
  const kv_residual* residual = nullptr; // copies that replace stored rows; null: none
  std::int64_t layer = 0;                // of `residual`

  /// Rows `index` [N] of K and of V, each [N, KV, hd] in the compute dtype.
  std::pair<at::Tensor, at::Tensor> gather(const at::Tensor& index) const;
  /// CPU: the float32 K (or V) rows when attention may read them in place, else null.
  const float* in_place(bool of_keys) const;
  /// CPU: head `head` of K (or V) rows[0..n) as float32 into out [n, hd].
  void read_head(bool of_keys, const std::int64_t* rows, std::int64_t n,
                 std::int64_t head, float* out) const;
};

class kv_storage {
public:
  /// `placement`: the device, and pinned memory for a host tier below a CUDA device.
  /// `residual_tokens` > 0: that many newest tokens keep compute-dtype copies.
  kv_storage(std::unique_ptr<kv_format> format, at::ScalarType compute,
             std::int64_t layers, std::int64_t capacity, std::int64_t kv_heads,
             std::int64_t head_dim, at::TensorOptions placement,
             std::int64_t residual_tokens = 0);

  const kv_format& format() const { return *format_; }
  std::int64_t zero_row() const { return zero_row_; }

  /// A pass will store new KV at `slots`, in this order, in every layer.
  void begin_pass(const std::vector<std::int64_t>& slots);
  /// Stores new KV k, v [S, KV, hd] of `layer` at rows `slots` [S] (begin_pass's).
  void write(std::int64_t layer, const at::Tensor& slots, const at::Tensor& k,
             const at::Tensor& v);
  /// Stores one token's float32 k, v [KV * hd] of `layer` at row `slot` (CPU).
  void write_row(std::int64_t layer, std::int64_t slot, const float* k, const float* v);
  /// What attention reads of `layer` in place.
  kv_rows layer(std::int64_t layer) const;
  /// Packed keys [N, KV, hd] in the compute dtype as attention reads them.
  kv_rows packed(at::Tensor keys, at::Tensor values) const;
  /// Copies rows `from` [N] of `source` (another tier, maybe another format and
  /// device) to rows `to` [N] of this storage, in every layer: byte for byte when both
  /// store the same format, else through the compute dtype (lossy into int8).
  void copy_rows(const kv_storage& source, const std::vector<std::int64_t>& from,
                 const std::vector<std::int64_t>& to);
  /// x [S, KV, hd] as it reads back once stored, the newest residual_tokens exact (a
  /// packed pass's new KV reads what a pooled one would, so a full storage does not
  /// change an answer).
  at::Tensor as_stored(const at::Tensor& x) const;

private:
  std::unique_ptr<kv_format> format_;
  std::unique_ptr<kv_format> compute_format_; // packed keys
  at::ScalarType compute_;
  std::vector<kv_plane> keys_, values_;
  std::int64_t zero_row_;
  std::unique_ptr<kv_residual> residual_; // null: no residual tokens
};

} // namespace canopy::backends
