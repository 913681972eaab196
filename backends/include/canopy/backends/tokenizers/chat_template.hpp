#pragma once
// A tokenizer's chat templates, as HF's transformers finds them beside the tokenizer:
//   - chat_template.jinja: the default template (what transformers saves since 4.47);
//   - tokenizer_config.json "chat_template": one template (the default), or a list of
//     {"name": ..., "template": ...} (Hermes, Command R: "default", "tool_use", "rag").
// The templates are Jinja source: Canopy keeps and serves them; clients render them
// (the Python client with Jinja2, as transformers does).
// Thread contract: a pure function of the file system.

#include <filesystem>
#include <map>
#include <string>

namespace canopy::backends {

/// Template name -> Jinja source; a lone template is named "default".
using chat_templates = std::map<std::string, std::string>;

/// The chat templates in `folder` (empty when it has none; an empty path has none).
/// Throws checkpoint_error naming the file and key for malformed ones.
chat_templates read_chat_templates(const std::filesystem::path& folder);

} // namespace canopy::backends
