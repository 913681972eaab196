#include <canopy/backends/checkpoints/checkpoint.hpp>

#include <canopy/backends/checkpoints/gguf_checkpoint.hpp>
#include <canopy/backends/checkpoints/gguf_file.hpp>
#include <canopy/backends/checkpoints/hf_checkpoint.hpp>
#include <canopy/backends/checkpoints/llama2c_checkpoint.hpp>

#include <system_error>

namespace canopy::backends {

namespace {

enum class checkpoint_form { hf_directory, gguf_file, llama2c_file };

/// Which loader reads `path`; throws checkpoint_error for a path neither can.
checkpoint_form form_of(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status))
    throw checkpoint_error(path.string() + ": " +
                           (ec && ec != std::errc::no_such_file_or_directory
                                ? ec.message()
                                : std::string("no such file or directory")));
  if (fs::is_directory(status))
    return checkpoint_form::hf_directory;
  // A file of an HF checkpoint lacks the rest of it (the config, the other shards).
  const std::string ext = path.extension().string();
  if (ext == ".safetensors" || ext == ".json")
    throw checkpoint_error(path.string() +
                           ": pass the HF checkpoint directory (holding config.json), "
                           "not one of its files");
  if (ext == ".gguf" || gguf_file::has_magic(path))
    return checkpoint_form::gguf_file;
  return checkpoint_form::llama2c_file;
}

} // namespace

checkpoint load_checkpoint(const std::filesystem::path& path) {
  switch (form_of(path)) {
  case checkpoint_form::hf_directory:
    return load_hf_checkpoint(path);
  case checkpoint_form::gguf_file:
    return load_gguf_checkpoint(path);
  case checkpoint_form::llama2c_file:
    break;
  }
  return load_llama2c_checkpoint(path);
}

model_config load_model_config(const std::filesystem::path& path) {
  switch (form_of(path)) {
  case checkpoint_form::hf_directory:
    return load_hf_config(path);
  case checkpoint_form::gguf_file:
    return load_gguf_config(path);
  case checkpoint_form::llama2c_file:
    break;
  }
  return load_llama2c_config(path);
}

} // namespace canopy::backends
