#include "node_tree.hpp"

#include <algorithm>
#include <stdexcept>

namespace canopy::cache::detail {

// Note [partitions]
// A named partition's root is a node at depth 0 whose parent is root_node; it holds
// nothing and is found by name (partition_roots), not through the children index, so
// no token sequence can lead into it. Below it everything is as below root_node: the
// depth of a node counts tokens from its partition's root, and every walk up a path
// stops at depth 0 (is_root), never at root_node itself. Its lock count is its
// children in use, as any node's, and root_node counts it as one child in use more, so
// locks climb as they always did. It is pruned like any empty node, which removes its
// name: the names held are those of partitions with nodes, bounded by the nodes.

void violation(const std::string& what) {
  throw std::logic_error("token_trie invariant violated: " + what);
}

std::string node_name(node_id id) {
  return "node " + std::to_string(id);
}

void leave_candidates(candidate_set& set, bool& flag, candidate_set::iterator& slot) {
  if (flag)
    set.erase(slot);
  flag = false;
}

bool set_candidate(candidate_set& set, bool& flag, candidate_set::iterator& slot,
                   node_id id, const node_tree& tree, bool wanted) {
  if (flag == wanted)
    return false;
  if (wanted) {
    slot = set.emplace(tree.key_of(id), id).first;
    flag = true;
  } else {
    leave_candidates(set, flag, slot);
  }
  return true;
}

void move_candidate(candidate_set& set, candidate_set::iterator& slot,
                    const eviction_key& to) {
  auto element = set.extract(slot);
  element.value().first = to;
  slot = set.insert(set.end(), std::move(element));
}

node_tree::node_tree(const trie_config& c) : config(c) {
  stats.nodes = 1;
  nodes.emplace_back();
  held.emplace_back();
  nodes[root_node].live = true;
}

const node& node_tree::checked(node_id id) const {
  if (!exists(id))
    throw std::out_of_range("token_trie: no " + node_name(id));
  return nodes[id];
}

node_id node_tree::new_node(node_id parent, token_id token, std::int32_t priority) {
  const node_id id = allocate(parent, token, priority, nodes[parent].depth + 1);
  nodes[parent].last_child = id;
  children.insert(child_key(parent, token), id);
  return id;
}

// A live node in a free slot, counted as a child of `parent` (linked by the caller).
node_id node_tree::allocate(node_id parent, token_id token, std::int32_t priority,
                            std::uint32_t depth) {
  node_id id;
  if (free_ids.empty()) {
    id = static_cast<node_id>(nodes.size());
    nodes.emplace_back();
    held.emplace_back();
  } else {
    id = free_ids.back();
    free_ids.pop_back();
  }
  node& x = nodes[id];
  x.token = token;
  x.parent = parent;
  x.depth = depth;
  x.live = true;
  x.stats = node_stats{clock, 0, ++creations, priority};
  ++nodes[parent].children;
  ++stats.nodes;
  return id;
}

node_id node_tree::partition_root(std::string_view name) const {
  if (name.empty())
    return root_node;
  auto it = partition_roots.find(std::string(name));
  return it == partition_roots.end() ? no_node : it->second;
}

node_id node_tree::make_partition_root(std::string_view name) {
  if (auto root = partition_root(name); root != no_node)
    return root;
  const node_id id = allocate(root_node, 0, 0, 0); // found by name, never by a token
  partition_roots.emplace(name, id);
  partition_names.emplace(id, name);
  ++stats.partitions;
  return id;
}

bool node_tree::removable(node_id id) const {
  const node& x = nodes[id];
  return id != root_node && !held[id].row && !x.holds_kv && x.children == 0 &&
         x.locks == 0;
}

void node_tree::prune(node_id id) {
  while (removable(id)) {
    const node_id parent = nodes[id].parent;
    if (is_root(id)) {
      partition_roots.erase(partition_names.at(id));
      partition_names.erase(id);
      --stats.partitions;
    } else {
      children.erase(child_key(parent, nodes[id].token));
    }
    --nodes[parent].children;
    nodes[id] = node{};
    held[id] = holding{};
    free_ids.push_back(id);
    --stats.nodes;
    ++stats.nodes_removed;
    id = parent;
  }
}

// Ids say nothing of depth (they are recycled), so each node's answer comes from its
// parent's, found by walking up to the first node already decided: O(nodes) in all.
std::vector<bool> node_tree::in_partitions(const partition_filter& pick) const {
  std::vector<bool> chosen(nodes.size());
  std::vector<bool> decided(nodes.size());
  decided[root_node] = true;
  chosen[root_node] = pick("");
  for (const auto& [name, root] : partition_roots) {
    decided[root] = true;
    chosen[root] = pick(name);
  }
  std::vector<node_id> walk;
  for (node_id id = 0; id < nodes.size(); ++id) {
    if (!nodes[id].live)
      continue;
    for (node_id cur = id; !decided[cur]; cur = nodes[cur].parent)
      walk.push_back(cur);
    const bool answer = chosen[walk.empty() ? id : nodes[walk.back()].parent];
    for (node_id n : walk) {
      decided[n] = true;
      chosen[n] = answer;
    }
    walk.clear();
  }
  return chosen;
}

void node_tree::check() const {
  const node& root = nodes[root_node];
  if (!root.live || root.depth != 0)
    violation("the root must be live and at depth 0");
  if (partition_roots.size() != partition_names.size() ||
      stats.partitions != partition_roots.size())
    violation("partition names and roots disagree");
  for (const auto& [name, id] : partition_roots) {
    const auto it = partition_names.find(id);
    if (name.empty() || !exists(id) || nodes[id].depth != 0 ||
        nodes[id].parent != root_node || it == partition_names.end() ||
        it->second != name)
      violation("partition '" + name +
                "' has no root of its own at depth 0 below the root");
  }
  if (held.size() != nodes.size())
    violation("holdings and nodes differ in number");

  std::vector<std::uint32_t> child_count(nodes.size()), in_use_children(nodes.size());
  std::uint64_t live = 0, locked_nodes = 0;
  std::vector<bool> queued(nodes.size());
  for (const node_id id : lock_changes)
    if (id < queued.size())
      queued[id] = true;
  std::vector<std::uint64_t> created;
  for (node_id id = 0; id < nodes.size(); ++id) {
    const node& x = nodes[id];
    const holding& h = held[id];
    if (!x.live) {
      if (h.row || !h.kv.empty())
        violation(node_name(id) + ": removed but still holds something");
      continue;
    }
    ++live;
    locked_nodes += x.locks != 0 ? 1 : 0;
    if (x.depth == 0 && (h.row || !h.kv.empty()))
      violation(node_name(id) + ": a root holds a row or KV");
    if (x.depth == 0 && id != root_node && partition_names.count(id) == 0)
      violation(node_name(id) + ": at depth 0 but no partition's root");
    created.push_back(x.stats.created);
    if (id == root_node)
      continue;
    if (!exists(x.parent))
      violation(node_name(id) + ": parent is not live");
    const node& p = nodes[x.parent];
    if (x.depth != 0 && x.depth != p.depth + 1)
      violation(node_name(id) + ": depth is not its parent's plus one");
    const node_id* child = children.find(child_key(x.parent, x.token));
    if (x.depth != 0 && (!child || *child != id))
      violation(node_name(id) + ": child map does not lead to it");
    if (x.locks != 0 && p.locks == 0)
      violation(node_name(id) + ": in use under a parent that is not");
    if (h.ledger_locked != (x.locks != 0) && !queued[id])
      violation(node_name(id) + ": the ledgers' lock state is stale but not queued");
    in_use_children[x.parent] += x.locks != 0 ? 1 : 0;
    ++child_count[x.parent];
  }
  for (node_id id = 0; id < nodes.size(); ++id) {
    const node& x = nodes[id];
    if (!x.live)
      continue;
    if (x.children != child_count[id])
      violation(node_name(id) + ": child count is wrong");
    if (x.locks != held[id].own_locks + in_use_children[id])
      violation(node_name(id) + ": lock count is not its own locks plus children in use");
  }

  std::sort(created.begin(), created.end());
  if (std::adjacent_find(created.begin(), created.end()) != created.end())
    violation("two nodes share a creation time");
  if (children.size() != live - 1 - partition_roots.size())
    violation("child map has entries for dead nodes");
  std::vector<bool> freed(nodes.size());
  for (node_id id : free_ids) {
    if (id >= nodes.size() || nodes[id].live || freed[id])
      violation("free list holds a live or repeated " + node_name(id));
    freed[id] = true;
  }
  if (free_ids.size() != nodes.size() - live)
    violation("a dead node is missing from the free list");
  if (stats.nodes != live || stats.locked_nodes != locked_nodes)
    violation("node statistics disagree with the nodes");
}

} // namespace canopy::cache::detail
