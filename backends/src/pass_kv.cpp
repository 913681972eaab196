#include "pass_kv.hpp"

namespace canopy::backends {

kv_tensors::kv_tensors(std::int64_t layers, std::int64_t capacity, std::int64_t kv_heads,
                       std::int64_t head_dim, const at::TensorOptions& options) {
  // at::empty: the host pages are only touched when rows are written, so an unused
  // budget costs address space, not memory.
  for (std::int64_t l = 0; l < layers; ++l) {
    keys_.push_back(at::empty({capacity, kv_heads, head_dim}, options));
    values_.push_back(at::empty({capacity, kv_heads, head_dim}, options));
  }
}

std::pair<at::Tensor, at::Tensor> pass_kv::prefix(std::int64_t layer) const {
  return {pool->keys(layer).index_select(0, prefix_slots),
          pool->values(layer).index_select(0, prefix_slots)};
}

void pass_kv::store(std::int64_t layer, const at::Tensor& k_new, const at::Tensor& v_new) const {
  if (store_slots.numel() == 0)
    return;
  pool->keys(layer).index_copy_(0, store_slots, k_new.index_select(0, store_rows));
  pool->values(layer).index_copy_(0, store_slots, v_new.index_select(0, store_rows));
}

} // namespace canopy::backends
