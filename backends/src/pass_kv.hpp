#pragma once
// A worker's preallocated KV tensors, and what one pass reads from and writes to them.
// Thread contract: the worker's thread only.

#include <ATen/ATen.h>

#include <vector>

namespace canopy::backends {

/// Per layer, K and V rows for `capacity` tokens: [capacity, KV, hd] each, allocated
/// once from the worker's KV byte budget.
class kv_tensors {
public:
  kv_tensors(std::int64_t layers, std::int64_t capacity, std::int64_t kv_heads,
             std::int64_t head_dim, const at::TensorOptions& options);
  at::Tensor& keys(std::int64_t layer) { return keys_[static_cast<std::size_t>(layer)]; }
  at::Tensor& values(std::int64_t layer) { return values_[static_cast<std::size_t>(layer)]; }

private:
  std::vector<at::Tensor> keys_, values_;
};

/// One pass's view of the pool: which rows its cached prefixes occupy and where the
/// KV of its new tokens goes.
struct pass_kv {
  kv_tensors* pool = nullptr;
  at::Tensor prefix_slots; // [P] int64: pool rows gathered as the prefix key source
  at::Tensor store_rows;   // [S] int64: packed rows whose KV is kept
  at::Tensor store_slots;  // [S] int64: the pool rows they go to

  /// The cached prefix KV of every item, item by item: ([P, KV, hd], [P, KV, hd]).
  std::pair<at::Tensor, at::Tensor> prefix(std::int64_t layer) const;
  /// Keeps the new tokens' KV of this layer ([T, KV, hd] each) where asked.
  void store(std::int64_t layer, const at::Tensor& k_new, const at::Tensor& v_new) const;
};

} // namespace canopy::backends
