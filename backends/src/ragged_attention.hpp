#pragma once
// Causal attention of one ragged pass: every item's new queries attend to its cached
// prefix KV and to its own new KV, group by group as pass_layout decided.
// Thread contract: pure functions over tensors; the worker's thread.

#include "pass_layout.hpp"

#include <ATen/ATen.h>

#include <vector>

namespace canopy::backends {

/// A pass_layout's index and mask tensors on the model's device.
struct device_layout {
  struct group {
    std::int64_t items = 0, queries = 0, keys = 0;
    at::Tensor query_index;    // [G*n_max] int64
    at::Tensor key_index;      // [G*L_max] int64
    at::Tensor mask;           // [G, 1, 1, n_max, L_max] additive, compute dtype
    at::Tensor result_rows;    // [n_real] int64
    at::Tensor result_targets; // [n_real] int64
  };
  std::int64_t packed_rows = 0; // T
  const pass_layout* host = nullptr; // the layout these tensors were made from
  at::Tensor positions;         // [T] int64
  at::Tensor prefix_slots;      // packed: [P] int64
  std::vector<group> groups;
  bool identity = false;
};

device_layout to_device(const pass_layout& layout, at::Device device, at::ScalarType dtype);

/// q: [T, H, hd]; keys, values: the key source [rows, KV, hd] the layout's key
/// indices point into (see pass_layout), with H a multiple of KV (query head h reads
/// KV head h / (H / KV), as HF's repeat_kv). Returns [T, H * hd].
/// How a group is computed: the ATen formulation (gathered keys, a masked batched
/// matmul; any device and dtype) or cpu_attention_group's loops (float32 on the CPU).
/// `automatic` takes the loops where they apply and each group has few queries per
/// item, else ATen.
enum class attention_kernel { automatic, aten, cpu_loops };

at::Tensor ragged_attention(const at::Tensor& q, const at::Tensor& keys,
                            const at::Tensor& values, const device_layout& layout,
                            attention_kernel kernel = attention_kernel::automatic);

} // namespace canopy::backends
