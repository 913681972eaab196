#pragma once
// Pass items as the backend tests build them: a sequence with every row asked for.
// Thread contract: pure functions.

#include <canopy/backends/backend.hpp>

#include <cstdint>
#include <numeric>
#include <vector>

namespace canopy::testing {

inline std::vector<std::uint32_t> all_rows(std::size_t n) {
  std::vector<std::uint32_t> rows(n);
  std::iota(rows.begin(), rows.end(), 0u);
  return rows;
}

/// `tokens` after `prefix_length` tokens whose KV is `prefix`, every row asked for.
inline backends::pass_item item(cache::token_seq tokens,
                                backends::kv_handle prefix = backends::no_kv,
                                std::uint32_t prefix_length = 0, bool keep_kv = true) {
  backends::pass_item it;
  it.prefix = prefix;
  it.prefix_length = prefix_length;
  it.rows = all_rows(tokens.size());
  it.tokens = std::move(tokens);
  it.keep_kv = keep_kv;
  return it;
}

} // namespace canopy::testing
