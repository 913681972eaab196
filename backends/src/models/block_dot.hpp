#pragma once
// The inner products of weights in blocks (weight_blocks.hpp) with activations
// quantized as llama.cpp quantizes them for its Q8_0 and Q4_0 products: per block of
// 32, d = max|x| / 127 (kept in float here) and q = round(x / d) in [-127, 127]. A
// block's product is an exact integer sum of 32 byte products, scaled by d_w d_x; the
// sum over blocks is in float.
//
// A tile of weight rows against activation rows at a time (Note [independent
// chains]): the activation rows share each loaded weight block, the weight rows each
// loaded activation block. Every (weight row, activation row) pair runs the same
// operations in the same order whatever the tile, so an answer does not depend on how
// queries were batched.
//
// Kernels per instruction set, chosen at load (block_kernels_here): AVX2 (with FMA and
// F16C: every CPU that has AVX2 has them) where the CPU has it, else portable C++;
// AVX-512 VNNI (block_dot_vnni.hpp) only when CANOPY_BLOCK_KERNELS=avx512_vnni asks
// (slower than AVX2 where measured). CANOPY_BLOCK_KERNELS=portable|avx2 names the others;
// without it, ATEN_CPU_CAPABILITY=default forces the portable kernels, as it does ATen's.
// The VNNI kernels give the AVX2 ones' bits; the portable ones agree to float rounding.
// Thread contract: pure functions.

#include "models/weight_blocks.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace canopy::backends {

/// Up to eight consecutive rows of a block_matrix within one group: block_matrix's
/// quants(r) and scales(r) of the first (row k's quant unit u is u * group_rows + k
/// units on, its block b's scale b * group_rows + k scales on).
struct weight_rows {
  const std::uint8_t* quants;
  const std::uint16_t* scales;
};

/// out[k * n + i] = weight row k . activation row i, for k < r and i < n (r 1..4 with
/// n 1..4 and r n at most 8, or r 8 with n 1). Activation row i's quants start at xq + i
/// * x_stride, its scales at xd + i * blocks.
using block_dot_signature = void(const weight_rows& w, int r, const std::int8_t* xq,
                                 const float* xd, std::int64_t blocks,
                                 std::int64_t x_stride, int n, float* out);
using block_dot_fn = block_dot_signature*;

/// Quantizes `rows` rows of `inputs` floats into q8 blocks: q [rows][blocks * 32]
/// (zero past `inputs`), d [rows][blocks]. Every kernel set rounds alike (half to
/// even), so the quants do not depend on the instruction set.
using quantize_fn = void (*)(const float* x, std::int64_t rows, std::int64_t inputs,
                             std::int64_t blocks, std::int8_t* q, float* d);

struct block_kernels {
  const char* isa; // "avx512_vnni", "avx2" or "portable"
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
/// The kernels that CANOPY_BLOCK_KERNELS (`asked`: empty, portable, avx2 or avx512_vnni)
/// and ATEN_CPU_CAPABILITY name on this CPU; a set the CPU lacks falls back to AVX2, then
/// portable. Throws std::invalid_argument for another `asked`.
block_kernels choose_block_kernels(const std::string& asked,
                                   const std::string& aten_capability);
/// What products use in this process: chosen once, from the environment.
const block_kernels& block_kernels_here();

/// The portable quantizer (quantize_fn).
void quantize_activations(const float* x, std::int64_t rows, std::int64_t inputs,
                          std::int64_t blocks, std::int8_t* q, float* d);

} // namespace canopy::backends
