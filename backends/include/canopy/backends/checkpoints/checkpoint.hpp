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

enum class weight_dtype { f32, f16, bf16 };

/// Their safetensors names.
inline constexpr std::array<enum_name<weight_dtype>, 3> weight_dtype_names{{
    {weight_dtype::f32, "F32"},
    {weight_dtype::f16, "F16"},
    {weight_dtype::bf16, "BF16"},
}};

/// Bytes per element: 4 for f32, 2 for f16 and bf16.
inline std::size_t element_size(weight_dtype dtype) {
  return dtype == weight_dtype::f32 ? 4 : 2;
}

/// "F32", "F16", "BF16": the safetensors spelling.
const char* to_string(weight_dtype dtype);

struct tensor_view {
  weight_dtype dtype = weight_dtype::f32;
  std::vector<std::int64_t> shape; // row-major
  const std::byte* data =
      nullptr; // little-endian, numel * element_size bytes, may be unaligned
};

/// Number of elements (1 for a scalar, shape []).
std::int64_t numel(const tensor_view& view);
/// numel(view) * element_size(view.dtype).
std::size_t byte_size(const tensor_view& view);

struct checkpoint {
  std::string source; // the path it came from (for messages)
  model_config config;
  std::map<std::string, tensor_view>
      tensors;                         // canonical names (see checkpoint_schema.hpp)
  std::shared_ptr<const void> storage; // keeps mapped files / owned buffers alive
};

/// An HF directory (config.json + model.safetensors, or the sharded
/// model.safetensors.index.json) or a llama2.c .bin file. Throws checkpoint_error
/// naming the file (and tensor) on any problem.
checkpoint load_checkpoint(const std::filesystem::path& path);

/// The config of what load_checkpoint(path) would load, read without the weights
/// (config.json of an HF directory, the header of a .bin). Throws as load_checkpoint.
model_config load_model_config(const std::filesystem::path& path);

} // namespace canopy::backends
