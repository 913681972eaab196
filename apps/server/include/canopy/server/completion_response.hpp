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
// Thread contract: pure functions over plain values.

#include <canopy/cache/types.hpp>
#include <canopy/server/token_score.hpp>

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

/// One completion of one prompt, as computed.
struct completion_result {
  cache::token_seq prompt;
  /// echo with logprobs: the prompt's tokens after the first, scored.
  std::vector<token_score> prompt_scores;
  cache::token_seq generated;
  std::vector<token_score> generated_scores; // with logprobs: one per generated token
  bool stopped = false;                      // an EOS id or a stop string ended it
};

struct completion_format {
  bool echo = false;
  bool logprobs = false;
  std::vector<std::string> stop;
};

/// The position in `generated`'s bytes where the first of `stop` begins, or nullopt.
std::optional<std::size_t> stop_position(const token_texts& texts,
                                         const cache::token_seq& generated,
                                         const std::vector<std::string>& stop);

/// Whether the last token of `generated` completed one of `stop` (an earlier token
/// would have been asked before): only the bytes it could have completed are read.
bool ends_in_stop(const token_texts& texts, const cache::token_seq& generated,
                  const std::vector<std::string>& stop);

/// choices[index] of the answer.
nlohmann::json completion_choice(const completion_result& result, std::size_t index,
                                 const completion_format& format, const token_texts& texts);

/// The same choice as server-sent events give it (stream): one choice object per token,
/// its text and logprobs that token's alone, then one with the finish_reason. A token
/// that is not whole UTF-8 reads as U+FFFD in its chunk's text.
std::vector<nlohmann::json> completion_chunks(const completion_result& result,
                                              std::size_t index,
                                              const completion_format& format,
                                              const token_texts& texts);

/// How token `id` is spelled in tokens and top_logprobs.
std::string token_spelling(const token_texts& texts, std::int32_t id);

} // namespace canopy::server
