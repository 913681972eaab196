// kv_dtype float32, float16, bfloat16: the elements stored in that dtype, converted
// with round-to-nearest-even both ways by ATen's casts and by c10's scalar types (the
// same conversion, so write() and write_row() store the same bits).

#include "kv/kv_format.hpp"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstring>

#include <immintrin.h>

namespace canopy::backends {

namespace {

template <class Element> void store(const float* x, std::int64_t n, Element* out) {
  for (std::int64_t i = 0; i < n; ++i)
    out[i] = Element(x[i]);
}

template <class Element> void widen(const Element* x, std::int64_t n, float* out) {
  for (std::int64_t d = 0; d < n; ++d)
    out[d] = static_cast<float>(x[d]);
}

/// float16 to float32 with the CPU's conversion instruction: c10::Half's portable
/// bit arithmetic made SMC on a 110M Llama with float16 KV 15% slower than with
/// float32 KV. Every float16 value is a float32 value, so both give the same floats.
__attribute__((target("avx,f16c"))) void widen_f16c(const at::Half* x, std::int64_t n,
                                                    float* out) {
  std::int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    _mm256_storeu_ps(out + d, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i*>(x + d))));
  widen(x + d, n - d, out + d);
}

void widen(const at::Half* x, std::int64_t n, float* out) {
  static const bool f16c = __builtin_cpu_supports("f16c");
  if (f16c)
    widen_f16c(x, n, out);
  else
    widen<at::Half>(x, n, out);
}

template <class Element>
void load_head(const Element* base, const kv_plane& plane, const std::int64_t* rows,
               std::int64_t n, std::int64_t head, float* out) {
  const auto KV = plane.elements.size(1), hd = plane.elements.size(2);
  for (std::int64_t i = 0; i < n; ++i)
    widen(base + (rows[i] * KV + head) * hd, hd, out + i * hd);
}

class cast_kv_format final : public kv_format {
public:
  explicit cast_kv_format(at::ScalarType element) : element_(element) {}

  std::string name() const override {
    switch (element_) {
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    default:
      return "float32";
    }
  }
  std::uint64_t bytes_per_head(std::int64_t head_dim) const override {
    return static_cast<std::uint64_t>(head_dim) * at::elementSize(element_);
  }
  bool exact() const override { return true; }
  double unit_roundoff() const override {
    switch (element_) {
    case at::kHalf:
      return std::ldexp(1.0, -11);
    case at::kBFloat16:
      return std::ldexp(1.0, -8);
    default:
      return std::ldexp(1.0, -24);
    }
  }

  kv_plane allocate(std::int64_t rows, std::int64_t kv_heads, std::int64_t head_dim,
                    at::TensorOptions placement) const override {
    return {at::empty({rows, kv_heads, head_dim}, placement.dtype(element_)), {}};
  }
  void write(kv_plane& plane, const at::Tensor& slots,
             const at::Tensor& x) const override {
    plane.elements.index_copy_(0, slots, x.to(element_));
  }
  void write_row(kv_plane& plane, std::int64_t slot, const float* x) const override {
    const auto n = plane.elements.size(1) * plane.elements.size(2);
    switch (element_) {
    case at::kHalf:
      store(x, n, plane.elements.data_ptr<at::Half>() + slot * n);
      break;
    case at::kBFloat16:
      store(x, n, plane.elements.data_ptr<at::BFloat16>() + slot * n);
      break;
    default:
      std::memcpy(plane.elements.data_ptr<float>() + slot * n, x,
                  static_cast<std::size_t>(n) * sizeof(float));
    }
  }
  at::Tensor gather(const kv_plane& plane, const at::Tensor& index,
                    at::ScalarType dtype) const override {
    return plane.elements.index_select(0, index).to(dtype);
  }
  const float* in_place(const kv_plane& plane) const override {
    return element_ == at::kFloat ? plane.elements.data_ptr<float>() : nullptr;
  }
  void read_head(const kv_plane& plane, const std::int64_t* rows, std::int64_t n,
                 std::int64_t head, float* out) const override {
    switch (element_) {
    case at::kHalf:
      load_head(plane.elements.data_ptr<at::Half>(), plane, rows, n, head, out);
      break;
    case at::kBFloat16:
      load_head(plane.elements.data_ptr<at::BFloat16>(), plane, rows, n, head, out);
      break;
    default:
      load_head(plane.elements.data_ptr<float>(), plane, rows, n, head, out);
    }
  }

private:
  at::ScalarType element_;
};

} // namespace

std::unique_ptr<kv_format> make_cast_kv_format(at::ScalarType element) {
  return std::make_unique<cast_kv_format>(element);
}

} // namespace canopy::backends
