#include <canopy/sampling.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace canopy {

std::mt19937_64 sampling_stream(std::uint64_t seed, std::uint64_t index) {
  std::seed_seq sequence{
      static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
      static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32)};
  return std::mt19937_64(sequence);
}

namespace {

/// The smallest set of most likely ids whose weights reach top_p of `total`, in id
/// order (ties broken by the lower id, so the set does not depend on the sort).
std::vector<std::int32_t> nucleus(const std::vector<double>& weights, double total,
                                  double top_p) {
  std::vector<std::int32_t> ids(weights.size());
  for (std::size_t v = 0; v < ids.size(); ++v)
    ids[v] = static_cast<std::int32_t>(v);
  std::stable_sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
    return weights[a] > weights[b];
  });
  double kept = 0;
  std::size_t n = 0;
  while (n < ids.size() && (n == 0 || kept < top_p * total))
    kept += weights[ids[n++]];
  ids.resize(n);
  std::sort(ids.begin(), ids.end());
  return ids;
}

} // namespace

std::int32_t sample_token(const float* logprobs, std::size_t vocab, double temperature,
                          std::mt19937_64& stream, double top_p) {
  if (temperature <= 0)
    return static_cast<std::int32_t>(std::max_element(logprobs, logprobs + vocab) -
                                     logprobs);
  // Inverse CDF over exp((lp - max) / T) in double, so tiny probabilities still count.
  const double top = *std::max_element(logprobs, logprobs + vocab);
  std::vector<double> weights(vocab);
  double total = 0;
  for (std::size_t v = 0; v < vocab; ++v)
    total += weights[v] = std::exp((logprobs[v] - top) / temperature);
  std::vector<std::int32_t> ids;
  if (top_p < 1) {
    ids = nucleus(weights, total, top_p);
    total = 0;
    for (auto id : ids)
      total += weights[id];
  }
  const double u = std::uniform_real_distribution<double>(0.0, total)(stream);
  double cumulative = 0;
  const std::size_t n = ids.empty() ? vocab : ids.size();
  for (std::size_t k = 0; k < n; ++k) {
    const auto id = ids.empty() ? static_cast<std::int32_t>(k) : ids[k];
    cumulative += weights[id];
    if (u < cumulative)
      return id;
  }
  return ids.empty() ? static_cast<std::int32_t>(vocab - 1) : ids.back();
}

sampling_run::sampling_run(std::vector<cache::token_seq> prompts, std::size_t max_tokens,
                           std::vector<std::int32_t> eos_token_ids, double temperature,
                           std::uint64_t seed, double top_p)
    : prompts_(std::move(prompts)), generated_(prompts_.size()),
      stopped_(prompts_.size(), false), max_tokens_(max_tokens),
      eos_(std::move(eos_token_ids)), temperature_(temperature), top_p_(top_p) {
  for (std::size_t i = 0; i < prompts_.size(); ++i)
    streams_.push_back(sampling_stream(seed, i));
}

bool sampling_run::finished(std::size_t i) const {
  return stopped_[i] || generated_[i].size() >= max_tokens_;
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
  auto token = sample_token(logprobs, vocab, temperature_, streams_[i], top_p_);
  generated_[i].push_back(token);
  if (std::find(eos_.begin(), eos_.end(), token) != eos_.end())
    stopped_[i] = true;
}

} // namespace canopy
