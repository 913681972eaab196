#include "kv/pass_kv.hpp"

namespace canopy::backends {

kv_rows pass_kv::sources(std::int64_t layer, const at::Tensor& k_new,
                         const at::Tensor& v_new) const {
  if (store_slots.numel() > 0)
    storage->write(layer, store_slots, pooled ? k_new : k_new.index_select(0, store_rows),
                   pooled ? v_new : v_new.index_select(0, store_rows));
  auto stored = storage->layer(layer);
  if (pooled)
    return stored;
  const auto [k_prefix, v_prefix] = stored.gather(prefix_slots);
  const auto zero = at::zeros({1, k_new.size(1), k_new.size(2)}, k_new.options());
  return storage->packed(at::cat({k_prefix, storage->as_stored(k_new), zero}),
                         at::cat({v_prefix, storage->as_stored(v_new), zero}));
}

} // namespace canopy::backends
