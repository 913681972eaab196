#pragma once
// A token as OpenAI's completions logprobs report it: the model's log-prob of it where
// it stands, and the most likely tokens there.
// Thread contract: plain value and a pure function.

#include <canopy/cache/logprob_row.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace canopy::server {

struct token_score {
  std::int32_t id = 0;
  float logprob = 0;
  std::vector<std::pair<std::int32_t, float>> top; // most likely first, as /v1/logprobs'
                                                   // top_k orders them
};

/// Token `id` scored by `row` (the log-probs of its position), with the `top` most
/// likely ids.
token_score score_token(const cache::logprob_row& row, std::int32_t id, std::size_t top);

} // namespace canopy::server
