#include <canopy/backends/checkpoints/checkpoint.hpp>

#include <canopy/backends/checkpoints/gguf_checkpoint.hpp>
#include <canopy/backends/checkpoints/gguf_file.hpp>
#include <canopy/backends/checkpoints/hf_checkpoint.hpp>
#include <canopy/backends/checkpoints/llama2c_checkpoint.hpp>

#include <system_error>

namespace canopy::backends {

namespace {

/// The two readers of one on-disk form: the whole checkpoint, and its config alone.
struct checkpoint_form {
  checkpoint (*load)(const std::filesystem::path&);
  model_config (*config)(const std::filesystem::path&);
};

constexpr checkpoint_form hf_directory{load_hf_checkpoint, load_hf_config};
constexpr checkpoint_form gguf_model{load_gguf_checkpoint, load_gguf_config};
constexpr checkpoint_form llama2c_model{load_llama2c_checkpoint, load_llama2c_config};

/// Which form `path` holds; throws checkpoint_error for a path no reader can take.
const checkpoint_form& form_of(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status))
    throw checkpoint_error(path.string() + ": " +
                           (ec && ec != std::errc::no_such_file_or_directory
                                ? ec.message()
                                : std::string("no such file or directory")));
  if (fs::is_directory(status))
    return hf_directory;
  // A file of an HF checkpoint lacks the rest of it (the config, the other shards).
  const std::string ext = path.extension().string();
  if (ext == ".safetensors" || ext == ".json")
    throw checkpoint_error(path.string() +
                           ": pass the HF checkpoint directory (holding config.json), "
                           "not one of its files");
  if (ext == ".gguf" || gguf_file::has_magic(path))
    return gguf_model;
  return llama2c_model;
}

} // namespace

checkpoint load_checkpoint(const std::filesystem::path& path) {
  return form_of(path).load(path);
}

model_config load_model_config(const std::filesystem::path& path) {
  return form_of(path).config(path);
}

} // namespace canopy::backends
