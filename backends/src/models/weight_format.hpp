#pragma once
// What `weight_dtype` selects when it names no compute dtype: the Llama family's weight
// matrices stored narrower than float32 and multiplied in float32 on the CPU.
//  - bf16 ("bfloat16"): each weight rounded to bfloat16 (8 bits of significand, round
//    to nearest even; a weight moves by at most 2^-8 of itself), products in float32
//    (bfloat16_product.hpp): AVX2 kernels widening each weight in a register for one or
//    two rows, BLAS over panels widened into a scratch for more. A bfloat16 file's
//    weights are kept exactly.
//  - q8_0 ("int8") and q4_0 ("int4"): blocks of 32 with a float16 scale each
//    (weight_blocks.hpp), products in integers.
// Thread contract: constants and pure functions.

#include "models/weight_blocks.hpp"

#include <canopy/cache/enum_names.hpp>

#include <array>
#include <optional>
#include <stdexcept>
#include <string>

namespace canopy::backends {

enum class weight_format { bf16, q8_0, q4_0 };

/// The names `weight_dtype` takes beside the compute dtype's.
inline constexpr std::array<enum_name<weight_format>, 3> weight_format_names{{
    {weight_format::bf16, "bfloat16"},
    {weight_format::q8_0, "int8"},
    {weight_format::q4_0, "int4"},
}};

inline std::string weight_format_name(weight_format format) {
  return std::string(name_of(weight_format_names, format));
}

/// The format a weight_dtype name selects; nullopt for "" (dense weights in the compute
/// dtype); throws std::invalid_argument naming the known names otherwise.
inline std::optional<weight_format> parse_weight_format(const std::string& name) {
  if (name.empty())
    return std::nullopt;
  if (const auto format = value_of(weight_format_names, name))
    return format;
  throw std::invalid_argument("unknown weight_dtype '" + name +
                              "' (known: bfloat16, int8, int4, or the compute dtype)");
}

/// The blocks of a format; nullopt for bfloat16.
constexpr std::optional<block_format> blocks_of(weight_format f) {
  if (f == weight_format::q8_0)
    return block_format::q8_0;
  if (f == weight_format::q4_0)
    return block_format::q4_0;
  return std::nullopt;
}

constexpr weight_format format_of(block_format f) {
  return f == block_format::q8_0 ? weight_format::q8_0 : weight_format::q4_0;
}

/// Bits a weight takes (a block's scale shared by its 32 weights): which of two formats
/// holds more precision.
constexpr double bits_per_weight(weight_format f) {
  return f == weight_format::bf16 ? 16.0 : f == weight_format::q8_0 ? 8.5 : 4.5;
}

} // namespace canopy::backends
