// kv_dtype int8: each token's K (or V) of each head stored as hd signed bytes and one
// float32 scale, symmetric (HF's QuantizedCache quantizes per token and head too):
//   scale = max|x| / 127,  q = round_half_even(x / scale),  x' = q * scale.
// A head of zeros stores scale 0 and reads back zeros. The error of an element is at
// most scale / 2 = max|x| / 254 of its head's largest element.
// write() (ATen ops, any device) and write_row() (a loop, the direct forward) compute
// the same float operations in the same order, so they store the same bytes.

#include "kv/kv_format.hpp"

#include <algorithm>
#include <cmath>

namespace canopy::backends {

namespace {

// Multiplying by the reciprocal, not dividing by 127: a tensor-by-scalar division may
// be carried out by ATen as exactly this product, and the loop must match it.
constexpr float inverse_of_127 = 1.0f / 127.0f;

class int8_kv_format final : public kv_format {
public:
  std::string name() const override { return "int8"; }
  std::uint64_t bytes_per_head(std::int64_t head_dim) const override {
    return static_cast<std::uint64_t>(head_dim) + sizeof(float);
  }
  bool exact() const override { return false; }
  double unit_roundoff() const override { return 1.0 / 254; }

  kv_plane allocate(std::int64_t rows, std::int64_t kv_heads, std::int64_t head_dim,
                    at::TensorOptions placement) const override {
    return {at::empty({rows, kv_heads, head_dim}, placement.dtype(at::kChar)),
            at::empty({rows, kv_heads}, placement.dtype(at::kFloat))};
  }

  void write(kv_plane& plane, const at::Tensor& slots,
             const at::Tensor& x) const override {
    const auto xf = x.to(at::kFloat);
    const auto scale = xf.abs().amax(-1) * inverse_of_127; // [S, KV]
    const auto q =
        at::where(scale.unsqueeze(-1) > 0, xf / scale.unsqueeze(-1), at::zeros_like(xf))
            .round()
            .clamp(-127, 127)
            .to(at::kChar);
    plane.elements.index_copy_(0, slots, q);
    plane.scales.index_copy_(0, slots, scale);
  }

  void write_row(kv_plane& plane, std::int64_t slot, const float* x) const override {
    const auto KV = plane.elements.size(1), hd = plane.elements.size(2);
    std::int8_t* q = plane.elements.data_ptr<std::int8_t>() + slot * KV * hd;
    float* scales = plane.scales.data_ptr<float>() + slot * KV;
    for (std::int64_t h = 0; h < KV; ++h) {
      const float* head = x + h * hd;
      float top = 0;
      for (std::int64_t d = 0; d < hd; ++d)
        top = std::max(top, std::fabs(head[d]));
      const float scale = top * inverse_of_127;
      scales[h] = scale;
      for (std::int64_t d = 0; d < hd; ++d)
        q[h * hd + d] =
            scale > 0 ? static_cast<std::int8_t>(std::min(
                            127.0f, std::max(-127.0f, std::nearbyint(head[d] / scale))))
                      : std::int8_t{0};
    }
  }

  at::Tensor gather(const kv_plane& plane, const at::Tensor& index,
                    at::ScalarType dtype) const override {
    const auto q = plane.elements.index_select(0, index).to(at::kFloat);
    return (q * plane.scales.index_select(0, index).unsqueeze(-1)).to(dtype);
  }

  const float* in_place(const kv_plane&) const override { return nullptr; }

  void read_head(const kv_plane& plane, const std::int64_t* rows, std::int64_t n,
                 std::int64_t head, float* out) const override {
    const auto KV = plane.elements.size(1), hd = plane.elements.size(2);
    const std::int8_t* elements = plane.elements.data_ptr<std::int8_t>();
    const float* scales = plane.scales.data_ptr<float>();
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int8_t* q = elements + (rows[i] * KV + head) * hd;
      const float scale = scales[rows[i] * KV + head];
      for (std::int64_t d = 0; d < hd; ++d)
        out[i * hd + d] = static_cast<float>(q[d]) * scale;
    }
  }
};

} // namespace

std::unique_ptr<kv_format> make_int8_kv_format() {
  return std::make_unique<int8_kv_format>();
}

} // namespace canopy::backends
