#include "ragged_attention.hpp"

#include <cmath>

namespace canopy::backends {

namespace {

at::Tensor index_tensor(const std::vector<std::int64_t>& values, at::Device device) {
  auto t = at::empty({static_cast<std::int64_t>(values.size())}, at::kLong);
  std::copy(values.begin(), values.end(), t.data_ptr<std::int64_t>());
  return t.to(device);
}

} // namespace

device_layout to_device(const pass_layout& layout, at::Device device, at::ScalarType dtype) {
  device_layout out;
  out.packed_rows = layout.packed_rows;
  out.positions = index_tensor(layout.positions, device);
  out.prefix_slots = index_tensor(layout.prefix_slots, device);
  out.identity = layout.identity;
  for (const auto& g : layout.groups) {
    device_layout::group d;
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
    out.groups.push_back(std::move(d));
  }
  return out;
}

at::Tensor ragged_attention(const at::Tensor& q, const at::Tensor& k_new,
                            const at::Tensor& v_new, const at::Tensor& k_prefix,
                            const at::Tensor& v_prefix, const device_layout& layout) {
  const auto T = q.size(0), H = q.size(1), hd = q.size(2), KV = k_new.size(1);
  const auto per_kv = H / KV;
  // Scaling q once is cheaper than scaling every score.
  const auto scaled = q * (1.0 / std::sqrt(static_cast<double>(hd)));
  // The last row of each source is the zero row that padding indices point at.
  const auto k_src = at::cat({k_prefix, k_new, at::zeros({1, KV, hd}, k_new.options())});
  const auto v_src = at::cat({v_prefix, v_new, at::zeros({1, KV, hd}, v_new.options())});
  const auto q_src =
    layout.identity ? scaled : at::cat({scaled, at::zeros({1, H, hd}, q.options())});
  at::Tensor out;
  if (!layout.identity)
    out = at::empty({T, H * hd}, q.options());
  for (const auto& g : layout.groups) {
    const auto G = g.items, n = g.queries, L = g.keys;
    auto qg = layout.identity ? q_src : q_src.index_select(0, g.query_index);
    // [G, n, KV, per_kv, hd] -> [G, KV, per_kv * n, hd]: one batched matmul per KV head
    // serves all the query heads that share it.
    qg = qg.view({G, n, KV, per_kv, hd}).permute({0, 2, 3, 1, 4}).reshape({G, KV, per_kv * n, hd});
    const auto kg = k_src.index_select(0, g.key_index).view({G, L, KV, hd});
    const auto vg = v_src.index_select(0, g.key_index).view({G, L, KV, hd});
    auto scores = at::matmul(qg, kg.permute({0, 2, 3, 1})); // [G, KV, per_kv*n, L]
    scores = scores.view({G, KV, per_kv, n, L}) + g.mask;
    // Softmax in float32 whatever the compute dtype (as HF does).
    const auto probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
    auto og = at::matmul(probs.view({G, KV, per_kv * n, L}), vg.permute({0, 2, 1, 3}));
    og = og.view({G, KV, per_kv, n, hd}).permute({0, 3, 1, 2, 4}).reshape({G * n, H * hd});
    if (layout.identity)
      return og;
    out.index_copy_(0, g.result_targets, og.index_select(0, g.result_rows));
  }
  return out;
}

} // namespace canopy::backends
