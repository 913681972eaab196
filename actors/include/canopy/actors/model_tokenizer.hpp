#pragma once
// The tokenizer of an engine's model: the one its configuration names, or the one
// found beside the model, checked against the model's head; and the model's BOS and EOS
// ids (backends/special_tokens.hpp), and its chat templates (backends/chat_template.hpp).
// The mock backend takes a tokenizer too (`tokenizer`), as genlm's MockAsyncLM(tokenizer)
// does: it then serves rows of the tokenizer's size, and text.
// Thread contract: the load_ functions are pure functions of the file system; a
// model_tokenizer is immutable and may be read from any thread.

#include <canopy/backends/tokenizers/chat_template.hpp>
#include <canopy/backends/tokenizers/special_tokens.hpp>
#include <canopy/backends/tokenizers/tokenizer.hpp>
#include <canopy/engine_config.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace canopy::actors {

struct model_tokenizer {
  std::shared_ptr<const backends::tokenizer_i> tokenizer;
  /// [vocab]: the tokenizer's byte vocabulary, padded with std::nullopt up to the
  /// number of head rows.
  std::vector<std::optional<std::string>> byte_vocab;
  /// [vocab]: for each id without bytes, how the tokenizer spells it ("</s>"), if it
  /// names it; std::nullopt for every other id.
  std::vector<std::optional<std::string>> special_texts;
  /// The chat templates beside the tokenizer's file.
  backends::chat_templates chat_templates;
};

/// The tokenizer file or folder the configuration names (`tokenizer`), else, for the
/// torch backend, the one found beside the model; empty when there is none or the
/// backend takes no tokenizer.
std::filesystem::path configured_tokenizer_path(const engine_config& config);

/// The tokenizer at `path` (from configured_tokenizer_path); null for an empty path (the
/// built-in synthetic model, a model with none beside it, the mock without `tokenizer`).
/// Throws canopy::error(errc::invalid_config) for a tokenizer file that cannot be read.
std::shared_ptr<const backends::tokenizer_i>
load_configured_tokenizer(const std::filesystem::path& path);

/// `tokenizer` over a head of `vocab_size` rows, with the chat templates in the folder
/// of `path` (where it was loaded from). Throws canopy::error(errc::invalid_config)
/// when it has more ids than the head has rows (its ids past the head could never be
/// scored). Throws canopy::error(errc::invalid_config) for malformed chat templates too.
model_tokenizer
fit_model_tokenizer(std::shared_ptr<const backends::tokenizer_i> tokenizer,
                    const std::filesystem::path& path, std::int64_t vocab_size);

/// What the model's files say of BOS and EOS; for the mock with a tokenizer, the files in
/// the tokenizer's folder; none for the built-in synthetic model. Throws
/// canopy::error(errc::invalid_config) for malformed files.
backends::special_tokens load_special_tokens(const engine_config& config,
                                             std::int64_t vocab_size,
                                             const model_tokenizer* tokenizer);

} // namespace canopy::actors
