#pragma once
// A worker's preallocated KV tensors, and what one pass reads from and writes to them.
// Thread contract: the worker's thread only.

#include <ATen/ATen.h>

#include <utility>
#include <vector>

namespace canopy::backends {

/// Per layer, K and V rows for `capacity` tokens plus one zero row that padded
/// attention reads: [capacity + 1, KV, hd] each, allocated once from the worker's KV
/// byte budget.
class kv_tensors {
public:
  kv_tensors(std::int64_t layers, std::int64_t capacity, std::int64_t kv_heads,
             std::int64_t head_dim, const at::TensorOptions& options);
  at::Tensor& keys(std::int64_t layer) { return keys_[static_cast<std::size_t>(layer)]; }
  at::Tensor& values(std::int64_t layer) { return values_[static_cast<std::size_t>(layer)]; }
  std::int64_t zero_row() const { return zero_row_; }

private:
  std::vector<at::Tensor> keys_, values_;
  std::int64_t zero_row_;
};

/// One pass's view of the pool (Note [key sources] in pass_layout.hpp).
struct pass_kv {
  kv_tensors* pool = nullptr;
  bool pooled = true;      // every new token has a pool row for this pass
  at::Tensor store_rows;   // [S] int64: packed rows written to the pool (pooled: all)
  at::Tensor store_slots;  // [S] int64: the pool rows they go to
  at::Tensor prefix_slots; // packed: [P] int64, the prefix rows to gather

  /// Writes this layer's new KV ([T, KV, hd] each) where asked and returns the key
  /// and value sources the layout's key indices point into.
  std::pair<at::Tensor, at::Tensor> sources(std::int64_t layer, const at::Tensor& k_new,
                                            const at::Tensor& v_new) const;
};

} // namespace canopy::backends
