#pragma once
// Drawing the next token from a log-prob row: argmax at temperature 0, else from
// softmax(logprobs / temperature). Each sampled sequence owns a random stream derived
// from (seed, index), so batch_sample's prompts do not share one seed.
// Thread contract: pure functions; a stream belongs to one sequence.

#include <cstddef>
#include <cstdint>
#include <random>

namespace canopy::actors {

/// The random stream of sequence `index` under `seed`.
std::mt19937_64 sampling_stream(std::uint64_t seed, std::uint64_t index);

/// Draws a token id from logprobs[0..vocab).
std::int32_t sample_token(const float* logprobs, std::size_t vocab, double temperature,
                          std::mt19937_64& stream);

} // namespace canopy::actors
