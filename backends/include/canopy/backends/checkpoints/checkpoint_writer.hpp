#pragma once
// Writing checkpoints as HF directories (config.json + model.safetensors), the one
// format every loader here and HF transformers read. Used by `canopy make-model`, by
// conversions (a llama2.c file written as HF), and by tests that build broken files.
// Files are written to a temporary name and renamed, so a reader never sees half a file.
// Thread contract: pure functions of their arguments and the file system; concurrent
// writers to the same directory race (last rename wins).

#include <canopy/backends/checkpoints/checkpoint.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::backends {

/// Creates `dir` (and its parents) unless it exists. Throws checkpoint_error naming it.
void create_output_directory(const std::filesystem::path& dir);

/// Writes `bytes` to `file`. Throws checkpoint_error naming the file when it cannot.
void write_file(const std::filesystem::path& file, std::string_view bytes);

/// Writes one safetensors file: `tensors` in name order, back to back, with `metadata`.
/// Throws checkpoint_error naming the file when it cannot be written.
void write_safetensors_file(const std::filesystem::path& file,
                            const std::map<std::string, tensor_view>& tensors,
                            const std::map<std::string, std::string>& metadata = {});

/// Writes `dir`/config.json (LlamaForCausalLM or GPT2LMHeadModel) and
/// `dir`/model.safetensors (each tensor in its own dtype, metadata format "pt"),
/// creating `dir` if needed. The checkpoint is checked first (check_checkpoint), so a
/// written directory always loads. A llama checkpoint with interleaved RoPE rows (a
/// llama2.c file) has its q/k rows permuted to HF's rotate_half order, as HF's
/// convert_llama_weights_to_hf.py does, so the directory computes the same function.
void write_hf_checkpoint(const checkpoint& ckpt, const std::filesystem::path& dir);

/// The rows of a [heads * head_dim, in] q or k weight reordered from interleaved RoPE
/// pairs (2j, 2j+1) to rotate_half pairs (j, j + head_dim/2): new row
/// h*hd + c*hd/2 + j = old row h*hd + 2j + c. Works on raw bytes, for any dtype.
std::vector<std::byte> interleaved_to_rotate_half(const tensor_view& weight,
                                                  std::int64_t head_dim);

} // namespace canopy::backends
