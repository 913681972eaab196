#pragma once
// The answer of POST /v1/completions, in OpenAI's shape: a choice per prompt and n,
// each with its text, finish_reason and (when asked) logprobs: tokens, token_logprobs,
// top_logprobs and text_offset.
//
// Text is bytes: each token stands for its exact bytes (the tokenizer's byte
// vocabulary; a control token such as </s> for none), a choice's text is its tokens'
// bytes one after another (echo: the prompt's tokens first), and text_offset[i] is
// where token i starts in that text, in code points. So offsets add up: text_offset[i
// + 1] - text_offset[i] is the length of tokens[i] whenever a token is whole UTF-8. A
// token whose bytes are not UTF-8 on their own is spelled "bytes:\xNN..." in tokens and
// top_logprobs (OpenAI's convention); a control token by its text ("</s>"), adding
// nothing to the text. Generation stops before the first stop string: the text ends
// there, and logprobs keep the tokens that start before it.
// Thread contract: pure functions over plain values; a choice_pieces belongs to one
// thread at a time.

#include <canopy/cache/types.hpp>
#include <canopy/server/api/token_score.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace canopy::server {

/// How the model's token ids read as text: engine::byte_vocab() and
/// engine::special_token_texts().
struct token_texts {
  const std::vector<std::optional<std::string>>& bytes;
  const std::vector<std::optional<std::string>>& special;
};

/// One token of a choice as it reads.
struct token_piece {
  std::int32_t id = 0;
  std::optional<token_score> score; // none: the first echoed token, or no logprobs
  std::string bytes;                // what it adds to the text (cut at a stop string)
  std::size_t offset = 0;           // where it starts in the text, in code points
};

/// A choice's tokens made into pieces as they come: the echoed prompt, then each
/// generated token. A generated token is held back while a stop string could still
/// begin in its bytes, so a piece once given is final (it can be streamed). The first
/// stop string ends the text: the token it starts in is cut there, and the tokens
/// from there on add no piece.
class choice_pieces {
public:
  /// `texts` must outlive this.
  choice_pieces(std::vector<std::string> stop, const token_texts& texts);
  /// echo: the prompt's tokens, the first unscored and each other by scores[i - 1]
  /// (when there are scores).
  std::vector<token_piece> echo(const cache::token_seq& prompt,
                                const std::vector<token_score>& scores);
  /// The next generated token: the pieces it makes final.
  std::vector<token_piece> add(std::int32_t id, std::optional<token_score> score);
  /// Generation ended: the pieces held back.
  std::vector<token_piece> flush();
  /// Whether a stop string has appeared.
  bool cut() const { return cut_.has_value(); }
  /// "stop" when a stop string appeared or `stopped` (an EOS id ended it), else "length".
  const char* finish_reason(bool stopped) const;

private:
  struct held_token {
    std::int32_t id;
    std::optional<token_score> score;
    std::size_t start; // in generated_
  };
  std::vector<token_piece> release(std::size_t upto);
  token_piece piece(std::int32_t id, std::optional<token_score> score, std::string bytes);

  const std::vector<std::string> stop_;
  const token_texts texts_;
  std::size_t longest_stop_ = 0;
  std::size_t code_points_ = 0;    // of the text given so far
  std::string generated_;          // every generated token's bytes
  std::vector<held_token> held_;   // generated, not given yet
  std::optional<std::size_t> cut_; // where the first stop string starts in generated_
};

/// choices[index] of the answer, from all of its pieces.
nlohmann::json completion_choice(const std::vector<token_piece>& pieces,
                                 std::size_t index, bool logprobs,
                                 const token_texts& texts, const char* finish_reason);

/// One piece as a streamed chunk's choice: its text and logprobs that token's alone.
/// A token that is not whole UTF-8 reads as U+FFFD in its chunk's text.
nlohmann::json chunk_choice(const token_piece& piece, std::size_t index, bool logprobs,
                            const token_texts& texts);

/// The streamed chunk's choice that ends choice `index`.
nlohmann::json finish_chunk_choice(std::size_t index, const char* finish_reason);

/// How token `id` is spelled in tokens and top_logprobs.
std::string token_spelling(const token_texts& texts, std::int32_t id);

} // namespace canopy::server
