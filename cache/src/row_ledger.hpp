#pragma once
// The stored rows of a token_trie: which nodes hold the log-probs after their prefix,
// their bytes against the log-prob budget (and the entry limit), what locks keep, and
// the eviction candidates: nodes holding a row, unlocked, with no child holding one
// (leaf-first, Note [eviction candidates] in token_trie.hpp). Internal to
// canopy::cache.
//
// Thread contract: not thread-safe; owned by one token_trie beside its node_tree.

#include "node_tree.hpp"

namespace canopy::cache::detail {

class row_ledger {
public:
  explicit row_ledger(node_tree& tree) : tree_(tree) {}

  // Brings the node's candidacy up to date after its row, lock or children changed.
  void refresh(node_id id);
  // Moves a candidate to the key its statistics now give.
  void reposition(node_id id, const eviction_key& to) {
    if (tree_.nodes[id].row_candidate)
      move_candidate(candidates_, tree_.held[id].row_slot, to);
  }
  // A lock reached (or left) the node: what it holds can no longer (or can again) be
  // evicted.
  void account_lock(node_id id, bool locking);

  // A row of `bytes` fits now / would fit once every unlocked row were evicted; with
  // extra, `bytes` joins a row already counted (no new entry).
  bool fits(std::size_t bytes, bool extra = false) const;
  bool feasible(std::size_t bytes, bool extra = false) const;

  void add(node_id id, row_ptr row);
  // Keeps `extra` beside the node's row (which it must hold, with no extra yet).
  void add_extra(node_id id, row_extra_ptr extra);
  void drop(node_id id);
  // Drops the first candidate's row (and prunes its node when that leaves it empty).
  void evict();

  // Row counts, candidates, accounting and budgets, recomputed from the nodes.
  void check() const;

private:
  bool room(std::size_t used_bytes, std::size_t used_rows, std::size_t bytes,
            bool extra) const;

  node_tree& tree_;
  candidate_set candidates_;
  // What locked nodes hold: no eviction can free it, which makes refusals exact.
  std::size_t locked_bytes_ = 0;
  std::size_t locked_rows_ = 0;
};

} // namespace canopy::cache::detail
