#pragma once
// The merge table of a byte-pair encoding and the merging itself: a word's symbols are
// merged pair by pair, the adjacent pair of lowest rank first (every occurrence of it,
// left to right), until no adjacent pair is in the table. This is openai/gpt-2
// encoder.py's loop and gives what the HF tokenizers' BPE gives (it merges one
// occurrence at a time, leftmost first, which comes to the same: a merge never makes
// another pair of its own rank, the merged piece being longer than either side).
// Internal to canopy_backends.
//
// Thread contract: add() while building, then immutable; merge() from many threads.

#include <canopy/backends/tokenizers/tokenizer.hpp>
#include <canopy/cache/types.hpp>

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace canopy::backends {

class bpe_merges {
public:
  /// The next rank: `left` then `right` merge into `result`. A pair added twice keeps its
  /// later rank, as encoder.py's dict and the HF tokenizers' map do.
  void add(cache::token_id left, cache::token_id right, cache::token_id result);

  std::size_t size() const { return table_.size(); }

  /// The table's merges by rank, lowest first (a pair added twice once, at its later
  /// rank).
  std::vector<merge_rule> rules() const;

  /// Merges `symbols` (one word's initial symbols) and appends the result to `out`.
  void merge(std::vector<cache::token_id> symbols,
             std::vector<cache::token_id>& out) const;

private:
  struct entry {
    std::uint32_t rank;
    cache::token_id result;
  };
  // Words up to short_word symbols take the plain rescanning loop, longer ones a heap
  // (the same result; rescanning a long word for every merge is quadratic).
  static constexpr std::size_t short_word = 32;
  void merge_short(std::vector<cache::token_id>& symbols,
                   std::vector<cache::token_id>& out) const;
  void merge_long(std::vector<cache::token_id> symbols,
                  std::vector<cache::token_id>& out) const;
  const entry* find(cache::token_id left, cache::token_id right) const;

  std::unordered_map<std::uint64_t, entry> table_; // (left id, right id) -> rank, result
  std::uint32_t next_rank_ = 0;
};

} // namespace canopy::backends
