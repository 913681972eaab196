#include "kv/kv_residual.hpp"

#include "kv/index_tensor.hpp"

#include <algorithm>
#include <cstring>

namespace canopy::backends {

kv_residual::kv_residual(std::int64_t rows, std::int64_t layers, std::int64_t slots,
                         std::int64_t kv_heads, std::int64_t head_dim,
                         at::ScalarType compute, at::Device device)
    : rows_(rows), owner_(static_cast<std::size_t>(rows), -1),
      ring_of_(static_cast<std::size_t>(slots), -1),
      ring_of_slot_(at::full({slots}, -1, at::TensorOptions(at::kLong).device(device))) {
  // A ring row is read only after assign() gave it to a token and write() filled it.
  const auto options = at::TensorOptions(compute).device(device);
  for (std::int64_t l = 0; l < layers; ++l) {
    keys_.push_back(at::empty({rows, kv_heads, head_dim}, options));
    values_.push_back(at::empty({rows, kv_heads, head_dim}, options));
  }
}

std::uint64_t kv_residual::bytes_per_token(std::int64_t layers, std::int64_t kv_heads,
                                           std::int64_t head_dim,
                                           at::ScalarType compute) {
  return 2 * static_cast<std::uint64_t>(layers * kv_heads * head_dim) *
         at::elementSize(compute);
}

void kv_residual::assign(const std::vector<std::int64_t>& slots) {
  const auto stored = static_cast<std::int64_t>(slots.size());
  const auto first = stored - copies_of(stored);
  std::vector<std::int64_t> changed, rows, sources;
  auto drop_copy = [&](std::int64_t slot) {
    auto& ring = ring_of_[static_cast<std::size_t>(slot)];
    if (ring < 0)
      return;
    owner_[static_cast<std::size_t>(ring)] = -1;
    ring = -1;
    changed.push_back(slot);
  };
  // A slot stored again holds a new token: whatever copy it had is another token's.
  for (const auto slot : slots)
    drop_copy(slot);
  for (auto i = first; i < stored; ++i) {
    const auto slot = slots[static_cast<std::size_t>(i)];
    const auto ring = next_;
    next_ = (next_ + 1) % rows_;
    if (const auto previous = owner_[static_cast<std::size_t>(ring)]; previous >= 0)
      drop_copy(previous); // the oldest copy goes
    owner_[static_cast<std::size_t>(ring)] = slot;
    ring_of_[static_cast<std::size_t>(slot)] = ring;
    changed.push_back(slot);
    rows.push_back(ring);
    sources.push_back(i);
  }
  // The device's map gets each changed slot's final ring row once (index_put_ with a
  // repeated index may apply either value on a GPU).
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  if (!changed.empty()) {
    std::vector<std::int64_t> values;
    for (const auto slot : changed)
      values.push_back(ring_of_[static_cast<std::size_t>(slot)]);
    const auto device = ring_of_slot_.device();
    ring_of_slot_.index_put_({index_tensor(changed, device)},
                             index_tensor(values, device));
  }
  pass_rows_ = index_tensor(rows, ring_of_slot_.device());
  pass_sources_ = index_tensor(sources, ring_of_slot_.device());
}

void kv_residual::write(std::int64_t layer, bool keys, const at::Tensor& x) {
  if (pass_rows_.numel() == 0)
    return;
  const auto& ring = plane(layer, keys);
  ring.index_copy_(0, pass_rows_,
                   x.index_select(0, pass_sources_).to(ring.scalar_type()));
}

void kv_residual::write_row(std::int64_t layer, bool keys, std::int64_t slot,
                            const float* x) {
  const auto ring = ring_of_[static_cast<std::size_t>(slot)];
  if (ring < 0)
    return;
  const auto& p = plane(layer, keys);
  const auto n = p.size(1) * p.size(2);
  std::memcpy(p.data_ptr<float>() + ring * n, x,
              static_cast<std::size_t>(n) * sizeof(float));
}

at::Tensor kv_residual::overlay(std::int64_t layer, bool keys, const at::Tensor& index,
                                const at::Tensor& stored) const {
  const auto ring = ring_of_slot_.index_select(0, index);
  const auto copies = plane(layer, keys).index_select(0, ring.clamp_min(0));
  return at::where((ring >= 0).view({-1, 1, 1}), copies.to(stored.scalar_type()), stored);
}

void kv_residual::overlay_head(std::int64_t layer, bool keys, const std::int64_t* rows,
                               std::int64_t n, std::int64_t head, float* out) const {
  const auto& p = plane(layer, keys);
  const auto KV = p.size(1), hd = p.size(2);
  const float* copies = p.data_ptr<float>();
  for (std::int64_t i = 0; i < n; ++i)
    if (const auto ring = ring_of_[static_cast<std::size_t>(rows[i])]; ring >= 0)
      std::memcpy(out + i * hd, copies + (ring * KV + head) * hd,
                  static_cast<std::size_t>(hd) * sizeof(float));
}

} // namespace canopy::backends
