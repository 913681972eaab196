#include "models/lora_weights.hpp"

#include "models/torch_weights.hpp"

#include <string>

namespace canopy::backends {

namespace {

/// A module's site and the first column of its output there.
std::pair<lora_site, std::int64_t> site_of(const std::string& module,
                                           const model_config& c) {
  const auto q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  if (module == "q_proj")
    return {lora_site::qkv, 0};
  if (module == "k_proj")
    return {lora_site::qkv, q};
  if (module == "v_proj")
    return {lora_site::qkv, q + kv};
  if (module == "o_proj")
    return {lora_site::out, 0};
  if (module == "gate_proj")
    return {lora_site::gate_up, 0};
  if (module == "up_proj")
    return {lora_site::gate_up, c.intermediate_size};
  return {lora_site::down, 0};
}

} // namespace

lora_weights::lora_weights(const lora_adapter& adapter, const model_config& config,
                           at::Device device, at::ScalarType dtype)
    : layers_(static_cast<std::size_t>(config.num_layers)),
      bytes_(bytes_for(adapter, dtype)) {
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    std::array<std::vector<at::Tensor>, 4> a_ts; // each site's modules' A^T
    for (const auto& module : adapter.modules) {
      const std::string weight = lora_adapted_weight(l, module);
      const auto& f = adapter.factors.at(weight);
      const std::string what = adapter.source + ": the factors of " + weight;
      // In double, then rounded once: scale B is what a merged weight would add.
      const auto a = tensor_from_view(f.a, what, at::kDouble, at::kCPU);
      const auto b = tensor_from_view(f.b, what, at::kDouble, at::kCPU) * adapter.scale;
      const auto [site, column] = site_of(module, config);
      a_ts[static_cast<std::size_t>(site)].push_back(a.t());
      layers_[static_cast<std::size_t>(l)][static_cast<std::size_t>(site)]
          .modules.push_back({b.t().contiguous().to(device, dtype), column});
    }
    for (std::size_t site = 0; site < a_ts.size(); ++site)
      if (!a_ts[site].empty())
        layers_[static_cast<std::size_t>(l)][site].a_t =
            at::cat(a_ts[site], 1).contiguous().to(device, dtype);
  }
}

std::uint64_t lora_weights::bytes_for(const lora_adapter& adapter, at::ScalarType dtype) {
  std::uint64_t elements = 0;
  for (const auto& [weight, f] : adapter.factors)
    elements += static_cast<std::uint64_t>(numel(f.a) + numel(f.b));
  return elements * at::elementSize(dtype);
}

void lora_weights::add_deltas(lora_site site, std::int64_t layer, const at::Tensor& x,
                              std::int64_t begin, std::int64_t end, at::Tensor& y) const {
  const auto& factors =
      layers_[static_cast<std::size_t>(layer)][static_cast<std::size_t>(site)];
  if (factors.modules.empty())
    return;
  const auto count = end - begin;
  const auto ax = at::mm(x.narrow(0, begin, count), factors.a_t); // [T, r * modules]
  std::int64_t first = 0;
  for (const auto& m : factors.modules) {
    const auto r = m.scaled_b_t.size(0);
    auto out = y.narrow(0, begin, count).narrow(1, m.column, m.scaled_b_t.size(1));
    out.addmm_(ax.narrow(1, first, r), m.scaled_b_t); // in place: no temporary row
    first += r;
  }
}

void add_lora_deltas(const lora_spans& spans, lora_site site, std::int64_t layer,
                     const at::Tensor& x, at::Tensor& y) {
  for (const auto& s : spans)
    s.weights->add_deltas(site, layer, x, s.begin, s.end, y);
}

} // namespace canopy::backends
