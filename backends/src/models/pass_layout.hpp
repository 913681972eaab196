#pragma once
// How one ragged pass is laid out for the model, decided on the host before any
// tensor work: the new tokens of all items packed into one sequence of T rows (so
// every projection and MLP is one matmul over the whole batch, with no padding), and
// the attention split into groups of items of similar shape, each padded only to its
// own largest item (Note [attention groups]).
//
// With a sliding window W (Mistral), a query at position i sees keys i-W+1..i: the
// mask says so, and the keys of an item's prefix that none of its queries can see are
// left out of the layout altogether, so a pass reads at most W-1 prefix keys per item
// however long the sequence is.
//
// Note [key sources]: keys of the attention are rows of one key source:
//  - pooled: the worker's KV storage itself, once every new token has a row there
//    (its own slot if kept, else a slot borrowed for the pass); padding reads the
//    storage's zero row. No prefix KV is copied before the attention's one gather.
//  - packed, when the storage has no room to lend: [prefix KV gathered from the pool
//    (P rows) | the pass's new KV (T rows) | one zero row].
//
// Thread contract: plain values; build_pass_layout is a pure function.

#include <cstdint>
#include <vector>

namespace canopy::backends {

/// One item as the layout needs it.
struct item_shape {
  std::int64_t prefix_start = 0; // position of prefix_slots[0] (> 0 when the
                                 // prefix's oldest KV is not read: a window)
  std::vector<std::int64_t>
      prefix_slots;                    // [p] pool rows of the cached prefix, oldest first
  std::vector<std::int64_t> new_slots; // [n] pool rows of the new tokens (pooled only)
  std::int64_t new_tokens = 0;         // n >= 1
};

struct attention_group {
  std::int64_t items = 0;                // G
  std::int64_t queries = 0;              // n_max: query rows per item, padded
  std::int64_t keys = 0;                 // L_max: key rows per item, padded
  std::vector<std::int64_t> query_index; // [G*n_max] packed row, or T for padding
  std::vector<std::int64_t>
      key_index;           // [G*L_max] row of the key source (padding: its zero row)
  std::vector<float> mask; // [G*n_max*L_max] 0 where allowed, else -inf
  std::vector<std::int64_t> key_start; // [G*n_max] keys a query sees: start..limit-1
  std::vector<std::int64_t> key_limit; // (causal, and windowed); limit 0 for padding
  std::vector<std::int64_t>
      result_rows; // [n_real] rows of the G*n_max output that are real
  std::vector<std::int64_t> result_targets; // [n_real] packed rows they answer
  /// True when the mask is causal from the top left: no item has a prefix, queries and
  /// keys are in step (n_max == L_max) and no window cuts in. A fused kernel may then
  /// apply causality itself, without reading a mask (fused_attention.hpp).
  bool causal = false;
};

struct pass_layout {
  std::int64_t packed_rows = 0;           // T
  std::vector<std::int64_t> positions;    // [T] absolute position of each new token
  std::vector<std::int64_t> item_offset;  // [items] first packed row of each item
  std::vector<std::int64_t> prefix_slots; // packed: [P] all items' visible prefix
                                          // slots, item by item
  std::vector<attention_group> groups;
  /// True when one group covers every packed row in packed order without padding,
  /// so its output needs no gather (SMC steps: every particle adds one token).
  bool identity = false;
};

/// `pool_zero_row` >= 0: pooled keys (every item has new_slots), padding reads that
/// row; -1: packed keys. `window` > 0: the sliding window W; 0: queries see the whole
/// prefix.
pass_layout build_pass_layout(const std::vector<item_shape>& items,
                              std::int64_t pool_zero_row, std::int64_t window = 0);

} // namespace canopy::backends
