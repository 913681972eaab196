#pragma once
// Causal attention of one group of a ragged pass on the CPU in float32, reading every
// key where the layout says it lives (no gathered copy of the keys, no padding
// computed). Why a loop of our own: ATen's batched matmul runs one BLAS call per
// (item, KV head); for decoding items (a few queries against a few hundred keys) that
// call overhead was most of a pass (64 items x 1 new token over 140 keys: 600 us a
// layer in bmm). For groups with many queries per item BLAS wins, and
// ragged_attention keeps the ATen formulation for them and for every other device and
// dtype; tests compare the two.
// Thread contract: a pure function; parallel over queries with ATen's intra-op threads.

#include "kv/kv_storage.hpp"
#include "models/pass_layout.hpp"

#include <ATen/ATen.h>

namespace canopy::backends {

/// q: [T, H, hd] float32, CPU, contiguous; source: [rows, KV, hd] CPU planes in any
/// kv_format (float32 ones are read in place; others are converted to float32 one
/// query row and KV head at a time). Writes the group's real query rows of out
/// [T, H * hd].
void cpu_attention_group(const at::Tensor& q, const kv_rows& source,
                         const attention_group& group, at::Tensor& out);

} // namespace canopy::backends
