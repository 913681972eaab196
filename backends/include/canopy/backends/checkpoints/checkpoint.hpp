#pragma once
// A loaded checkpoint: the model_config plus every weight as a typed, shaped view into
// memory that the checkpoint keeps alive (mapped files or owned buffers). Views use
// canonical HF names whatever the file format, so the models need one code path per
// architecture, not per format:
//   llama: model.embed_tokens.weight, model.layers.N.{self_attn,mlp,...},
//   model.norm.weight,
//          lm_head.weight (only when untied)
//   gpt2:  transformer.{wte,wpe,h.N.*,ln_f}.{weight,bias}, lm_head.weight (only when
//   untied)
// The exact list and shapes are in checkpoint_schema.hpp.
// Thread contract: load_checkpoint is a pure function of the file system; a checkpoint
// is an immutable value once built and may be read from any number of threads (copies
// share the storage).

#include <canopy/backends/checkpoints/checkpoint_error.hpp>
#include <canopy/backends/checkpoints/model_config.hpp>
#include <canopy/cache/enum_names.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace canopy::backends {

/// How a tensor's values are stored. f32, f16, bf16: one value each. q8_0 and q4_0
/// (GGUF files only): llama.cpp's block records, each run of 32 values along the last
/// dimension one record of a float16 scale d and then the quants:
///  - Q8_0, 34 bytes: 32 signed bytes q, value j = d q[j];
///  - Q4_0, 18 bytes: 16 bytes, value j (j < 16) in the low nibble of byte j and value
///    j + 16 in its high nibble, each d (nibble - 8).
enum class weight_dtype { f32, f16, bf16, q8_0, q4_0 };

/// Their safetensors and GGUF names.
inline constexpr std::array<enum_name<weight_dtype>, 5> weight_dtype_names{{
    {weight_dtype::f32, "F32"},
    {weight_dtype::f16, "F16"},
    {weight_dtype::bf16, "BF16"},
    {weight_dtype::q8_0, "Q8_0"},
    {weight_dtype::q4_0, "Q4_0"},
}};

inline bool is_block_dtype(weight_dtype dtype) {
  return dtype == weight_dtype::q8_0 || dtype == weight_dtype::q4_0;
}

/// Values per block record.
constexpr std::int64_t record_values = 32;

/// Bytes per record of a block dtype: 34 (Q8_0) or 18 (Q4_0).
inline std::size_t record_bytes(weight_dtype dtype) {
  return dtype == weight_dtype::q8_0 ? 34 : 18;
}

/// The scale of a record, as float16 bits.
inline std::uint16_t record_scale_bits(const std::byte* record) {
  return static_cast<std::uint16_t>(static_cast<unsigned>(record[0]) |
                                    static_cast<unsigned>(record[1]) << 8);
}

/// Value j of a record before scaling: q[j] (Q8_0) or its nibble - 8 (Q4_0).
inline int record_quant(weight_dtype dtype, const std::byte* record, std::int64_t j) {
  const auto* q = reinterpret_cast<const std::uint8_t*>(record + 2);
  if (dtype == weight_dtype::q8_0)
    return static_cast<std::int8_t>(q[j]);
  return (j < 16 ? q[j] & 15 : q[j - 16] >> 4) - 8;
}

/// Bytes per element of a dense dtype: 4 for f32, 2 for f16 and bf16.
inline std::size_t element_size(weight_dtype dtype) {
  return dtype == weight_dtype::f32 ? 4 : 2;
}

/// "F32", "F16", "BF16", "Q8_0", "Q4_0".
const char* to_string(weight_dtype dtype);

struct tensor_view {
  weight_dtype dtype = weight_dtype::f32;
  std::vector<std::int64_t> shape; // row-major
  const std::byte* data = nullptr; // little-endian, byte_size bytes, may be unaligned
};

/// Number of elements (1 for a scalar, shape []).
std::int64_t numel(const tensor_view& view);
/// numel * element_size, or for block dtypes numel / 32 records.
std::size_t byte_size(const tensor_view& view);

struct checkpoint {
  std::string source; // the path it came from (for messages)
  model_config config;
  std::map<std::string, tensor_view>
      tensors;                         // canonical names (see checkpoint_schema.hpp)
  std::shared_ptr<const void> storage; // keeps mapped files / owned buffers alive
};

/// An HF directory (config.json + model.safetensors, or the sharded
/// model.safetensors.index.json), a GGUF file (gguf_checkpoint.hpp) or a llama2.c .bin
/// file. Throws checkpoint_error
/// naming the file (and tensor) on any problem.
checkpoint load_checkpoint(const std::filesystem::path& path);

/// The config of what load_checkpoint(path) would load, read without the weights
/// (config.json of an HF directory, the header of a GGUF or .bin file). Throws as
/// load_checkpoint.
model_config load_model_config(const std::filesystem::path& path);

} // namespace canopy::backends
