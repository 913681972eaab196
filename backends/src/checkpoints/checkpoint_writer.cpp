#include <canopy/backends/checkpoints/checkpoint_writer.hpp>

#include <canopy/backends/checkpoints/checkpoint_schema.hpp>
#include <canopy/backends/checkpoints/hf_config.hpp>
#include <canopy/backends/checkpoints/safetensors.hpp>

#include <cstring>
#include <fstream>
#include <stdexcept>
#include <system_error>

namespace canopy::backends {

namespace {

namespace fs = std::filesystem;

/// Writes `parts` to `file` through a temporary sibling and a rename.
template <class WriteParts>
void write_atomically(const fs::path& file, WriteParts&& write_parts) {
  const fs::path temp = file.string() + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw checkpoint_error(file.string() + ": cannot create " + temp.string());
    write_parts(out);
    out.flush();
    if (!out)
      throw checkpoint_error(file.string() + ": write failed");
  }
  std::error_code ec;
  fs::rename(temp, file, ec);
  if (ec) {
    fs::remove(temp, ec);
    throw checkpoint_error(file.string() + ": cannot rename " + temp.string() + ": " +
                           ec.message());
  }
}

bool is_query_or_key(const std::string& name) {
  auto ends_with = [&](const char* suffix) {
    const std::size_t n = std::strlen(suffix);
    return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
  };
  return ends_with(".self_attn.q_proj.weight") || ends_with(".self_attn.k_proj.weight");
}

} // namespace

void create_output_directory(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw checkpoint_error(dir.string() + ": cannot create directory: " + ec.message());
}

void write_file(const fs::path& file, std::string_view bytes) {
  write_atomically(file, [&](std::ofstream& out) {
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  });
}

void write_safetensors_file(const fs::path& file,
                            const std::map<std::string, tensor_view>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  write_atomically(file, [&](std::ofstream& out) {
    const std::string header = encode_safetensors_header(tensors, metadata);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const auto& [name, view] : tensors)
      out.write(reinterpret_cast<const char*>(view.data),
                static_cast<std::streamsize>(byte_size(view)));
  });
}

std::vector<std::byte> interleaved_to_rotate_half(const tensor_view& weight,
                                                  std::int64_t head_dim) {
  if (weight.shape.size() != 2 || head_dim <= 0 || head_dim % 2 != 0 ||
      weight.shape[0] % head_dim != 0)
    throw std::invalid_argument(
        "interleaved_to_rotate_half: need a [heads * head_dim, in] matrix and an even "
        "head_dim");
  const std::size_t row_bytes =
      weight.shape[0] > 0 ? byte_size(weight) / static_cast<std::size_t>(weight.shape[0])
                          : 0;
  const std::int64_t half = head_dim / 2;
  std::vector<std::byte> out(byte_size(weight));
  for (std::int64_t head = 0; head < weight.shape[0] / head_dim; ++head)
    for (std::int64_t c = 0; c < 2; ++c)
      for (std::int64_t j = 0; j < half; ++j) {
        const std::int64_t to = head * head_dim + c * half + j;
        const std::int64_t from = head * head_dim + 2 * j + c;
        if (row_bytes > 0)
          std::memcpy(out.data() + static_cast<std::size_t>(to) * row_bytes,
                      weight.data + static_cast<std::size_t>(from) * row_bytes,
                      row_bytes);
      }
  return out;
}

void write_hf_checkpoint(const checkpoint& ckpt, const fs::path& dir) {
  check_checkpoint(ckpt);
  create_output_directory(dir);

  std::map<std::string, tensor_view> tensors = ckpt.tensors;
  std::vector<std::vector<std::byte>> permuted; // owns the reordered q/k rows
  if (llama_style(ckpt.config.arch) && ckpt.config.rope == rope_pairs::interleaved) {
    for (auto& [name, view] : tensors)
      if (is_query_or_key(name)) {
        permuted.push_back(interleaved_to_rotate_half(view, ckpt.config.head_dim));
        view.data = permuted.back().data();
      }
  }
  // torch_dtype is informative only (HF loads each tensor in its own dtype).
  const weight_dtype dtype =
      tensors
          .at(llama_style(ckpt.config.arch) ? "model.embed_tokens.weight"
                                            : "transformer.wte.weight")
          .dtype;
  const std::string config = hf_config_json(ckpt.config, dtype);
  write_file(dir / "config.json", config);
  write_safetensors_file(dir / "model.safetensors", tensors, {{"format", "pt"}});
}

} // namespace canopy::backends
