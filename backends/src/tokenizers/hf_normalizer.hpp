#pragma once
// tokenizer.json normalizers: NFC, NFD, NFKC, NFKD (utf8proc), Prepend, Replace and
// Sequence, as the HF tokenizers apply them to each stretch of text between added
// tokens. Other types are refused by name. Internal to canopy_backends.
// Thread contract: immutable after construction; apply() from many threads.

#include "tokenizers/hf_json.hpp"

#include <memory>
#include <string>

namespace canopy::backends::hf {

class normalizer {
public:
  virtual ~normalizer() = default;
  /// Throws std::invalid_argument for text a Unicode normalizer cannot read (not UTF-8).
  virtual void apply(std::string& text) const = 0;
};

/// The normalizer `spec` describes; nullptr for a null spec (no normalization).
std::unique_ptr<const normalizer> make_normalizer(const json_node& spec);

} // namespace canopy::backends::hf
