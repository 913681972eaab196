#pragma once
// GPT-2's pre-tokenizer: splits text into the words that BPE then encodes one by one,
// with openai/gpt-2 encoder.py's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// compiled by PCRE2 (pcre2_pattern.hpp). Internal to canopy_backends.
//
// The pattern covers every valid UTF-8 text, so its matches tile the text. Bytes that are
// not valid UTF-8 (which encoder.py, working on Python str, never sees) match nothing;
// they are returned as words of their own, so no input byte is ever lost.
//
// Thread contract: immutable after construction; split() may be called from many threads
// (the compiled pattern is shared read-only, match data is per call).

#include "tokenizers/pcre2_pattern.hpp"

#include <string_view>
#include <vector>

namespace canopy::backends {

class gpt2_pretokenizer {
public:
  static const std::string_view pattern;

  /// Compiles the pattern; throws std::invalid_argument when PCRE2 rejects it (a PCRE2
  /// built without Unicode support).
  gpt2_pretokenizer();

  /// The words of `text`, in order; views into `text`, concatenating to all of it.
  std::vector<std::string_view> split(std::string_view text) const;

private:
  pcre2_pattern pattern_;
};

} // namespace canopy::backends
