// A model folder's small JSON files (see json_object_file.hpp).
#include "tokenizers/json_object_file.hpp"

#include <canopy/backends/checkpoints/checkpoint.hpp>

#include "tokenizers/tokenizer_files.hpp"

namespace canopy::backends::detail {

nlohmann::json read_json_object(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    return nullptr;
  try {
    auto doc = nlohmann::json::parse(tokenizer_detail::read_file(file));
    if (!doc.is_object())
      throw checkpoint_error(file.string() + ": not a JSON object");
    return doc;
  } catch (const nlohmann::json::exception& e) {
    throw checkpoint_error(file.string() + ": not valid JSON: " + e.what());
  } catch (const tokenizer_error& e) {
    throw checkpoint_error(e.what());
  }
}

} // namespace canopy::backends::detail
