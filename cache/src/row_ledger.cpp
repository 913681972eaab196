#include "row_ledger.hpp"

namespace canopy::cache::detail {

void row_ledger::refresh(node_id id) {
  node& x = tree_.nodes[id];
  holding& h = tree_.held[id];
  const bool wanted = h.row && !h.ledger_locked && x.row_children == 0;
  set_candidate(candidates_, x.row_candidate, h.row_slot, id, tree_, wanted);
}

void row_ledger::account_lock(node_id id, bool locking) {
  const holding& h = tree_.held[id];
  if (!h.row)
    return;
  locked_bytes_ = locking ? locked_bytes_ + h.row_bytes : locked_bytes_ - h.row_bytes;
  locked_rows_ = locking ? locked_rows_ + 1 : locked_rows_ - 1;
}

bool row_ledger::room(std::size_t used_bytes, std::size_t used_rows, std::size_t bytes,
                      bool extra) const {
  const std::size_t max_rows = tree_.config.logprob_max_entries;
  return fits_in(used_bytes, bytes, tree_.config.logprob_budget_bytes) &&
         (extra || max_rows == 0 || used_rows < max_rows);
}

bool row_ledger::fits(std::size_t bytes, bool extra) const {
  return room(tree_.stats.logprob_bytes, tree_.stats.logprob_entries, bytes, extra);
}

bool row_ledger::feasible(std::size_t bytes, bool extra) const {
  return room(locked_bytes_, locked_rows_, bytes, extra);
}

void row_ledger::add(node_id id, row_ptr row) {
  const node& x = tree_.nodes[id];
  holding& h = tree_.held[id];
  h.row_bytes = row->bytes();
  h.row = std::move(row);
  tree_.stats.logprob_bytes += h.row_bytes;
  ++tree_.stats.logprob_entries;
  if (h.ledger_locked)
    account_lock(id, true);
  ++tree_.nodes[x.parent].row_children;
  refresh(x.parent);
  refresh(id);
}

void row_ledger::add_extra(node_id id, row_extra_ptr extra) {
  holding& h = tree_.held[id];
  const std::size_t bytes = extra->bytes();
  h.extra = std::move(extra);
  h.row_bytes += bytes;
  tree_.stats.logprob_bytes += bytes;
  ++tree_.stats.row_extras;
  if (h.ledger_locked)
    locked_bytes_ += bytes;
}

void row_ledger::drop(node_id id) {
  node& x = tree_.nodes[id];
  holding& h = tree_.held[id];
  leave_candidates(candidates_, x.row_candidate, h.row_slot);
  tree_.stats.logprob_bytes -= h.row_bytes;
  --tree_.stats.logprob_entries;
  if (h.ledger_locked)
    account_lock(id, false);
  if (h.extra)
    --tree_.stats.row_extras;
  h.row.reset();
  h.extra.reset();
  h.row_bytes = 0;
  --tree_.nodes[x.parent].row_children;
  refresh(x.parent);
}

void row_ledger::evict() {
  if (candidates_.empty())
    violation("no log-prob candidate left to evict");
  const node_id id = candidates_.begin()->second;
  drop(id);
  ++tree_.stats.logprob_evictions;
  tree_.prune(id);
}

void row_ledger::check() const {
  const auto& nodes = tree_.nodes;
  std::vector<std::uint32_t> row_child_count(nodes.size());
  std::uint64_t rows = 0, extras = 0, bytes = 0, locked_bytes = 0, locked_rows = 0;
  std::size_t members = 0;
  for (node_id id = 0; id < nodes.size(); ++id) {
    const node& x = nodes[id];
    const holding& h = tree_.held[id];
    if (!x.live)
      continue;
    if (id != root_node)
      row_child_count[x.parent] += h.row ? 1 : 0;
    if (h.extra && !h.row)
      violation(node_name(id) + ": an extra without its row");
    const std::size_t held_bytes =
        (h.row ? h.row->bytes() : 0) + (h.extra ? h.extra->bytes() : 0);
    if (h.row_bytes != held_bytes)
      violation(node_name(id) + ": kept row size differs from its row's and extra's");
    if (h.row) {
      ++rows;
      extras += h.extra ? 1 : 0;
      bytes += held_bytes;
      if (h.ledger_locked) {
        locked_bytes += held_bytes;
        ++locked_rows;
      }
    }
    const bool rule = h.row && !h.ledger_locked && x.row_children == 0;
    if (x.row_candidate != rule)
      violation(node_name(id) + ": log-prob candidate flag disagrees with the rule");
    // A candidate's kept element must be the one keyed by its statistics now; the set
    // size below rules out elements of nodes that are no candidates.
    if (x.row_candidate) {
      const auto found = candidates_.find({tree_.key_of(id), id});
      if (found == candidates_.end() || found != h.row_slot)
        violation(node_name(id) + ": flagged log-prob candidate missing from its set");
    }
    members += x.row_candidate ? 1 : 0;
  }
  for (node_id id = 0; id < nodes.size(); ++id)
    if (nodes[id].live && nodes[id].row_children != row_child_count[id])
      violation(node_name(id) + ": count of children holding log-probs is wrong");
  if (candidates_.size() != members)
    violation("log-prob candidate set holds non-candidates");
  if (tree_.stats.logprob_entries != rows || tree_.stats.logprob_bytes != bytes ||
      tree_.stats.row_extras != extras)
    violation("log-prob statistics disagree with the nodes");
  if (locked_bytes_ != locked_bytes || locked_rows_ != locked_rows)
    violation("locked log-prob totals disagree with the nodes");
  if (bytes > tree_.config.logprob_budget_bytes)
    violation("log-prob bytes over budget");
  if (tree_.config.logprob_max_entries != 0 && rows > tree_.config.logprob_max_entries)
    violation("log-prob entries over the entry limit");
}

} // namespace canopy::cache::detail
