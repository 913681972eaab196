#include "kv/kv_storage.hpp"

#include "kv/index_tensor.hpp"

namespace canopy::backends {

std::pair<at::Tensor, at::Tensor> kv_rows::gather(const at::Tensor& index) const {
  auto k = format->gather(keys, index, compute);
  auto v = format->gather(values, index, compute);
  if (residual)
    return {residual->overlay(layer, true, index, k),
            residual->overlay(layer, false, index, v)};
  return {k, v};
}

const float* kv_rows::in_place(bool of_keys) const {
  return residual ? nullptr : format->in_place(of_keys ? keys : values);
}

void kv_rows::read_head(bool of_keys, const std::int64_t* rows, std::int64_t n,
                        std::int64_t head, float* out) const {
  format->read_head(of_keys ? keys : values, rows, n, head, out);
  if (residual)
    residual->overlay_head(layer, of_keys, rows, n, head, out);
}

kv_storage::kv_storage(std::unique_ptr<kv_format> format, at::ScalarType compute,
                       std::int64_t layers, std::int64_t capacity, std::int64_t kv_heads,
                       std::int64_t head_dim, at::TensorOptions placement,
                       std::int64_t residual_tokens)
    : format_(std::move(format)), compute_format_(make_cast_kv_format(compute)),
      compute_(compute), zero_row_(capacity) {
  if (residual_tokens > 0)
    residual_ =
        std::make_unique<kv_residual>(residual_tokens, layers, capacity + 1, kv_heads,
                                      head_dim, compute, placement.device());
  // at::empty: host pages are only touched when rows are written, so an unused budget
  // costs address space, not memory (pinned memory is locked at once). Only the padding
  // row must hold zeros.
  for (std::int64_t l = 0; l < layers; ++l)
    for (auto* planes : {&keys_, &values_}) {
      auto plane = format_->allocate(capacity + 1, kv_heads, head_dim, placement);
      plane.elements[zero_row_].zero_();
      if (plane.scales.defined())
        plane.scales[zero_row_].zero_();
      planes->push_back(std::move(plane));
    }
}

void kv_storage::begin_pass(const std::vector<std::int64_t>& slots) {
  if (residual_)
    residual_->assign(slots);
}

void kv_storage::write(std::int64_t layer, const at::Tensor& slots, const at::Tensor& k,
                       const at::Tensor& v) {
  const auto l = static_cast<std::size_t>(layer);
  format_->write(keys_[l], slots, k);
  format_->write(values_[l], slots, v);
  if (residual_) {
    residual_->write(layer, true, k);
    residual_->write(layer, false, v);
  }
}

void kv_storage::write_row(std::int64_t layer, std::int64_t slot, const float* k,
                           const float* v) {
  const auto l = static_cast<std::size_t>(layer);
  format_->write_row(keys_[l], slot, k);
  format_->write_row(values_[l], slot, v);
  if (residual_) {
    residual_->write_row(layer, true, slot, k);
    residual_->write_row(layer, false, slot, v);
  }
}

kv_rows kv_storage::layer(std::int64_t layer) const {
  const auto l = static_cast<std::size_t>(layer);
  return {format_.get(), keys_[l], values_[l], compute_, residual_.get(), layer};
}

kv_rows kv_storage::packed(at::Tensor keys, at::Tensor values) const {
  return {
      compute_format_.get(), {std::move(keys), {}}, {std::move(values), {}}, compute_};
}

void kv_storage::copy_rows(const kv_storage& source,
                           const std::vector<std::int64_t>& from,
                           const std::vector<std::int64_t>& to) {
  if (from.empty())
    return;
  const auto device = keys_[0].elements.device();
  const auto from_index = index_tensor(from, source.keys_[0].elements.device());
  const auto to_index = index_tensor(to, device);
  const bool same_format = source.format_->name() == format_->name();
  for (std::size_t l = 0; l < keys_.size(); ++l)
    for (const bool of_keys : {true, false}) {
      const auto& in = (of_keys ? source.keys_ : source.values_)[l];
      auto& out = (of_keys ? keys_ : values_)[l];
      if (same_format) {
        out.elements.index_copy_(0, to_index,
                                 in.elements.index_select(0, from_index).to(device));
        if (out.scales.defined())
          out.scales.index_copy_(0, to_index,
                                 in.scales.index_select(0, from_index).to(device));
      } else {
        format_->write(out, to_index,
                       source.format_->gather(in, from_index, compute_).to(device));
      }
    }
}

at::Tensor kv_storage::as_stored(const at::Tensor& x) const {
  const auto element = keys_[0].elements.scalar_type();
  if (format_->exact() && (element == compute_ || element == at::kFloat))
    return x; // stored without loss
  const auto S = x.size(0);
  auto plane = format_->allocate(S, x.size(1), x.size(2), at::TensorOptions(x.device()));
  const auto rows = at::arange(S, at::TensorOptions(at::kLong).device(x.device()));
  format_->write(plane, rows, x);
  auto stored = format_->gather(plane, rows, compute_);
  if (residual_) {
    const auto exact = residual_->copies_of(S);
    stored.narrow(0, S - exact, exact).copy_(x.narrow(0, S - exact, exact));
  }
  return stored;
}

} // namespace canopy::backends
