#include "kv_storage.hpp"

namespace canopy::backends {

kv_storage::kv_storage(std::unique_ptr<kv_format> format, at::ScalarType compute,
                       std::int64_t layers, std::int64_t capacity, std::int64_t kv_heads,
                       std::int64_t head_dim, at::Device device)
    : format_(std::move(format)), compute_format_(make_cast_kv_format(compute)),
      compute_(compute), zero_row_(capacity) {
  // at::empty: host pages are only touched when rows are written, so an unused budget
  // costs address space, not memory. Only the padding row must hold zeros.
  for (std::int64_t l = 0; l < layers; ++l)
    for (auto* planes : {&keys_, &values_}) {
      auto plane = format_->allocate(capacity + 1, kv_heads, head_dim, device);
      plane.elements[zero_row_].zero_();
      if (plane.scales.defined())
        plane.scales[zero_row_].zero_();
      planes->push_back(std::move(plane));
    }
}

void kv_storage::write(std::int64_t layer, const at::Tensor& slots, const at::Tensor& k,
                       const at::Tensor& v) {
  const auto l = static_cast<std::size_t>(layer);
  format_->write(keys_[l], slots, k);
  format_->write(values_[l], slots, v);
}

void kv_storage::write_row(std::int64_t layer, std::int64_t slot, const float* k,
                           const float* v) {
  const auto l = static_cast<std::size_t>(layer);
  format_->write_row(keys_[l], slot, k);
  format_->write_row(values_[l], slot, v);
}

kv_rows kv_storage::layer(std::int64_t layer) const {
  const auto l = static_cast<std::size_t>(layer);
  return {format_.get(), keys_[l], values_[l], compute_};
}

kv_rows kv_storage::packed(at::Tensor keys, at::Tensor values) const {
  return {compute_format_.get(), {std::move(keys), {}}, {std::move(values), {}}, compute_};
}

at::Tensor kv_storage::as_stored(const at::Tensor& x) const {
  const auto element = keys_[0].elements.scalar_type();
  if (format_->exact() && (element == compute_ || element == at::kFloat))
    return x; // stored without loss
  auto plane = format_->allocate(x.size(0), x.size(1), x.size(2), x.device());
  const auto rows = at::arange(x.size(0), at::TensorOptions(at::kLong).device(x.device()));
  format_->write(plane, rows, x);
  return format_->gather(plane, rows, compute_);
}

} // namespace canopy::backends
