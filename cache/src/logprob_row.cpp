#include <canopy/cache/logprob_row.hpp>

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace canopy::cache {

namespace {

std::uint32_t float_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float bits_float(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Both 16-bit formats are stored as uint16 through memcpy, so a row's bytes are the
// host's little-endian layout and rows need no particular alignment.
std::uint16_t load_u16(const std::uint8_t* at) {
  std::uint16_t bits;
  std::memcpy(&bits, at, sizeof bits);
  return bits;
}

void store_u16(std::uint8_t* at, std::uint16_t bits) {
  std::memcpy(at, &bits, sizeof bits);
}

// Rounds the 24-bit significand m (hidden bit set) right by `shift` bits, ties to even.
std::uint32_t round_shift(std::uint32_t m, std::uint32_t shift) {
  std::uint32_t kept = m >> shift;
  std::uint32_t rest = m & ((std::uint32_t{1} << shift) - 1);
  std::uint32_t half = std::uint32_t{1} << (shift - 1);
  return kept + (rest > half || (rest == half && (kept & 1)));
}

} // namespace

std::optional<row_dtype> parse_row_dtype(std::string_view name) {
  return value_of(row_dtype_names, name);
}

std::string_view to_string(row_dtype dtype) {
  return name_of(row_dtype_names, dtype);
}

std::size_t element_bytes(row_dtype dtype) {
  return dtype == row_dtype::float32 ? 4 : 2;
}

std::uint16_t float_to_half(float value) {
  const std::uint32_t bits = float_bits(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) // NaN: keep the top payload bits and force a quiet NaN
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) // 65520 and above round to infinity (65504 is odd)
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (abs >= 0x38800000u) { // normal half: rebias the exponent, round the mantissa
    std::uint32_t r = abs - (std::uint32_t{112} << 23);
    r += 0xfffu + ((r >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (r >> 13));
  }
  const std::uint32_t exponent = abs >> 23;
  if (exponent < 102) // below half the smallest subnormal: rounds to zero
    return sign;
  // Subnormal half: units of 2^-24. A carry into 0x400 is the smallest normal.
  const std::uint32_t significand = (abs & 0x7fffffu) | 0x800000u;
  return static_cast<std::uint16_t>(sign | round_shift(significand, 126 - exponent));
}

float half_to_float(std::uint16_t bits) {
  const std::uint32_t sign = std::uint32_t{bits & 0x8000u} << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return bits_float(sign | float_bits(magnitude));
  }
  if (exponent == 31)
    return bits_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

std::uint16_t float_to_bfloat16(float value) {
  const std::uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: a payload only in the low bits
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u); // must stay NaN
  const std::uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

float bfloat16_to_float(std::uint16_t bits) {
  return bits_float(std::uint32_t{bits} << 16);
}

logprob_row::logprob_row(row_dtype dtype, std::size_t vocab,
                         std::vector<std::uint8_t> storage)
    : dtype_(dtype), vocab_(vocab), storage_(std::move(storage)) {}

row_ptr logprob_row::encode(const float* values, std::size_t vocab, row_dtype dtype) {
  std::vector<std::uint8_t> storage(vocab * element_bytes(dtype));
  switch (dtype) {
  case row_dtype::float32:
    if (vocab != 0)
      std::memcpy(storage.data(), values, storage.size());
    break;
  case row_dtype::float16:
    for (std::size_t i = 0; i < vocab; ++i)
      store_u16(storage.data() + 2 * i, float_to_half(values[i]));
    break;
  case row_dtype::bfloat16:
    for (std::size_t i = 0; i < vocab; ++i)
      store_u16(storage.data() + 2 * i, float_to_bfloat16(values[i]));
    break;
  }
  return row_ptr(new logprob_row(dtype, vocab, std::move(storage)));
}

row_ptr logprob_row::adopt(row_dtype dtype, std::size_t vocab,
                           std::vector<std::uint8_t> bytes) {
  // Divide rather than multiply so that a huge vocab cannot overflow into a match.
  const std::size_t element = element_bytes(dtype);
  if (bytes.size() % element != 0 || bytes.size() / element != vocab)
    throw std::invalid_argument("logprob_row::adopt: byte count does not match vocab");
  return row_ptr(new logprob_row(dtype, vocab, std::move(bytes)));
}

const float* logprob_row::float32_data() const {
  // vector storage comes from operator new, so it is aligned for float.
  return dtype_ == row_dtype::float32 ? reinterpret_cast<const float*>(storage_.data())
                                      : nullptr;
}

void logprob_row::decode(float* out) const {
  switch (dtype_) {
  case row_dtype::float32:
    if (vocab_ != 0)
      std::memcpy(out, storage_.data(), storage_.size());
    return;
  case row_dtype::float16:
    for (std::size_t i = 0; i < vocab_; ++i)
      out[i] = half_to_float(load_u16(storage_.data() + 2 * i));
    return;
  case row_dtype::bfloat16:
    for (std::size_t i = 0; i < vocab_; ++i)
      out[i] = bfloat16_to_float(load_u16(storage_.data() + 2 * i));
    return;
  }
}

float logprob_row::at(std::size_t index) const {
  switch (dtype_) {
  case row_dtype::float32: {
    float value;
    std::memcpy(&value, storage_.data() + 4 * index, sizeof value);
    return value;
  }
  case row_dtype::float16:
    return half_to_float(load_u16(storage_.data() + 2 * index));
  case row_dtype::bfloat16:
    return bfloat16_to_float(load_u16(storage_.data() + 2 * index));
  }
  return 0.0f;
}

} // namespace canopy::cache
