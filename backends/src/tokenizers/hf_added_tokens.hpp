#pragma once
// tokenizer.json's added_tokens: the tokens found in text before the model sees it, as
// the HF tokenizers find them: leftmost, and the longest at a position; those with
// "normalized": false in the raw text, the others in each normalized stretch between
// them. lstrip/rstrip take the whitespace beside a match into it. single_word is refused.
// Internal to canopy_backends.
// Thread contract: immutable after construction; split() from many threads.

#include "tokenizers/hf_json.hpp"

#include <canopy/cache/types.hpp>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::backends::hf {

struct added_token {
  cache::token_id id = 0;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false, rstrip = false;
};

/// A stretch of text: an added token, or text between them.
struct text_part {
  std::string_view text;
  std::optional<cache::token_id> token;
};

class added_tokens {
public:
  explicit added_tokens(const json_node& list);

  const std::vector<added_token>& all() const { return tokens_; }
  bool any_normalized() const { return any_normalized_; }

  /// `text` cut at the added tokens of the given kind ("normalized" or not).
  std::vector<text_part> split(std::string_view text, bool normalized) const;

private:
  /// The longest token of the kind that starts at `at`, if any.
  const added_token* longest_at(std::string_view text, std::size_t at,
                                bool normalized) const;

  std::vector<added_token> tokens_;
  bool any_normalized_ = false;
  // Candidates by first byte, longest first.
  std::array<std::vector<const added_token*>, 256> by_first_byte_;
};

/// Rust's char::is_whitespace for the code point starting at text[at]; its length in
/// bytes when it is whitespace, else 0.
std::size_t whitespace_at(std::string_view text, std::size_t at);

} // namespace canopy::backends::hf
