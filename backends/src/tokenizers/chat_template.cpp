// A tokenizer's chat templates (see chat_template.hpp).
#include <canopy/backends/tokenizers/chat_template.hpp>

#include <canopy/backends/checkpoints/checkpoint.hpp>

#include "tokenizers/json_object_file.hpp"
#include "tokenizers/tokenizer_files.hpp"

namespace canopy::backends {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

[[noreturn]] void malformed(const fs::path& file, const std::string& what) {
  throw checkpoint_error(file.string() + ": \"chat_template\" " + what);
}

/// tokenizer_config.json's "chat_template": a string or a list of named templates.
void add_configured(const fs::path& file, chat_templates& out) {
  const auto config = detail::read_json_object(file);
  if (!config.is_object() || !config.contains("chat_template") ||
      config.at("chat_template").is_null())
    return;
  const auto& value = config.at("chat_template");
  if (value.is_string()) {
    out.emplace("default", value.get<std::string>());
    return;
  }
  if (!value.is_array())
    malformed(file, "is neither a string nor a list of {\"name\", \"template\"}");
  for (const auto& entry : value) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
        !entry.at("name").is_string() || !entry.at("template").is_string())
      malformed(file,
                "has an entry that is not {\"name\": string, \"template\": string}: " +
                    entry.dump().substr(0, 80));
    if (!out.emplace(entry.at("name").get<std::string>(),
                     entry.at("template").get<std::string>())
             .second)
      malformed(file, "names \"" + entry.at("name").get<std::string>() + "\" twice");
  }
}

} // namespace

chat_templates read_chat_templates(const fs::path& folder) {
  chat_templates out;
  if (folder.empty())
    return out;
  add_configured(folder / "tokenizer_config.json", out);
  // transformers reads chat_template.jinja over the config's default template.
  const auto jinja = folder / "chat_template.jinja";
  std::error_code ec;
  if (fs::is_regular_file(jinja, ec)) {
    try {
      out["default"] = tokenizer_detail::read_file(jinja);
    } catch (const tokenizer_error& e) {
      throw checkpoint_error(e.what());
    }
  }
  return out;
}

} // namespace canopy::backends
