#include "models/weight_blocks.hpp"

#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <stdexcept>

namespace canopy::backends {

std::uint16_t to_half_bits(float x) {
  return c10::Half(x).x;
}

float from_half_bits(std::uint16_t bits) {
  return static_cast<float>(c10::Half(bits, c10::Half::from_bits()));
}

namespace {

/// One block of llama.cpp's quantize_row_q8_0_ref; `x` holds 32 values.
std::uint16_t quantize_q8_0(const float* x, int* q) {
  float amax = 0;
  for (std::int64_t j = 0; j < block_width; ++j)
    amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0 ? 1 / d : 0;
  for (std::int64_t j = 0; j < block_width; ++j)
    q[j] = static_cast<int>(std::round(x[j] * id));
  return to_half_bits(d);
}

/// One block of llama.cpp's quantize_row_q4_0_ref, q[j] in [-8, 7].
std::uint16_t quantize_q4_0(const float* x, int* q) {
  float amax = 0, signed_max = 0;
  for (std::int64_t j = 0; j < block_width; ++j)
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      signed_max = x[j];
    }
  const float d = signed_max / -8;
  const float id = d != 0 ? 1 / d : 0;
  for (std::int64_t j = 0; j < block_width; ++j) // x id lies in [-8, 8]: truncating
    q[j] = std::min(15, static_cast<int>(        // x id + 8.5 rounds it to a nibble
                            static_cast<std::int8_t>(x[j] * id + 8.5f))) -
           8;
  return to_half_bits(d);
}

} // namespace

block_matrix::block_matrix(block_format format, std::int64_t rows, std::int64_t inputs)
    : format_(format), rows_(rows), inputs_(inputs),
      blocks_((inputs + block_width - 1) / block_width),
      // Padded by a group: products load a group's scales at a time (block_dot.cpp).
      scales_(static_cast<std::size_t>((groups() * blocks_ + 1) * group_rows)) {
  const auto total =
      static_cast<std::size_t>(groups() * group_rows * units_per_row() * unit_bytes);
  quants_.reset(static_cast<std::uint8_t*>(
      std::aligned_alloc(unit_bytes, std::max<std::size_t>(total, unit_bytes))));
  if (!quants_)
    throw std::bad_alloc();
  std::memset(quants_.get(), 0, total); // padding rows: zero weights, zero scales
}

block_matrix::block_matrix(block_format format, const float* weights, std::int64_t rows,
                           std::int64_t inputs)
    : block_matrix(format, rows, inputs) {
  float block[block_width];
  int q[block_width];
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t b = 0; b < blocks_; ++b) {
      const auto first = b * block_width;
      const auto n = std::min(block_width, inputs - first);
      std::fill(block, block + block_width, 0.0f); // padding: zero weights
      std::memcpy(block, weights + r * inputs + first,
                  static_cast<std::size_t>(n) * sizeof(float));
      store(r, b,
            format == block_format::q8_0 ? quantize_q8_0(block, q)
                                         : quantize_q4_0(block, q),
            q);
    }
}

block_matrix::block_matrix(block_format format,
                           const std::vector<const std::byte*>& records,
                           std::int64_t inputs)
    : block_matrix(format, static_cast<std::int64_t>(records.size()), inputs) {
  if (inputs % block_width != 0)
    throw std::invalid_argument("block_matrix: rows of records need whole blocks");
  const auto dtype = record_dtype(format);
  int q[block_width];
  for (std::int64_t r = 0; r < rows_; ++r)
    for (std::int64_t b = 0; b < blocks_; ++b) {
      const std::byte* record =
          records[static_cast<std::size_t>(r)] + b * record_bytes(dtype);
      for (std::int64_t j = 0; j < block_width; ++j)
        q[j] = record_quant(dtype, record, j);
      store(r, b, record_scale_bits(record), q);
    }
}

void block_matrix::store(std::int64_t r, std::int64_t b, std::uint16_t scale,
                         const int* q) {
  scales_[static_cast<std::size_t>(scale_offset(r) + b * group_rows)] = scale;
  auto* unit = quants_.get() + quant_offset(r) + unit_offset(format_, b);
  for (std::int64_t j = 0; j < block_width; ++j)
    unit[j] |= format_ == block_format::q8_0
                   ? static_cast<std::uint8_t>(static_cast<std::int8_t>(q[j]))
                   : static_cast<std::uint8_t>((q[j] + 8) << (b % 2 * 4));
}

void block_matrix::dequantize_row(std::int64_t r, float* out) const {
  for (std::int64_t b = 0; b < blocks_; ++b) {
    const float d = from_half_bits(scales(r)[b * group_rows]);
    const auto* unit = quants(r) + unit_offset(format_, b);
    const auto first = b * block_width;
    const auto n = std::min(block_width, inputs_ - first);
    for (std::int64_t j = 0; j < n; ++j)
      out[first + j] = d * static_cast<float>(quant_value(format_, unit, b, j));
  }
}

} // namespace canopy::backends
