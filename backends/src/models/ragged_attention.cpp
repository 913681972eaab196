#include "models/ragged_attention.hpp"

#include "kv/index_tensor.hpp"
#include "models/cpu_attention.hpp"
#include "models/fused_attention.hpp"
#include "models/torch_weights.hpp"

#include <cmath>
#include <stdexcept>

namespace canopy::backends {

namespace {

// Measured on stories260K (hd 8): the loops win over batched BLAS calls for decoding
// groups and lose to them once an item brings a few dozen queries (prefill).
constexpr std::int64_t max_queries_for_loops = 8;

/// The group's output rows [G * n_max, H * hd] (padded queries included).
at::Tensor aten_attention_group(const at::Tensor& q_src, const kv_rows& source,
                                const device_layout::group& g, bool identity,
                                std::int64_t H, std::int64_t hd) {
  const auto KV = source.keys.elements.size(1), per_kv = H / KV;
  const auto G = g.items, n = g.queries, L = g.keys;
  auto qg = identity ? q_src : q_src.index_select(0, g.query_index);
  // [G, n, KV, per_kv, hd] -> [G, KV, per_kv * n, hd]: one batched matmul per KV head
  // serves all the query heads that share it.
  qg = qg.view({G, n, KV, per_kv, hd})
           .permute({0, 2, 3, 1, 4})
           .reshape({G, KV, per_kv * n, hd});
  const auto [k_rows, v_rows] = source.gather(g.key_index);
  const auto kg = k_rows.view({G, L, KV, hd});
  const auto vg = v_rows.view({G, L, KV, hd});
  auto scores = at::matmul(qg, kg.permute({0, 2, 3, 1})); // [G, KV, per_kv*n, L]
  scores = scores.view({G, KV, per_kv, n, L}) + g.mask;
  // Softmax in float32 whatever the compute dtype (as HF does).
  const auto probs = at::softmax(scores, -1, at::kFloat).to(q_src.scalar_type());
  auto og = at::matmul(probs.view({G, KV, per_kv * n, L}), vg.permute({0, 2, 1, 3}));
  return og.view({G, KV, per_kv, n, hd})
      .permute({0, 3, 1, 2, 4})
      .reshape({G * n, H * hd});
}

/// The same through the fused kernels: no scores in memory.
at::Tensor fused_attention_group(const at::Tensor& q_src, const kv_rows& source,
                                 const device_layout::group& g, bool identity,
                                 std::int64_t H, std::int64_t hd) {
  const auto KV = source.keys.elements.size(1);
  const auto G = g.items, n = g.queries, L = g.keys;
  const auto qg =
      (identity ? q_src : q_src.index_select(0, g.query_index)).view({G, n, H, hd});
  const auto [k_rows, v_rows] = source.gather(g.key_index);
  return fused_attention(qg, k_rows.view({G, L, KV, hd}), v_rows.view({G, L, KV, hd}),
                         g.causal ? at::Tensor() : g.mask.view({G, 1, n, L}))
      .reshape({G * n, H * hd});
}

/// The group's output rows, by the kernel chosen for it (not the loops).
at::Tensor group_attention(const at::Tensor& q_src, const kv_rows& source,
                           const device_layout::group& g, bool identity, std::int64_t H,
                           std::int64_t hd) {
  return g.fused ? fused_attention_group(q_src, source, g, identity, H, hd)
                 : aten_attention_group(q_src, source, g, identity, H, hd);
}

/// q / sqrt(hd): scaling q once is cheaper than scaling every score (the loops scale
/// theirs).
at::Tensor scaled_queries(const at::Tensor& q) {
  return q * (1.0 / std::sqrt(static_cast<double>(q.size(2))));
}

} // namespace

device_layout to_device(const pass_layout& layout, at::Device device,
                        at::ScalarType dtype, attention_kernel kernel) {
  const bool loops_apply = device.is_cpu() && dtype == at::kFloat;
  if (kernel == attention_kernel::cpu_loops && !loops_apply)
    throw std::invalid_argument("the attention loops need float32 CPU tensors");
  if (kernel == attention_kernel::fused && !fused_attention_available())
    throw std::invalid_argument("fused attention needs LibTorch 2.1 or later");
  device_layout out;
  out.host = &layout;
  out.positions = index_tensor(layout.positions, device);
  for (const auto& g : layout.groups) {
    device_layout::group d;
    d.loops = kernel == attention_kernel::cpu_loops ||
              (kernel == attention_kernel::automatic && loops_apply &&
               g.queries <= max_queries_for_loops);
    d.fused = kernel == attention_kernel::fused ||
              (kernel == attention_kernel::automatic && device.is_cuda() &&
               fused_attention_available());
    d.causal = d.fused && g.causal;
    if (!d.loops) {
      d.items = g.items;
      d.queries = g.queries;
      d.keys = g.keys;
      d.query_index = index_tensor(g.query_index, device);
      d.key_index = index_tensor(g.key_index, device);
      auto mask = at::empty({g.items, 1, 1, g.queries, g.keys}, at::kFloat);
      std::copy(g.mask.begin(), g.mask.end(), mask.data_ptr<float>());
      d.mask = mask.to(device, dtype);
      d.result_rows = index_tensor(g.result_rows, device);
      d.result_targets = index_tensor(g.result_targets, device);
    }
    out.groups.push_back(std::move(d));
  }
  return out;
}

at::Tensor ragged_attention(const at::Tensor& q, const kv_rows& source,
                            const device_layout& layout) {
  const auto T = q.size(0), H = q.size(1), hd = q.size(2);
  if (layout.host->identity && !layout.groups[0].loops) {
    // One group in packed order: its output is the result, with no copy.
    return group_attention(scaled_queries(q).contiguous(), source, layout.groups[0], true,
                           H, hd);
  }
  auto out = at::empty({T, H * hd}, q.options());
  ragged_attention_into(q, source, layout, out);
  return out;
}

void ragged_attention_into(const at::Tensor& q, const kv_rows& source,
                           const device_layout& layout, at::Tensor& out) {
  const auto H = q.size(1), hd = q.size(2);
  const bool identity = layout.host->identity;
  at::Tensor q_src, q_c;
  for (std::size_t i = 0; i < layout.groups.size(); ++i) {
    const auto& g = layout.groups[i];
    if (g.loops) {
      if (!q_c.defined())
        q_c = q.contiguous();
      cpu_attention_group(q_c, source, layout.host->groups[i], out);
      continue;
    }
    if (!q_src.defined()) {
      const auto scaled = scaled_queries(q);
      if (identity) {
        out.copy_(group_attention(scaled.contiguous(), source, g, true, H, hd));
        return;
      }
      // Padded query rows read the zero row appended here.
      q_src = at::cat({scaled, at::zeros({1, H, hd}, q.options())});
    }
    const auto og = group_attention(q_src, source, g, false, H, hd);
    out.index_copy_(0, g.result_targets, og.index_select(0, g.result_rows));
  }
}

} // namespace canopy::backends
