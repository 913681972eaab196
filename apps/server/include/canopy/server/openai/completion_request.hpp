#pragma once
// The body of POST /v1/completions (OpenAI's legacy completions API), parsed and
// checked like the other requests (api_requests.hpp): a parse never throws, and an
// error names the field at fault. Fields OpenAI defines that Canopy does not implement
// are accepted only at their neutral values (best_of = n, penalties 0, logit_bias {},
// suffix null); other unknown fields are refused. null reads as absent.
// Thread contract: pure functions.

#include <canopy/server/api/api_requests.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::server {

/// The most top_logprobs alternatives a request may ask for (OpenAI's limit).
inline constexpr std::size_t max_completion_logprobs = 20;
/// The most stop strings (OpenAI's limit).
inline constexpr std::size_t max_stop_strings = 4;

struct completion_request {
  std::string model; // required; must name the served model or a loaded adapter
  std::vector<sequence_input>
      prompts;                 // "prompt": a text, texts, token ids or lists of them
  std::size_t max_tokens = 16; // 0: score the prompt only
  bool echo = false;           // the prompt's tokens come back before the completion
  std::optional<std::size_t>
      logprobs;                  // 0..20 alternatives per token; absent: no logprobs
  double temperature = 1.0;      // 0: the most likely token
  double top_p = 1.0;            // (0, 1]
  std::uint64_t seed = 0;        // absent: 0, so an unseeded request repeats too
  std::size_t n = 1;             // completions per prompt
  std::vector<std::string> stop; // generation ends before the first one that appears
  bool stream = false;           // server-sent events
  bool stream_usage = false;     // stream_options.include_usage
  std::string cache_salt;        // vLLM's: "" none (api_requests.hpp)
};

/// `limits`: max_batch bounds prompts x n, max_sample_tokens bounds max_tokens.
parsed<completion_request> parse_completion_request(std::string_view body,
                                                    const request_limits& limits);

} // namespace canopy::server
