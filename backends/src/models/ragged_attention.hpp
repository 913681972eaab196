#pragma once
// Causal attention of one ragged pass: every item's new queries attend to its cached
// prefix KV and to its own new KV, group by group as pass_layout decided.
// Thread contract: pure functions over tensors; the worker's thread.

#include "kv/kv_storage.hpp"
#include "models/pass_layout.hpp"

#include <ATen/ATen.h>

#include <vector>

namespace canopy::backends {

/// How a group is computed: the ATen formulation (gathered keys, a masked batched
/// matmul; any device and dtype), cpu_attention_group's loops (float32 on the CPU), or
/// the fused kernels (fused_attention.hpp; LibTorch 2.1 and later). `automatic` takes
/// the loops where they apply and a group has few queries per item, the fused kernels
/// for a CUDA device's groups where LibTorch has them, else ATen.
enum class attention_kernel { automatic, aten, cpu_loops, fused };

/// A pass_layout made ready for the model's device, with each group's kernel chosen
/// once per pass (not per layer). Only ATen groups get device tensors; the loops read
/// the host layout.
struct device_layout {
  struct group {
    bool loops = false;  // computed by cpu_attention_group
    bool fused = false;  // computed by fused_attention
    bool causal = false; // fused: causal from the top left, `mask` unread
    // ATen and fused groups only:
    std::int64_t items = 0, queries = 0, keys = 0;
    at::Tensor query_index;    // [G*n_max] int64
    at::Tensor key_index;      // [G*L_max] int64
    at::Tensor mask;           // [G, 1, 1, n_max, L_max] additive, compute dtype
    at::Tensor result_rows;    // [n_real] int64
    at::Tensor result_targets; // [n_real] int64
  };
  const pass_layout* host = nullptr; // the layout this was made from
  at::Tensor positions;              // [T] int64
  std::vector<group> groups;
};

/// Throws std::invalid_argument when `kernel` is cpu_loops but the device or dtype is
/// not float32 on the CPU, or fused where this LibTorch has no fused kernels.
device_layout to_device(const pass_layout& layout, at::Device device,
                        at::ScalarType dtype,
                        attention_kernel kernel = attention_kernel::automatic);

/// q: [T, H, hd]; source: the key source [rows, KV, hd] the layout's key indices
/// point into (see pass_layout), in any kv_format, with H a multiple of KV (query
/// head h reads KV head h / (H / KV), as HF's repeat_kv). Returns [T, H * hd].
at::Tensor ragged_attention(const at::Tensor& q, const kv_rows& source,
                            const device_layout& layout);

/// As ragged_attention, writing every real query row of `out` [T, H * hd] (the
/// direct forward's preallocated buffer).
void ragged_attention_into(const at::Tensor& q, const kv_rows& source,
                           const device_layout& layout, at::Tensor& out);

} // namespace canopy::backends
