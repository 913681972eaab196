#pragma once
// Drawing the next token from a log-prob row: argmax at temperature 0, else from
// softmax(logprobs / temperature), restricted to the nucleus when top_p < 1. Each sampled
// sequence owns a random stream derived from (seed, index), so batch_sample's prompts do
// not share one seed. Thread contract: pure functions; a stream, like a sampling_run,
// belongs to one thread at a time.

#include <canopy/cache/types.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace canopy {

/// The random stream of sequence `index` under `seed`.
std::mt19937_64 sampling_stream(std::uint64_t seed, std::uint64_t index);

/// Draws a token id from logprobs[0..vocab). top_p < 1: only from the most likely
/// tokens whose probabilities (at that temperature) first reach top_p together.
std::int32_t sample_token(const float* logprobs, std::size_t vocab, double temperature,
                          std::mt19937_64& stream, double top_p = 1.0);

/// Several prompts sampled together, one token per step each, until max_tokens, an
/// EOS id, or stop() (a stop string, say). engine::batch_sample drives it with futures
/// and the HTTP gateway with messages, so both draw exactly the same tokens for the same
/// seed.
class sampling_run {
public:
  sampling_run(std::vector<cache::token_seq> prompts, std::size_t max_tokens,
               std::vector<std::int32_t> eos_token_ids, double temperature,
               std::uint64_t seed, double top_p = 1.0);

  /// The contexts to query this step: (prompt index, prompt + generated so far), for
  /// every prompt not finished; empty once all are.
  std::vector<std::pair<std::size_t, cache::token_seq>> next_queries() const;
  /// Draws prompt i's next token from the row after its current context.
  void advance(std::size_t i, const float* logprobs, std::size_t vocab);
  /// Prompt i generates no more.
  void stop(std::size_t i) { stopped_[i] = true; }
  /// Whether prompt i ended before max_tokens (an EOS id or stop()).
  bool stopped(std::size_t i) const { return stopped_[i]; }
  bool finished() const;
  /// Whether prompt i generates no more (max_tokens, an EOS id or stop()).
  bool finished(std::size_t i) const;
  /// The generated tokens of each prompt (without the prompt).
  const std::vector<cache::token_seq>& generated() const { return generated_; }

private:
  std::vector<cache::token_seq> prompts_;
  std::vector<cache::token_seq> generated_; // [prompts]
  std::vector<std::mt19937_64> streams_;    // [prompts]
  std::vector<bool> stopped_;               // [prompts]
  std::size_t max_tokens_;
  std::vector<std::int32_t> eos_;
  double temperature_;
  double top_p_;
};

} // namespace canopy
