#include "pass_kv.hpp"

namespace canopy::backends {

kv_tensors::kv_tensors(std::int64_t layers, std::int64_t capacity, std::int64_t kv_heads,
                       std::int64_t head_dim, const at::TensorOptions& options)
    : zero_row_(capacity) {
  // at::empty: host pages are only touched when rows are written, so an unused budget
  // costs address space, not memory. Only the padding row must hold zeros.
  for (std::int64_t l = 0; l < layers; ++l) {
    keys_.push_back(at::empty({capacity + 1, kv_heads, head_dim}, options));
    values_.push_back(at::empty({capacity + 1, kv_heads, head_dim}, options));
    keys_.back()[zero_row_].zero_();
    values_.back()[zero_row_].zero_();
  }
}

std::pair<at::Tensor, at::Tensor> pass_kv::sources(std::int64_t layer, const at::Tensor& k_new,
                                                   const at::Tensor& v_new) const {
  auto& keys = pool->keys(layer);
  auto& values = pool->values(layer);
  if (store_slots.numel() > 0) {
    keys.index_copy_(0, store_slots, pooled ? k_new : k_new.index_select(0, store_rows));
    values.index_copy_(0, store_slots, pooled ? v_new : v_new.index_select(0, store_rows));
  }
  if (pooled)
    return {keys, values};
  const auto zero = at::zeros({1, k_new.size(1), k_new.size(2)}, k_new.options());
  return {at::cat({keys.index_select(0, prefix_slots), k_new, zero}),
          at::cat({values.index_select(0, prefix_slots), v_new, zero})};
}

} // namespace canopy::backends
