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
// AVX-512 VNNI (block_dot_vnni.hpp), VNNI for four-row tiles and AVX2 for the others
// ("avx512_vnni+avx2", Note [kernels by tile]); else AVX2 (with FMA and F16C: every CPU
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

struct block_kernels {
  const char* isa; // "avx512_vnni+avx2", "avx512_vnni", "avx2" or "portable"
  block_dot_fn q8_0, q4_0;
  quantize_fn quantize;
  block_dot_fn for_format(block_format f) const {
    return f == block_format::q8_0 ? q8_0 : q4_0;
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
