#pragma once
// The safetensors file format (https://github.com/huggingface/safetensors):
//   [u64 little-endian N][N bytes of JSON header][data section]
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the data section) plus an optional "__metadata__" object of
// strings. Parsing validates everything a reader could trip over, so a returned header
// can be turned into views without further checks: every tensor lies inside the data
// section, holds exactly numel * element_size bytes and overlaps no other tensor.
// Accepted dtypes: F32, F16, BF16 (the ones the models compute with).
// Thread contract: pure functions.

#include <canopy/backends/checkpoints/checkpoint.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::backends {

/// The largest header accepted (the reference implementation's limit): a larger
/// length field is corruption, not a model.
inline constexpr std::uint64_t max_safetensors_header_bytes = 100'000'000;

struct safetensors_entry {
  weight_dtype dtype = weight_dtype::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0; // byte offsets relative to the data section; end - begin ==
  std::uint64_t end = 0;   // numel * element_size
};

struct safetensors_header {
  std::uint64_t data_offset = 0; // where the data section starts in the file (8 + N)
  std::map<std::string, safetensors_entry> tensors;
  std::map<std::string, std::string> metadata; // "__metadata__", if any
};

/// Parses and validates the header of a whole safetensors file held in `file_bytes`.
/// Throws checkpoint_error naming `file_name` (and the tensor) on any problem.
safetensors_header parse_safetensors_header(std::string_view file_bytes,
                                            const std::string& file_name);

/// Views of every tensor of a parsed file (pointers into `file_bytes`).
std::map<std::string, tensor_view> safetensors_views(const safetensors_header& header,
                                                     std::string_view file_bytes);

/// The bytes that precede the data section when `tensors` are written in name order,
/// back to back: the length field and the JSON header, space-padded to a multiple of 8
/// so every tensor of a well-aligned file starts 8-byte aligned.
std::string encode_safetensors_header(const std::map<std::string, tensor_view>& tensors,
                                      const std::map<std::string, std::string>& metadata);

/// A whole file in memory (header, then the tensors in name order). For tests and
/// small files; write_safetensors_file streams instead.
std::string encode_safetensors(const std::map<std::string, tensor_view>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

} // namespace canopy::backends
