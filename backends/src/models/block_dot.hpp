#pragma once
// The inner products of weights in blocks (weight_blocks.hpp) with activations
// quantized as llama.cpp quantizes them for its Q8_0 and Q4_0 products: per block of
// 32, d = max|x| / 127 (kept in float here) and q = round(x / d) in [-127, 127].
//
// Note [exact block sums]
// A block's product is an exact integer: the sum of its 32 byte products (at most
// 32 x 128 x 127 in magnitude, so exact in int32 and again in float). Each (weight
// row, activation row) pair then adds its blocks in order, one FMA a block:
// sum = fma(float(S_b), d_w d_x, sum), d_w d_x rounded to float first. Nothing else is
// rounded, so every kernel, whatever its lanes, its tile and its instruction set, gives
// the same bits: the portable one, AVX2 and AVX-512 VNNI alike, and an answer does not
// depend on how queries were batched. The kernels reduce a tile's eight pairs' integer
// lanes into one register and run that register's FMA once for the eight.
//
// Kernels per instruction set, chosen at load (block_kernels_here): where the CPU has
// AVX-512 VNNI (block_dot_vnni.hpp), VNNI's wide tiles for batches (Note [wide tiles]),
// VNNI for four-row tiles and AVX2 for the others ("avx512_vnni+avx2", Note [kernels by
// tile]); else AVX2 (with FMA and F16C: every CPU
// that has AVX2 has them) where the CPU has it; else portable C++.
// CANOPY_BLOCK_KERNELS=portable|avx2|avx512_vnni|avx512_vnni+avx2 names a set; without
// it, ATEN_CPU_CAPABILITY=avx2 stops at AVX2 and =default forces the portable kernels,
// as they do ATen's.
// Thread contract: pure functions.

#include "models/weight_blocks.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace canopy::backends {

/// One group of eight weight rows of a block_matrix: its quants(r) and scales(r) for
/// the group's first row r (row k's quant unit u is u * group_rows + k units on, its
/// block b's scale b * group_rows + k scales on).
struct weight_rows {
  const std::uint8_t* quants;
  const std::uint16_t* scales;
};

/// Activation rows quantized in blocks (quantize_fn): row i's quants start at
/// quants + i * stride; block b's scales of consecutive rows lie side by side from
/// scales + b * rows, and so do the sums of their quants (sums + b * rows), which the
/// kernels need where a weight is stored with an offset (int4's q = w + 8).
struct activation_blocks {
  const std::int8_t* quants;
  const float* scales;
  const std::int32_t* sums;
  std::int64_t stride; // quants of a row: blocks * block_width
  std::int64_t rows;   // rows quantized: the step between blocks' scales and sums
  std::int64_t blocks;

  /// The rows from row t on (a tile's first row t).
  activation_blocks from_row(std::int64_t t) const {
    return {quants + t * stride, scales + t, sums + t, stride, rows, blocks};
  }
};

/// Activation rows per tile: 1, 2 or 4 (a decoding pass takes one).
constexpr int max_tile_rows = 4;

/// out[k * n + i] = weight row k . activation row i of `x`, for the group's eight
/// weight rows k and n activation rows i (n 1, 2 or 4) starting at x's first row.
using block_dot_signature = void(const weight_rows& w, const activation_blocks& x, int n,
                                 float* out);
using block_dot_fn = block_dot_signature*;

/// Quantizes `rows` rows of `inputs` floats into q8 blocks: q [rows][blocks * 32]
/// (zero past `inputs`), d [blocks][rows] and s [blocks][rows] (each block's sum of
/// quants). Every kernel set rounds alike (half to even), so the quants do not depend
/// on the instruction set.
using quantize_fn = void (*)(const float* x, std::int64_t rows, std::int64_t inputs,
                             std::int64_t blocks, std::int8_t* q, float* d,
                             std::int32_t* s);

// Note [wide tiles]
// Sixteen activation rows at once, one per 32-bit lane of a 512-bit register, so that
// no lane needs summing across: VNNI's vpdpbusd multiplies four activation bytes of each
// row (the register) by the same four weight bytes (broadcast) and adds them into the
// row's lane. Eight weight rows take eight such registers, and a block adds 64
// instructions for 8 x 16 x 32 products, where the four-row tile's horizontal sums
// cost about as much as its products. vpdpbusd takes its register's bytes unsigned:
// the activations enter as x + 128, and each block's lane starts at -128 times the
// weight row's block sum, so that it ends at the exact integer of Note [exact block
// sums], and the same FMA follows: the bits of every other kernel.
//  - The weights of a group are made ready once per chunk of rows (prepare_wide_fn):
//    int8 units are read where they are; int4 ones are unpacked into int8 in the
//    thread's scratch (one group's, never the matrix); their offsets and float scales
//    are computed alongside.
//  - The activations are repacked once per product (pack_wide_rows), row-quads
//    interleaved: block b's quad j (bytes 4j..4j+3) of the sixteen rows is one
//    64-byte register.

/// Activation rows a wide tile takes (Note [wide tiles]).
constexpr int wide_tile_rows = 16;

/// A group's eight weight rows made ready for wide tiles: int8 quants [blocks][8][32],
/// offsets[b * 8 + k] = -128 x the sum of row k's block b, and scales[b * 8 + k] row k's
/// block b scale as a float.
struct wide_weights {
  const std::int8_t* quants;
  const std::int32_t* offsets;
  const float* scales;
};

/// Sixteen activation rows for wide tiles (pack_wide_rows): quants [blocks][8 quads][16
/// rows][4 bytes], each byte x + 128, and scales [blocks][16]; rows past the real ones
/// hold zeros (quants 128, scales 0).
struct wide_activations {
  const std::uint8_t* quants;
  const float* scales;
  std::int64_t blocks;
};

/// Makes the group `w` ready for wide tiles over `blocks` blocks, writing offsets and
/// scales (blocks x 8 each) and, for int4, int8 quants (blocks x 256 bytes; int8's are
/// read in place) into the caller's scratch.
using prepare_wide_signature = wide_weights(const weight_rows& w, std::int64_t blocks,
                                            std::int8_t* quants, std::int32_t* offsets,
                                            float* scales);
using prepare_wide_fn = prepare_wide_signature*;
/// out[k * 16 + i] = weight row k . activation row i, for the eight and the sixteen.
using wide_dot_signature = void(const wide_weights& w, const wide_activations& x,
                                float* out);
using wide_dot_fn = wide_dot_signature*;

/// Bytes and floats of one wide tile's activations over `blocks` blocks.
constexpr std::int64_t wide_quant_bytes(std::int64_t blocks) {
  return blocks * block_width * wide_tile_rows;
}
constexpr std::int64_t wide_scale_count(std::int64_t blocks) {
  return blocks * wide_tile_rows;
}

/// Repacks n (1..16) rows of x from row `first` for a wide tile, into quants
/// (wide_quant_bytes) and scales (wide_scale_count).
void pack_wide_rows(const activation_blocks& x, std::int64_t first, std::int64_t n,
                    std::uint8_t* quants, float* scales);

struct block_kernels {
  const char* isa; // "avx512_vnni+avx2", "avx512_vnni", "avx2" or "portable"
  block_dot_fn q8_0, q4_0;
  quantize_fn quantize;
  // Wide tiles (Note [wide tiles]), where the set has them (VNNI); null elsewhere.
  prepare_wide_fn prepare_wide_q8_0 = nullptr, prepare_wide_q4_0 = nullptr;
  wide_dot_fn wide_dot = nullptr;

  block_dot_fn for_format(block_format f) const {
    return f == block_format::q8_0 ? q8_0 : q4_0;
  }
  prepare_wide_fn prepare_wide_for(block_format f) const {
    return f == block_format::q8_0 ? prepare_wide_q8_0 : prepare_wide_q4_0;
  }
};

const block_kernels& portable_block_kernels();
/// The AVX2 kernels, or nullopt where the CPU lacks AVX2, FMA or F16C.
std::optional<block_kernels> avx2_block_kernels();
/// The AVX-512 VNNI kernels, or nullopt where the CPU (or the OS) lacks AVX512F, BW,
/// VL or VNNI, or AVX2, FMA or F16C.
std::optional<block_kernels> avx512_vnni_block_kernels();
/// VNNI for four-row tiles, AVX2 for the others (Note [kernels by tile]), or nullopt
/// where avx512_vnni_block_kernels is.
std::optional<block_kernels> by_tile_block_kernels();
/// The kernels that CANOPY_BLOCK_KERNELS (`asked`: empty, portable, avx2, avx512_vnni or
/// avx512_vnni+avx2) and ATEN_CPU_CAPABILITY name on this CPU; a set the CPU lacks falls
/// back to AVX2, then portable. Throws std::invalid_argument for another `asked`.
block_kernels choose_block_kernels(const std::string& asked,
                                   const std::string& aten_capability);
/// What products use in this process: chosen once, from the environment.
const block_kernels& block_kernels_here();

/// The portable quantizer (quantize_fn).
void quantize_activations(const float* x, std::int64_t rows, std::int64_t inputs,
                          std::int64_t blocks, std::int8_t* q, float* d, std::int32_t* s);

} // namespace canopy::backends
