#include <canopy/actors/batch_planner.hpp>

#include <algorithm>
#include <map>
#include <numeric>

namespace canopy::actors {

namespace {

bool is_prefix_or_equal(const cache::token_seq& prefix, const cache::token_seq& seq) {
  return prefix.size() <= seq.size() &&
         std::equal(prefix.begin(), prefix.end(), seq.begin());
}

/// Entries answered by one item: each is a prefix of (or equal to) the last.
struct chain {
  std::vector<std::uint32_t> entries;
  std::uint32_t start_entry = 0; // the entry with the shortest KV prefix
};

void emit_item(const chain& c, const std::vector<plan_entry>& entries,
               const plan_options& options, batch_plan& plan) {
  const bool rows_at_every_position = options.rows_at_every_position;
  const auto& head = entries[c.start_entry];
  const auto& longest = *entries[c.entries.back()].tokens;
  // Without KV reuse every item computes its whole sequence and keeps no KV.
  const auto start = options.kv_reuse ? head.kv.length : 0u;
  backends::pass_item item;
  item.prefix = options.kv_reuse ? head.kv.handle : cache::no_kv;
  item.prefix_length = start;
  item.keep_kv = options.kv_reuse;
  item.tokens.assign(longest.begin() + start, longest.end());
  item.adapter = head.adapter;
  auto item_index = static_cast<std::uint32_t>(plan.pass.items.size());
  if (rows_at_every_position) {
    item.rows.resize(item.tokens.size());
    std::iota(item.rows.begin(), item.rows.end(), 0u);
    for (auto e : c.entries)
      plan.answers[e] = {
          item_index, static_cast<std::uint32_t>(entries[e].tokens->size() - 1 - start)};
  } else {
    // Entries come shortest first, so their positions ascend; equal ones share a row.
    for (auto e : c.entries) {
      auto position = static_cast<std::uint32_t>(entries[e].tokens->size() - 1 - start);
      if (item.rows.empty() || item.rows.back() != position)
        item.rows.push_back(position);
      plan.answers[e] = {item_index, static_cast<std::uint32_t>(item.rows.size() - 1)};
    }
  }
  plan.pass.items.push_back(std::move(item));
  plan.item_entry.push_back(c.entries.back());
}

} // namespace

batch_plan plan_batch(const std::vector<plan_entry>& entries,
                      const plan_options& options) {
  batch_plan plan;
  plan.answers.resize(entries.size());
  std::vector<std::uint32_t> order(entries.size());
  std::iota(order.begin(), order.end(), 0u);
  // Lexicographic order within a partition puts every prefix right before its
  // extensions, and the longest common prefix with any earlier sequence is the one
  // with the previous.
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return partition_order(entries[a].partition, *entries[a].tokens, entries[b].partition,
                           *entries[b].tokens);
  });
  chain current;
  const plan_entry* previous = nullptr;
  for (auto e : order) {
    const auto& entry = entries[e];
    const auto& seq = *entry.tokens;
    const auto& last = entries[current.entries.empty() ? e : current.entries.back()];
    if (!current.entries.empty() && last.partition == entry.partition &&
        is_prefix_or_equal(*last.tokens, seq)) {
      current.entries.push_back(e);
      if (entry.kv.length < entries[current.start_entry].kv.length)
        current.start_entry = e;
    } else if (options.kv_reuse && previous && previous->partition == entry.partition &&
               common_prefix(*previous->tokens, seq) > entry.kv.length) {
      plan.deferred.push_back(e); // shares uncached tokens with an earlier entry
    } else {
      if (!current.entries.empty())
        emit_item(current, entries, options, plan);
      current = chain{{e}, e};
    }
    previous = &entry;
  }
  if (!current.entries.empty())
    emit_item(current, entries, options, plan);
  return plan;
}

bool partition_order(std::string_view partition_a, const cache::token_seq& a,
                     std::string_view partition_b, const cache::token_seq& b) {
  if (partition_a != partition_b)
    return partition_a < partition_b;
  return a < b;
}

std::uint32_t common_prefix(const cache::token_seq& a, const cache::token_seq& b) {
  auto n = std::min(a.size(), b.size());
  auto mismatch = std::mismatch(a.begin(), a.begin() + n, b.begin());
  return static_cast<std::uint32_t>(mismatch.first - a.begin());
}

std::vector<entry_route> route_entries(const std::vector<routing_entry>& entries,
                                       const routing_view& workers) {
  const auto ready = [&](cache::worker_id w) {
    return std::find(workers.ready.begin(), workers.ready.end(), w) !=
           workers.ready.end();
  };
  std::vector<entry_route> out(entries.size());
  std::map<cache::worker_id, std::uint64_t> given; // by this routing, so families spread
  const auto send = [&](std::uint32_t e, cache::worker_id w, std::uint64_t tokens) {
    out[e] = {w, !ready(w)};
    given[w] += tokens;
  };
  std::vector<std::uint32_t> unplaced;
  for (std::uint32_t e = 0; e < entries.size(); ++e) {
    const auto& entry = entries[e];
    std::uint32_t best_length = 0;
    std::optional<cache::worker_id> best;
    for (auto w : workers.active) {
      const auto length = w < entry.kv.size() ? entry.kv[w].length : 0u;
      if (length > best_length || (length == best_length && best && length > 0 &&
                                   workers.load[w] < workers.load[*best])) {
        best_length = length;
        best = w;
      }
    }
    const auto size = entry.tokens->size();
    if (best && (best_length >= reuse_tokens || ready(*best)))
      send(e, *best, size - best_length);
    else if (entry.computing && std::find(workers.active.begin(), workers.active.end(),
                                          *entry.computing) != workers.active.end()) {
      // Even with room for another pass, the worker must first store what the running
      // one computes: sent now, the entry would compute those tokens a second time.
      out[e] = {*entry.computing, true};
      given[*entry.computing] += size;
    } else
      unplaced.push_back(e);
  }
  if (workers.active.empty()) {
    for (auto e : unplaced)
      out[e] = {std::nullopt, true};
    return out;
  }
  // Families: in lexicographic order, each entry sharing a first token (in its
  // partition) with the next.
  std::stable_sort(unplaced.begin(), unplaced.end(),
                   [&](std::uint32_t a, std::uint32_t b) {
                     return partition_order(entries[a].partition, *entries[a].tokens,
                                            entries[b].partition, *entries[b].tokens);
                   });
  const auto same_family = [&](const routing_entry& a, const routing_entry& b) {
    return a.partition == b.partition && common_prefix(*a.tokens, *b.tokens) > 0;
  };
  for (std::size_t i = 0; i < unplaced.size();) {
    std::size_t end = i + 1;
    std::uint64_t size = entries[unplaced[i]].tokens->size();
    while (end < unplaced.size() &&
           same_family(entries[unplaced[end - 1]], entries[unplaced[end]]))
      size += entries[unplaced[end++]].tokens->size();
    const auto w = *std::min_element(workers.active.begin(), workers.active.end(),
                                     [&](cache::worker_id a, cache::worker_id b) {
                                       return workers.load[a] + given[a] <
                                              workers.load[b] + given[b];
                                     });
    for (; i < end; ++i)
      out[unplaced[i]] = {w, !ready(w)};
    given[w] += size;
  }
  return out;
}

} // namespace canopy::actors
