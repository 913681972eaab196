#include <canopy/backends/checkpoint.hpp>

#include <canopy/backends/hf_checkpoint.hpp>
#include <canopy/backends/llama2c_checkpoint.hpp>

#include <system_error>

namespace canopy::backends {

checkpoint load_checkpoint(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status))
    throw checkpoint_error(path.string() + ": " +
                           (ec && ec != std::errc::no_such_file_or_directory
                                ? ec.message()
                                : std::string("no such file or directory")));
  if (fs::is_directory(status))
    return load_hf_checkpoint(path);
  // A file of an HF checkpoint lacks the rest of it (the config, the other shards).
  const std::string ext = path.extension().string();
  if (ext == ".safetensors" || ext == ".json")
    throw checkpoint_error(path.string() +
                           ": pass the HF checkpoint directory (holding config.json), "
                           "not one of its files");
  return load_llama2c_checkpoint(path);
}

} // namespace canopy::backends
