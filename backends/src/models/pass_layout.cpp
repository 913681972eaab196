#include "models/pass_layout.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace canopy::backends {

// Note [attention groups]
// Padding every item to the longest context of the pass would make a batch of short
// continuations pay for one long prompt. Items are sorted by total length and a group
// grows only while its padded size stays within a quarter of the real work (or is
// tiny), so the waste is bounded, and a batch of equal shapes (an SMC step) is one
// group with no padding at all.
namespace {

constexpr double max_padding_overhead = 1.25;
constexpr std::int64_t small_group_cells = 4096; // padding this small costs nothing

struct item_geometry {
  std::int64_t skipped;   // prefix keys no query of the item sees (sliding window)
  std::int64_t prefix;    // p: prefix keys some query sees
  std::int64_t tokens;    // n
  std::int64_t offset;    // first packed row
  std::int64_t prefix_at; // packed: first row of its prefix in the key source
  std::int64_t length() const { return prefix + tokens; }
};

/// Where key l of item `index` lives in the key source.
struct key_rows {
  const std::vector<item_shape>& items;
  std::int64_t pool_zero_row; // -1: packed
  std::int64_t prefix_rows;   // P (packed)
  std::int64_t packed;        // T
  std::int64_t pad() const {
    return pool_zero_row >= 0 ? pool_zero_row : prefix_rows + packed;
  }
  std::int64_t operator()(std::size_t index, const item_geometry& it,
                          std::int64_t l) const {
    const auto& item = items[index];
    if (pool_zero_row >= 0)
      return l < it.prefix ? item.prefix_slots[static_cast<std::size_t>(it.skipped + l)]
                           : item.new_slots[static_cast<std::size_t>(l - it.prefix)];
    return l < it.prefix ? it.prefix_at + l : prefix_rows + it.offset + (l - it.prefix);
  }
};

attention_group make_group(const std::vector<item_geometry>& geo,
                           const std::vector<std::size_t>& members, std::int64_t n_max,
                           std::int64_t l_max, std::int64_t packed, const key_rows& keys,
                           std::int64_t window) {
  attention_group g;
  g.items = static_cast<std::int64_t>(members.size());
  g.queries = n_max;
  g.keys = l_max;
  const std::int64_t pad_query = packed;
  const std::int64_t pad_key = keys.pad();
  g.query_index.assign(static_cast<std::size_t>(g.items * n_max), pad_query);
  g.key_index.assign(static_cast<std::size_t>(g.items * l_max), pad_key);
  g.mask.assign(static_cast<std::size_t>(g.items * n_max * l_max),
                -std::numeric_limits<float>::infinity());
  g.key_start.assign(static_cast<std::size_t>(g.items * n_max), 0);
  g.key_limit.assign(static_cast<std::size_t>(g.items * n_max), 0);
  g.causal = n_max == l_max && (window == 0 || window >= l_max);
  for (std::int64_t m = 0; m < g.items; ++m) {
    const auto index = members[static_cast<std::size_t>(m)];
    const auto& it = geo[index];
    g.causal = g.causal && it.prefix == 0;
    for (std::int64_t l = 0; l < it.length(); ++l)
      g.key_index[static_cast<std::size_t>(m * l_max + l)] = keys(index, it, l);
    for (std::int64_t j = 0; j < n_max; ++j) {
      const auto row = static_cast<std::size_t>(m * n_max + j);
      float* mask_row = g.mask.data() + row * static_cast<std::size_t>(l_max);
      if (j >= it.tokens) {
        mask_row[0] = 0.0f; // a padded query sees one key, so its softmax stays finite
        continue;
      }
      g.query_index[row] = it.offset + j;
      g.result_rows.push_back(static_cast<std::int64_t>(row));
      g.result_targets.push_back(it.offset + j);
      // Causal: the query after p+j keys sees keys 0..p+j; windowed, only the last W.
      g.key_limit[row] = it.prefix + j + 1;
      if (window > 0)
        g.key_start[row] = std::max<std::int64_t>(0, g.key_limit[row] - window);
      std::fill(mask_row + g.key_start[row], mask_row + g.key_limit[row], 0.0f);
    }
  }
  return g;
}

} // namespace

pass_layout build_pass_layout(const std::vector<item_shape>& items,
                              std::int64_t pool_zero_row, std::int64_t window) {
  pass_layout out;
  std::vector<item_geometry> geo;
  geo.reserve(items.size());
  std::int64_t packed = 0;
  std::int64_t prefix_rows = 0;
  for (const auto& item : items) {
    const auto p = static_cast<std::int64_t>(item.prefix_slots.size());
    // The first new token sees the last W-1 prefix keys at most.
    const auto skipped = window > 0 ? std::max<std::int64_t>(0, p - (window - 1)) : 0;
    geo.push_back({skipped, p - skipped, item.new_tokens, packed, prefix_rows});
    out.item_offset.push_back(packed);
    for (std::int64_t j = 0; j < item.new_tokens; ++j)
      out.positions.push_back(item.prefix_start + p + j);
    if (pool_zero_row < 0)
      out.prefix_slots.insert(out.prefix_slots.end(), item.prefix_slots.begin() + skipped,
                              item.prefix_slots.end());
    packed += item.new_tokens;
    prefix_rows += p - skipped;
  }
  out.packed_rows = packed;
  const key_rows keys{items, pool_zero_row, prefix_rows, packed};

  std::vector<std::size_t> order(items.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // Stable, so equal shapes keep packed order (which makes the identity case common).
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return geo[a].length() > geo[b].length();
  });
  std::vector<std::size_t> members;
  std::int64_t n_max = 0, l_max = 0, real_cells = 0;
  auto close_group = [&] {
    if (!members.empty())
      out.groups.push_back(make_group(geo, members, n_max, l_max, packed, keys, window));
    members.clear();
    n_max = l_max = real_cells = 0;
  };
  for (const auto i : order) {
    const auto& it = geo[i];
    const auto n = std::max(n_max, it.tokens);
    const auto l = std::max(l_max, it.length());
    const auto cells = static_cast<std::int64_t>(members.size() + 1) * n * l;
    const auto real = real_cells + it.tokens * it.length();
    if (!members.empty() && cells > small_group_cells &&
        static_cast<double>(cells) > max_padding_overhead * static_cast<double>(real))
      close_group();
    members.push_back(i);
    n_max = std::max(n_max, it.tokens);
    l_max = std::max(l_max, it.length());
    real_cells += it.tokens * it.length();
  }
  close_group();

  if (out.groups.size() == 1) {
    const auto& g = out.groups.front();
    out.identity = static_cast<std::int64_t>(g.query_index.size()) == packed;
    for (std::int64_t r = 0; out.identity && r < packed; ++r)
      out.identity = g.query_index[static_cast<std::size_t>(r)] == r;
  }
  return out;
}

} // namespace canopy::backends
