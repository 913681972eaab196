#pragma once
// Weights quantized in blocks of 32 along each row's inputs, as llama.cpp's Q8_0 and
// Q4_0 (its reference quantizers, rounding included, so the same float weights give
// the same blocks as llama-quantize):
//  - q8_0 ("int8"): d = max|w| / 127 per block, stored as float16; w ~ d q, q a signed
//    byte in [-127, 127]. A weight moves by at most d / 2 = max|w| / 254.
//  - q4_0 ("int4"): d = -m / 8 where m is the block's weight of largest magnitude,
//    with its sign; w ~ d (q - 8), q a nibble in [0, 15]: the grid reaches m but only
//    -7m/8 on the other side. A weight moves by at most |d| / 2 = max|w| / 16 inside
//    the grid, and by up to |d| = max|w| / 8 beyond -7m/8.
// Unlike llama.cpp's array of {d, quants} records, scales and quants are two arrays
// (quants in units: Note [quant units]), and rows are interleaved by groups of eight:
// block b of rows 8g..8g+7 lie side by side, so that a product reading eight rows at
// once reads one sequential stream (the hardware prefetcher kept separate row streams
// at a third of float32's bandwidth) and converts their eight scales in one step. A
// row whose width is not a multiple of 32 ends in a partial block padded with zero
// weights (stories260K's MLP is 172 wide), and the last group is padded with zero rows.
// Thread contract: immutable after construction; read from any thread.

#include <canopy/backends/checkpoints/checkpoint.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

namespace canopy::backends {

enum class block_format { q8_0, q4_0 };

constexpr std::int64_t block_width = 32;

// Note [quant units]: quants are stored in units of 32 bytes, one AVX2 register:
// an int8 block, or two int4 blocks of one row, the first block's values in the low
// nibbles (element j in byte j) and the second's in the high nibbles, each as q in
// [0, 15] (the value is q - 8). Unpacking a unit is a mask and a shift, where
// llama.cpp's layout (elements j and j + 16 of one block in byte j) needs five steps
// a block. A row with an odd number of int4 blocks ends in a half-filled unit.
constexpr std::int64_t unit_bytes = 32;
constexpr std::int64_t blocks_per_unit(block_format f) {
  return f == block_format::q8_0 ? 1 : 2;
}

/// Weight j of block b as a signed integer, from the unit holding it.
constexpr int quant_value(block_format f, const std::uint8_t* unit, std::int64_t b,
                          std::int64_t j) {
  return f == block_format::q8_0 ? static_cast<std::int8_t>(unit[j])
                                 : (unit[j] >> (b % 2 * 4) & 15) - 8;
}

/// The checkpoint dtype of `format`'s block records (GGUF's Q8_0 and Q4_0).
constexpr weight_dtype record_dtype(block_format f) {
  return f == block_format::q8_0 ? weight_dtype::q8_0 : weight_dtype::q4_0;
}

/// The format of a checkpoint dtype's block records; nullopt for a dense dtype.
constexpr std::optional<block_format> block_format_of(weight_dtype dtype) {
  if (dtype == weight_dtype::q8_0)
    return block_format::q8_0;
  if (dtype == weight_dtype::q4_0)
    return block_format::q4_0;
  return std::nullopt;
}

/// Rows per interleaved group: as many as a decoding product's tile reads at once
/// (block_product.cpp).
constexpr std::int64_t group_rows = 8;

/// Bytes from a row's first unit to the unit holding its block b (the rows of a group
/// interleave unit by unit).
constexpr std::int64_t unit_offset(block_format f, std::int64_t b) {
  return b / blocks_per_unit(f) * group_rows * unit_bytes;
}

class block_matrix {
public:
  /// Quantizes `weights` [rows, inputs], row-major.
  block_matrix(block_format format, const float* weights, std::int64_t rows,
               std::int64_t inputs);
  /// Rows already in llama.cpp's block records of `format` (checkpoint.hpp; a GGUF
  /// file's), row r's first record at records[r]: taken exactly, not requantized.
  /// `inputs` must be a multiple of 32.
  block_matrix(block_format format, const std::vector<const std::byte*>& records,
               std::int64_t inputs);

  block_format format() const { return format_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t inputs() const { return inputs_; }
  std::int64_t blocks_per_row() const { return blocks_; }
  std::int64_t groups() const { return (rows_ + group_rows - 1) / group_rows; }
  std::int64_t units_per_row() const {
    return (blocks_ + blocks_per_unit(format_) - 1) / blocks_per_unit(format_);
  }
  /// Memory the blocks take (scales and quants, padding included).
  std::size_t bytes() const {
    return static_cast<std::size_t>(groups() * group_rows *
                                    (blocks_ * 2 + units_per_row() * unit_bytes));
  }

  /// Row r's first quant unit and first scale (float16 bits). Unit u of row r + k (in
  /// r's group) is u * group_rows + k units further on, and its block b's scale
  /// b * group_rows + k scales on.
  const std::uint8_t* quants(std::int64_t r) const {
    return quants_.get() + quant_offset(r);
  }
  const std::uint16_t* scales(std::int64_t r) const {
    return scales_.data() + scale_offset(r);
  }
  /// out[inputs] = row r as the blocks hold it.
  void dequantize_row(std::int64_t r, float* out) const;

private:
  /// Zero blocks (the padding's final state).
  block_matrix(block_format format, std::int64_t rows, std::int64_t inputs);
  /// Block b of row r: its scale (float16 bits) and values q[32] (signed: [-127, 127]
  /// or [-8, 7]), into zeroed quants.
  void store(std::int64_t r, std::int64_t b, std::uint16_t scale, const int* q);

  std::int64_t quant_offset(std::int64_t r) const {
    return (r / group_rows * group_rows * units_per_row() + r % group_rows) * unit_bytes;
  }
  std::int64_t scale_offset(std::int64_t r) const {
    return r / group_rows * group_rows * blocks_ + r % group_rows;
  }
  struct free_deleter {
    void operator()(std::uint8_t* p) const { std::free(p); }
  };
  block_format format_;
  std::int64_t rows_, inputs_, blocks_;
  std::vector<std::uint16_t> scales_; // [groups][blocks][group_rows], then one group of
                                      // padding
  std::unique_ptr<std::uint8_t[], free_deleter>
      quants_; // [groups][units][group_rows][unit_bytes], 32-byte aligned: a unit
               // never splits a cache line
};

/// float <-> IEEE float16 bits, round to nearest even (c10's conversions).
std::uint16_t to_half_bits(float x);
float from_half_bits(std::uint16_t bits);

} // namespace canopy::backends
