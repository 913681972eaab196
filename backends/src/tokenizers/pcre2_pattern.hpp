#pragma once
// A regular expression compiled by PCRE2 in UTF + UCP mode (Unicode \p{L}, \p{N}, \s, as
// Python's `regex` and the HF tokenizers' Oniguruma read them), JIT-compiled where the
// platform supports it, and the matches it finds in a text. Internal to canopy_backends.
//
// Invalid UTF-8 in a subject is skipped, never an error: such bytes are simply not
// inside any match.
//
// Thread contract: immutable after construction; find_all() may be called from many
// threads (the compiled pattern is shared read-only, match data is per call).

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::backends {

class pcre2_pattern {
public:
  struct match {
    std::size_t begin, end; // byte offsets, end exclusive
  };

  /// Throws std::invalid_argument with PCRE2's message and the offset it stopped at.
  explicit pcre2_pattern(std::string_view pattern);
  ~pcre2_pattern();
  pcre2_pattern(const pcre2_pattern&) = delete;
  pcre2_pattern& operator=(const pcre2_pattern&) = delete;

  /// Every non-empty, non-overlapping match of `text`, left to right.
  std::vector<match> find_all(std::string_view text) const;

private:
  struct compiled;
  std::unique_ptr<compiled> compiled_;
};

/// The pieces of `text` when `matches` and the gaps between them each stand alone, in
/// order (HF's "Isolated" split; GPT-2's pre-tokenizer).
std::vector<std::string_view> isolate(std::string_view text,
                                      const std::vector<pcre2_pattern::match>& matches);

} // namespace canopy::backends
