#pragma once
// What a workload asked, independent of how it was answered: queries, tokens requested,
// distinct prefixes not computed in a warm-up (the fewest tokens any engine must compute
// to answer them all) and exact repeats. Sequences are told apart by a 64-bit hash of
// their tokens; at the bench's sizes a collision is vanishingly unlikely.
// Thread contract: one thread at a time.

#include <canopy/engine.hpp>

#include <cstdint>
#include <unordered_set>
#include <vector>

namespace canopy::app {

class sequence_census {
public:
  void add(const token_seq& tokens);
  /// Records a sequence computed before the counted queries (a warm-up): its prefixes
  /// then count as neither unique nor requested, and a query asking it again exactly
  /// as a repeat. Not a query.
  void add_computed(const token_seq& tokens);

  std::uint64_t queries() const { return queries_; }
  std::uint64_t tokens_requested() const { return tokens_requested_; }
  /// Distinct non-empty prefixes of every query, less those computed before.
  std::uint64_t unique_prefixes() const { return prefixes_.size() - computed_; }
  /// Queries whose exact sequence an earlier query (or the warm-up) had asked.
  std::uint64_t repeated_queries() const { return repeated_; }

private:
  /// Counts the prefixes of `tokens`; false when the sequence itself was known.
  bool insert(const token_seq& tokens);

  std::uint64_t queries_ = 0;
  std::uint64_t tokens_requested_ = 0;
  std::uint64_t repeated_ = 0;
  std::uint64_t computed_ = 0;                  // prefixes in prefixes_ from add_computed
  std::unordered_set<std::uint64_t> prefixes_;  // hash of every distinct prefix
  std::unordered_set<std::uint64_t> sequences_; // hash of every distinct query
  std::vector<std::uint64_t> scratch_;          // prefix hashes of the query being added
};

} // namespace canopy::app
