#pragma once
// A model folder's small JSON files (config.json, tokenizer_config.json, ...), read whole
// (internal to canopy_backends).
// Thread contract: a pure function of the file system.

#include <nlohmann/json.hpp>

#include <filesystem>

namespace canopy::backends::detail {

/// The JSON object in `file`; null when there is no such file. Throws checkpoint_error
/// naming the file when it is not a JSON object.
nlohmann::json read_json_object(const std::filesystem::path& file);

} // namespace canopy::backends::detail
