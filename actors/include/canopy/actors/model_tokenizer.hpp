#pragma once
// The tokenizer of an engine's model: the one its configuration names, or the one
// found beside the model, checked against the model's head; and the model's BOS and EOS
// ids (backends/special_tokens.hpp).
// Thread contract: load_model_tokenizer is a pure function of the file system; a
// model_tokenizer is immutable and may be read from any thread.

#include <canopy/backends/special_tokens.hpp>
#include <canopy/backends/tokenizer.hpp>
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
};

/// No tokenizer (nullopt) for the mock backend, the built-in synthetic model, or a
/// model with none beside it. Throws canopy::error(errc::invalid_config) for a
/// tokenizer file that cannot be read, or one with more ids than the model's head
/// has rows (its ids past the head could never be scored).
std::optional<model_tokenizer> load_model_tokenizer(const engine_config& config,
                                                    std::int64_t vocab_size);

/// What the model's files say of BOS and EOS (none for the mock and the built-in
/// synthetic model). Throws canopy::error(errc::invalid_config) for malformed files.
backends::special_tokens load_special_tokens(const engine_config& config,
                                             std::int64_t vocab_size,
                                             const model_tokenizer* tokenizer);

} // namespace canopy::actors
