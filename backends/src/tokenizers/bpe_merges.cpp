// BPE merging (see bpe_merges.hpp).
#include "tokenizers/bpe_merges.hpp"

#include "tokenizers/symbol_chain.hpp"

#include <algorithm>
#include <queue>

namespace canopy::backends {

namespace {

using cache::token_id;

std::uint64_t pair_key(token_id left, token_id right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
         static_cast<std::uint32_t>(right);
}

} // namespace

void bpe_merges::add(token_id left, token_id right, token_id result) {
  table_.insert_or_assign(pair_key(left, right), entry{next_rank_++, result});
}

std::vector<merge_rule> bpe_merges::rules() const {
  std::vector<std::pair<std::uint32_t, merge_rule>> ranked;
  ranked.reserve(table_.size());
  for (const auto& [key, e] : table_)
    ranked.push_back(
        {e.rank, merge_rule{static_cast<token_id>(key >> 32),
                            static_cast<token_id>(key & 0xffffffffu), e.result}});
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<merge_rule> out;
  out.reserve(ranked.size());
  for (const auto& [rank, rule] : ranked)
    out.push_back(rule);
  return out;
}

const bpe_merges::entry* bpe_merges::find(token_id left, token_id right) const {
  const auto it = table_.find(pair_key(left, right));
  return it == table_.end() ? nullptr : &it->second;
}

void bpe_merges::merge(std::vector<token_id> symbols, std::vector<token_id>& out) const {
  if (symbols.size() <= short_word)
    merge_short(symbols, out);
  else
    merge_long(std::move(symbols), out);
}

void bpe_merges::merge_short(std::vector<token_id>& symbols,
                             std::vector<token_id>& out) const {
  // encoder.py's loop, literally: take the adjacent pair with the lowest rank, merge
  // every non-overlapping occurrence of it left to right, repeat until no adjacent pair
  // merges. For the short words that make up most text this beats the heap below.
  std::vector<token_id> next;
  next.reserve(symbols.size());
  while (symbols.size() > 1) {
    const entry* best = nullptr;
    token_id best_left = 0, best_right = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const entry* e = find(symbols[i], symbols[i + 1]);
      if (e != nullptr && (best == nullptr || e->rank < best->rank)) {
        best = e;
        best_left = symbols[i];
        best_right = symbols[i + 1];
      }
    }
    if (best == nullptr)
      break;
    next.clear();
    for (std::size_t i = 0; i < symbols.size();) {
      if (i + 1 < symbols.size() && symbols[i] == best_left &&
          symbols[i + 1] == best_right) {
        next.push_back(best->result);
        i += 2;
      } else {
        next.push_back(symbols[i++]);
      }
    }
    symbols.swap(next);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void bpe_merges::merge_long(std::vector<token_id> symbols,
                            std::vector<token_id>& out) const {
  // The pairs wait in a heap ordered by (rank, position), and one round pops every pair
  // of the lowest rank and merges them left to right. That is the loop's result: a
  // round's pairs all exist when it starts (every pair is pushed when it becomes
  // adjacent), and a merge never creates another pair of the same rank. Stale pairs are
  // skipped when popped.
  struct candidate {
    std::uint32_t rank;
    std::size_t left, right;
    token_id left_id, right_id, result;
  };
  const auto later = [](const candidate& a, const candidate& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };
  std::priority_queue<candidate, std::vector<candidate>, decltype(later)> heap(later);
  const std::size_t n = symbols.size();
  symbol_chain chain(std::move(symbols));
  const auto consider = [&](std::size_t left, std::size_t right) {
    if (left == symbol_chain::none || right == symbol_chain::none)
      return;
    if (const entry* e = find(chain.at(left), chain.at(right)))
      heap.push(
          candidate{e->rank, left, right, chain.at(left), chain.at(right), e->result});
  };
  for (std::size_t i = 0; i + 1 < n; ++i)
    consider(i, i + 1);
  std::vector<candidate> round;
  while (!heap.empty()) {
    round.clear();
    const std::uint32_t rank = heap.top().rank;
    while (!heap.empty() && heap.top().rank == rank) { // already in left-to-right order
      round.push_back(heap.top());
      heap.pop();
    }
    for (const candidate& c : round) {
      if (!chain.stands(c.left, c.right, c.left_id, c.right_id))
        continue; // stale, or overlapping a merge just made in this round
      chain.merge(c.left, c.right, c.result);
      consider(chain.prev(c.left), c.left);
      consider(c.left, chain.next(c.left));
    }
  }
  chain.append_to(out);
}

} // namespace canopy::backends
