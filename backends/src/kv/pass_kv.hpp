#pragma once
// What one pass reads from and writes to the worker's KV storage.
// Thread contract: the worker's thread only.

#include "kv/kv_storage.hpp"

#include <ATen/ATen.h>

namespace canopy::backends {

/// One pass's view of the storage (Note [key sources] in pass_layout.hpp).
struct pass_kv {
  kv_storage* storage = nullptr;
  bool pooled = true;      // every new token has a storage row for this pass
  at::Tensor store_rows;   // [S] int64: packed rows written to the storage (pooled: all)
  at::Tensor store_slots;  // [S] int64: the storage rows they go to
  at::Tensor prefix_slots; // packed: [P] int64, the prefix rows to gather

  /// Writes this layer's new KV ([T, KV, hd] each) where asked and returns the key
  /// source the layout's key indices point into.
  kv_rows sources(std::int64_t layer, const at::Tensor& k_new,
                  const at::Tensor& v_new) const;
};

} // namespace canopy::backends
