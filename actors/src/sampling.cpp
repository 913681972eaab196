#include <canopy/actors/sampling.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace canopy::actors {

std::mt19937_64 sampling_stream(std::uint64_t seed, std::uint64_t index) {
  std::seed_seq sequence{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                         static_cast<std::uint32_t>(index),
                         static_cast<std::uint32_t>(index >> 32)};
  return std::mt19937_64(sequence);
}

std::int32_t sample_token(const float* logprobs, std::size_t vocab, double temperature,
                          std::mt19937_64& stream) {
  if (temperature <= 0)
    return static_cast<std::int32_t>(std::max_element(logprobs, logprobs + vocab) - logprobs);
  // Inverse CDF over exp((lp - max) / T) in double, so tiny probabilities still count.
  const double top = *std::max_element(logprobs, logprobs + vocab);
  std::vector<double> cumulative(vocab);
  double total = 0;
  for (std::size_t v = 0; v < vocab; ++v) {
    total += std::exp((logprobs[v] - top) / temperature);
    cumulative[v] = total;
  }
  double u = std::uniform_real_distribution<double>(0.0, total)(stream);
  auto it = std::upper_bound(cumulative.begin(), cumulative.end(), u);
  return static_cast<std::int32_t>(std::min<std::size_t>(it - cumulative.begin(), vocab - 1));
}

sampling_run::sampling_run(std::vector<cache::token_seq> prompts, std::size_t max_tokens,
                           std::vector<std::int32_t> eos_token_ids, double temperature,
                           std::uint64_t seed)
  : prompts_(std::move(prompts)), generated_(prompts_.size()),
    hit_eos_(prompts_.size(), false), max_tokens_(max_tokens), eos_(std::move(eos_token_ids)),
    temperature_(temperature) {
  for (std::size_t i = 0; i < prompts_.size(); ++i)
    streams_.push_back(sampling_stream(seed, i));
}

bool sampling_run::finished(std::size_t i) const {
  return hit_eos_[i] || generated_[i].size() >= max_tokens_;
}

bool sampling_run::finished() const {
  for (std::size_t i = 0; i < prompts_.size(); ++i)
    if (!finished(i))
      return false;
  return true;
}

std::vector<std::pair<std::size_t, cache::token_seq>> sampling_run::next_queries() const {
  std::vector<std::pair<std::size_t, cache::token_seq>> queries;
  for (std::size_t i = 0; i < prompts_.size(); ++i) {
    if (finished(i))
      continue;
    cache::token_seq context = prompts_[i];
    context.insert(context.end(), generated_[i].begin(), generated_[i].end());
    queries.emplace_back(i, std::move(context));
  }
  return queries;
}

void sampling_run::advance(std::size_t i, const float* logprobs, std::size_t vocab) {
  auto token = sample_token(logprobs, vocab, temperature_, streams_[i]);
  generated_[i].push_back(token);
  hit_eos_[i] = std::find(eos_.begin(), eos_.end(), token) != eos_.end();
}

} // namespace canopy::actors
