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

} // namespace canopy::actors
