#include "bench/sequence_census.hpp"

#include <canopy/backends/sequence_hash.hpp>

namespace canopy::app {

namespace {
constexpr std::uint64_t census_seed = 0x6A09E667F3BCC908ULL;
}

void sequence_census::add(const token_seq& tokens) {
  ++queries_;
  tokens_requested_ += tokens.size();
  if (!insert(tokens))
    ++repeated_;
}

void sequence_census::add_computed(const token_seq& tokens) {
  const auto before = prefixes_.size();
  insert(tokens);
  computed_ += prefixes_.size() - before;
}

bool sequence_census::insert(const token_seq& tokens) {
  scratch_.clear();
  auto state = backends::sequence_hash_start(census_seed);
  for (const auto token : tokens)
    scratch_.push_back(state = backends::sequence_hash_step(state, token));
  if (!sequences_.insert(state).second)
    return false; // its prefixes were all counted when it was first asked
  // Every prefix of a counted prefix is counted too, so stop at the first known one:
  // a query extending an earlier one costs one lookup per new token.
  for (auto it = scratch_.rbegin(); it != scratch_.rend(); ++it)
    if (!prefixes_.insert(*it).second)
      break;
  return true;
}

} // namespace canopy::app
