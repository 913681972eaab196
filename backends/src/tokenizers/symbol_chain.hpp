#pragma once
// A word's symbols as a doubly linked list while BPE merges adjacent pairs. Both the
// GPT-2 and the llama2.c tokenizers take their pairs from a heap, where a pair may have
// gone stale (a side merged since) by the time it is popped; the chain says whether a
// pair still stands and splices the merge in O(1).
// Thread contract: a local value of one encode call.

#include <canopy/cache/types.hpp>

#include <cstddef>
#include <vector>

namespace canopy::backends {

class symbol_chain {
public:
  static constexpr std::size_t none = static_cast<std::size_t>(-1);

  explicit symbol_chain(std::vector<cache::token_id> symbols)
      : symbols_(std::move(symbols)), prev_(symbols_.size()), next_(symbols_.size()),
        alive_(symbols_.size(), true) {
    const auto n = symbols_.size();
    for (std::size_t i = 0; i < n; ++i) {
      prev_[i] = i == 0 ? none : i - 1;
      next_[i] = i + 1 == n ? none : i + 1;
    }
  }

  std::size_t size() const { return symbols_.size(); }
  cache::token_id at(std::size_t i) const { return symbols_[i]; }
  std::size_t prev(std::size_t i) const { return prev_[i]; }
  std::size_t next(std::size_t i) const { return next_[i]; }

  /// True while `left` and `right` are adjacent and still hold the ids the pair was
  /// made of.
  bool stands(std::size_t left, std::size_t right, cache::token_id left_id,
              cache::token_id right_id) const {
    return alive_[left] && next_[left] == right && symbols_[left] == left_id &&
           symbols_[right] == right_id;
  }

  /// Replaces the pair (left, right) by `merged` at `left`.
  void merge(std::size_t left, std::size_t right, cache::token_id merged) {
    symbols_[left] = merged;
    alive_[right] = false;
    next_[left] = next_[right];
    if (next_[right] != none)
      prev_[next_[right]] = left;
  }

  /// The symbols left, in order, appended to `out`.
  void append_to(std::vector<cache::token_id>& out) const {
    for (std::size_t i = 0; i < symbols_.size(); ++i)
      if (alive_[i])
        out.push_back(symbols_[i]);
  }

private:
  std::vector<cache::token_id> symbols_;
  std::vector<std::size_t> prev_, next_;
  std::vector<bool> alive_;
};

} // namespace canopy::backends
