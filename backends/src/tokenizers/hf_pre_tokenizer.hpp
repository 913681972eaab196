#pragma once
// tokenizer.json pre-tokenizers: Split (a pattern and one of HF's five behaviours,
// optionally inverted), ByteLevel (the optional prefix space and GPT-2's split),
// Metaspace and Sequence. Other types are refused by name. Internal to canopy_backends.
//
// Words stay raw bytes here: ByteLevel's spelling of bytes as alphabet characters is left
// to the BPE model (hf_bpe_model.hpp), which looks byte-level pieces up by their bytes.
// So ByteLevel must be the last pre-tokenizer of a chain (a later Split would see other
// characters than HF's does), and a chain with ByteLevel in it is refused otherwise.
//
// Thread contract: immutable after construction; split() from many threads.

#include "tokenizers/hf_json.hpp"

#include <memory>
#include <string>
#include <vector>

namespace canopy::backends::hf {

/// One piece of text on its way to the model.
struct word {
  std::string text;
  bool at_start = false; // begins the encoded text (Metaspace's prepend_scheme "first")
};

class pre_tokenizer {
public:
  virtual ~pre_tokenizer() = default;
  /// Splits (and may rewrite) every word; the result replaces `words`.
  virtual void split(std::vector<word>& words) const = 0;
  /// True when this is, or ends with, ByteLevel: words are to be read as bytes.
  virtual bool byte_level() const { return false; }
};

/// The pre-tokenizer `spec` describes; nullptr for a null spec (the whole text is one
/// word).
std::unique_ptr<const pre_tokenizer> make_pre_tokenizer(const json_node& spec);

} // namespace canopy::backends::hf
