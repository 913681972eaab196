// Ragged attention against a plain per-item reference (causal softmax attention of
// each item alone, in double), for both kernels and both key sources (pooled and
// packed), over random mixes of prefix lengths and new-token counts, with grouped
// query heads, with and without a sliding window.
#include "kv/kv_storage.hpp"
#include "models/fused_attention.hpp"
#include "models/pass_layout.hpp"
#include "models/ragged_attention.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <array>

#include <numeric>
#include <random>

namespace {

using namespace canopy::backends;

struct scenario {
  std::vector<item_shape> items;
  at::Tensor q;              // [T, H, hd]
  at::Tensor pool_k, pool_v; // [slots + 1, KV, hd], last row zero
  at::Tensor new_k, new_v;   // [T, KV, hd]
  std::int64_t hd = 0;
  std::int64_t kv = 0; // KV heads: H / kv query heads read each
};

constexpr std::int64_t H = 12;

/// hd: the loops are compiled for 8, 16, 32, 64 and 128, and for any other size
/// at run time; kv: for 1, 2, 4 and 8 query heads per KV head (of H = 12: kv 12, 6,
/// 3), and any other number at run time (kv 1).
/// longest_prefix: prefixes up to that many keys; decoding: every item one new token.
scenario make_scenario(std::uint32_t seed, std::size_t items, std::int64_t hd = 8,
                       std::int64_t kv = 2, int longest_prefix = 30,
                       bool decoding = false) {
  const auto KV = kv;
  std::mt19937 rng(seed);
  at::manual_seed(seed);
  scenario s;
  s.hd = hd;
  s.kv = kv;
  std::int64_t next_slot = 0, T = 0;
  std::uniform_int_distribution<int> prefix(0, longest_prefix), fresh(1, 12);
  for (std::size_t i = 0; i < items; ++i) {
    item_shape it;
    it.prefix_slots.resize(static_cast<std::size_t>(prefix(rng)));
    for (auto& slot : it.prefix_slots)
      slot = next_slot++;
    it.new_tokens = decoding || i % 3 == 0 ? 1 : fresh(rng); // else decoding and
                                                             // prefill items mixed
    for (std::int64_t j = 0; j < it.new_tokens; ++j)
      it.new_slots.push_back(next_slot++);
    T += it.new_tokens;
    s.items.push_back(std::move(it));
  }
  s.q = at::randn({T, H, hd}, at::kFloat);
  s.new_k = at::randn({T, KV, hd}, at::kFloat);
  s.new_v = at::randn({T, KV, hd}, at::kFloat);
  s.pool_k = at::randn({next_slot + 1, KV, hd}, at::kFloat);
  s.pool_v = at::randn({next_slot + 1, KV, hd}, at::kFloat);
  s.pool_k[next_slot].zero_();
  s.pool_v[next_slot].zero_();
  // The new tokens' KV sits in their pool rows, as the pooled source expects.
  std::int64_t row = 0;
  for (const auto& it : s.items)
    for (auto slot : it.new_slots) {
      s.pool_k[slot].copy_(s.new_k[row]);
      s.pool_v[slot].copy_(s.new_v[row++]);
    }
  return s;
}

/// Each item alone: its query rows against keys [prefix | new], causal and, with a
/// window W > 0, limited to the last W positions, in double.
at::Tensor reference(const scenario& s, std::int64_t window = 0) {
  const auto hd = s.hd, KV = s.kv;
  std::vector<at::Tensor> rows;
  std::int64_t offset = 0;
  for (const auto& it : s.items) {
    std::vector<std::int64_t> slots = it.prefix_slots;
    slots.insert(slots.end(), it.new_slots.begin(), it.new_slots.end());
    auto index = at::tensor(slots, at::kLong);
    auto k = s.pool_k.index_select(0, index).to(at::kDouble); // [L, KV, hd]
    auto v = s.pool_v.index_select(0, index).to(at::kDouble);
    auto q = s.q.narrow(0, offset, it.new_tokens).to(at::kDouble); // [n, H, hd]
    const auto p = static_cast<std::int64_t>(it.prefix_slots.size());
    const auto L = p + it.new_tokens;
    auto head_kv = at::arange(H, at::kLong).div(H / KV, "floor");
    auto kh = k.index_select(1, head_kv).permute({1, 2, 0}); // [H, hd, L]
    auto vh = v.index_select(1, head_kv).permute({1, 0, 2}); // [H, L, hd]
    auto scores =
        at::matmul(q.permute({1, 0, 2}), kh) / std::sqrt(double(hd)); // [H, n, L]
    const auto key_pos = at::arange(L, at::kLong).unsqueeze(0);       // [1, L]
    const auto query_pos =
        (at::arange(it.new_tokens, at::kLong) + p).unsqueeze(1); // [n, 1]
    auto allowed = key_pos <= query_pos;                         // [n, L]
    if (window > 0)
      allowed = allowed.logical_and(key_pos > query_pos - window);
    scores = scores.masked_fill(allowed.logical_not(), -INFINITY);
    auto out = at::matmul(at::softmax(scores, -1), vh); // [H, n, hd]
    rows.push_back(out.permute({1, 0, 2}).reshape({it.new_tokens, H * hd}));
    offset += it.new_tokens;
  }
  return at::cat(rows).to(at::kFloat);
}

/// Float32 keys read in place, as a pass's packed keys are.
kv_rows float_rows(at::Tensor keys, at::Tensor values) {
  static const auto format = make_cast_kv_format(at::kFloat);
  return {format.get(), {std::move(keys), {}}, {std::move(values), {}}, at::kFloat};
}

at::Tensor run(const scenario& s, bool pooled, attention_kernel kernel,
               std::int64_t window = 0) {
  auto items = s.items;
  std::vector<std::int64_t> prefix;
  if (!pooled)
    for (auto& it : items) {
      prefix.insert(prefix.end(), it.prefix_slots.begin(), it.prefix_slots.end());
      it.new_slots.clear();
    }
  const auto zero_row = s.pool_k.size(0) - 1;
  const auto layout = build_pass_layout(items, pooled ? zero_row : -1, window);
  const auto d = to_device(layout, at::kCPU, at::kFloat, kernel);
  if (pooled)
    return ragged_attention(s.q, float_rows(s.pool_k, s.pool_v), d);
  // The packed source holds the prefix keys the layout kept (all of them unwindowed).
  if (window == 0) {
    EXPECT_EQ(layout.prefix_slots, prefix);
  }
  auto index = at::tensor(layout.prefix_slots, at::kLong);
  auto zero = at::zeros({1, s.kv, s.hd});
  auto keys = at::cat({s.pool_k.index_select(0, index), s.new_k, zero});
  auto values = at::cat({s.pool_v.index_select(0, index), s.new_v, zero});
  return ragged_attention(s.q, float_rows(keys, values), d);
}

TEST(ragged_attention, both_kernels_and_key_sources_match_each_item_alone) {
  for (std::uint32_t seed = 1; seed <= 8; ++seed) {
    // Head sizes the loops know at compile time (8, 64) and one they do not (12);
    // query heads per KV head they know (1, 2, 4) and one they do not (12).
    const std::int64_t head_size = seed % 3 == 0 ? 12 : seed % 3 == 1 ? 8 : 64;
    const std::int64_t kv_heads = std::array<std::int64_t, 4>{12, 6, 3, 1}[seed % 4];
    const auto s = make_scenario(seed, 3 + seed * 2, head_size, kv_heads);
    const auto expected = reference(s);
    for (bool pooled : {true, false})
      for (auto kernel : {attention_kernel::aten, attention_kernel::cpu_loops,
                          attention_kernel::automatic}) {
        const auto got = run(s, pooled, kernel);
        ASSERT_EQ(got.sizes(), expected.sizes());
        EXPECT_LE((got - expected).abs().max().item<float>(), 2e-5f)
            << "seed " << seed << " hd " << head_size << " kv " << kv_heads
            << (pooled ? " pooled" : " packed") << " kernel " << static_cast<int>(kernel);
      }
  }
}

TEST(ragged_attention, both_kernels_read_every_kv_format_as_its_stored_values) {
  // A pool stored in a format and read by a pass gives the attention of the values
  // the format reads back (reference: those values in double): the kernels convert,
  // they do not add error of their own.
  for (const std::string name : {"float16", "bfloat16", "int8"}) {
    const auto format = make_kv_format(name, at::kFloat);
    for (std::uint32_t seed = 1; seed <= 4; ++seed) {
      const std::int64_t head_size = seed % 2 == 0 ? 12 : 64;
      auto s = make_scenario(seed, 3 + seed * 2, head_size, seed % 2 == 0 ? 3 : 12);
      const auto rows = s.pool_k.size(0);
      const auto all = at::arange(rows, at::kLong);
      auto keys = format->allocate(rows, s.kv, s.hd, at::kCPU);
      auto values = format->allocate(rows, s.kv, s.hd, at::kCPU);
      format->write(keys, all, s.pool_k);
      format->write(values, all, s.pool_v);
      const auto stored_k = format->gather(keys, all, at::kFloat);
      ASSERT_GT((stored_k - s.pool_k).abs().max().item<float>(), 0.0f)
          << name << " must change some value for this test to tell formats apart";
      s.pool_k = stored_k;
      s.pool_v = format->gather(values, all, at::kFloat);
      const auto expected = reference(s);
      const auto layout = build_pass_layout(s.items, rows - 1);
      for (auto kernel : {attention_kernel::aten, attention_kernel::cpu_loops}) {
        const kv_rows source{format.get(), keys, values, at::kFloat};
        const auto got = ragged_attention(
            s.q, source, to_device(layout, at::kCPU, at::kFloat, kernel));
        EXPECT_LE((got - expected).abs().max().item<float>(), 2e-5f)
            << name << " seed " << seed << " kernel " << static_cast<int>(kernel);
      }
    }
  }
}

TEST(ragged_attention, a_sliding_window_limits_every_query_to_the_last_w_positions) {
  for (const std::int64_t window : {1, 5, 16}) {
    for (std::uint32_t seed = 1; seed <= 6; ++seed) {
      const auto s = make_scenario(seed, 3 + seed * 2);
      const auto expected = reference(s, window);
      ASSERT_GT((expected - reference(s)).abs().max().item<float>(), 1e-2f)
          << "the scenario must have prefixes longer than the window";
      for (bool pooled : {true, false})
        for (auto kernel : {attention_kernel::aten, attention_kernel::cpu_loops}) {
          const auto got = run(s, pooled, kernel, window);
          EXPECT_LE((got - expected).abs().max().item<float>(), 2e-5f)
              << "window " << window << " seed " << seed
              << (pooled ? " pooled" : " packed") << " kernel "
              << static_cast<int>(kernel);
        }
    }
  }
}

// LibTorch 2.1 and later (the GPU machine's, trixie's 2.6 in scripts/torch2/check.sh):
// the fused kernels, on the CPU here, against the same reference; with prefixes (the
// mask), without (causal groups, no mask), decoding (one query per item: the query heads
// of a KV head in the queries' place), and windowed.
TEST(ragged_attention, the_fused_kernels_match_each_item_alone) {
  if (!fused_attention_available())
    GTEST_SKIP() << "this LibTorch has no fused attention (it takes 2.1 or later)";
  for (std::uint32_t seed = 1; seed <= 8; ++seed) {
    const std::int64_t head_size = seed % 2 == 0 ? 64 : 8;
    const std::int64_t kv_heads = std::array<std::int64_t, 4>{12, 6, 3, 1}[seed % 4];
    for (const int longest_prefix : {30, 0})
      for (const bool decoding : {false, true})
        for (const std::int64_t window : {0, 5}) {
          const auto s = make_scenario(seed, 3 + seed * 2, head_size, kv_heads,
                                       longest_prefix, decoding);
          const auto expected = reference(s, window);
          for (bool pooled : {true, false}) {
            const auto got = run(s, pooled, attention_kernel::fused, window);
            EXPECT_LE((got - expected).abs().max().item<float>(), 2e-5f)
                << "seed " << seed << " prefixes up to " << longest_prefix
                << (decoding ? " decoding" : "") << " window " << window
                << (pooled ? " pooled" : " packed");
          }
        }
  }
}

TEST(ragged_attention, a_group_is_causal_only_without_prefixes_or_a_shorter_window) {
  auto shapes = [](std::vector<std::int64_t> prefixes, std::vector<std::int64_t> tokens) {
    std::vector<item_shape> items(prefixes.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      items[i].prefix_slots.assign(static_cast<std::size_t>(prefixes[i]), 0);
      items[i].new_tokens = tokens[i];
    }
    return items;
  };
  auto causal = [](const std::vector<item_shape>& items, std::int64_t window) {
    const auto layout = build_pass_layout(items, -1, window);
    EXPECT_EQ(layout.groups.size(), 1u);
    return layout.groups[0].causal;
  };
  EXPECT_TRUE((causal(shapes({0, 0, 0}, {7, 5, 7}), 0))) << "prompts, one shorter";
  EXPECT_FALSE((causal(shapes({0, 2, 0}, {7, 5, 7}), 0))) << "a prefix";
  EXPECT_FALSE((causal(shapes({0, 0}, {7, 7}), 4))) << "a window shorter than the keys";
  EXPECT_TRUE((causal(shapes({0, 0}, {7, 7}), 7))) << "a window as long as the keys";
}

TEST(ragged_attention, a_windowed_pass_reads_at_most_w_minus_1_prefix_keys_per_item) {
  constexpr std::int64_t window = 16;
  std::vector<item_shape> items(4);
  std::int64_t slot = 0;
  for (auto& it : items) {
    it.prefix_slots.resize(200);
    for (auto& s : it.prefix_slots)
      s = slot++;
    it.new_tokens = 1;
  }
  const auto layout = build_pass_layout(items, -1, window);
  ASSERT_EQ(layout.groups.size(), 1u);
  EXPECT_EQ(layout.groups[0].keys, window) << "15 prefix keys and the new token";
  EXPECT_EQ(layout.prefix_slots.size(), items.size() * (window - 1));
  EXPECT_EQ(layout.prefix_slots.front(), 200 - (window - 1)) << "the newest prefix keys";
  EXPECT_EQ(layout.positions, (std::vector<std::int64_t>{200, 200, 200, 200}))
      << "positions stay absolute";
}

TEST(ragged_attention, a_prefix_that_starts_later_keeps_absolute_positions) {
  // The worker gives only the window's prefix slots when older KV is gone.
  item_shape it;
  it.prefix_start = 285;
  it.prefix_slots = {7, 8, 9};
  it.new_tokens = 2;
  const auto layout = build_pass_layout({it}, -1, 16);
  EXPECT_EQ(layout.positions, (std::vector<std::int64_t>{288, 289}));
  EXPECT_EQ(layout.prefix_slots, (std::vector<std::int64_t>{7, 8, 9}));
  EXPECT_EQ(layout.groups[0].keys, 5);
}

TEST(ragged_attention, equal_shapes_make_one_group_without_padding) {
  std::vector<item_shape> items(5);
  std::int64_t slot = 0;
  for (auto& it : items) {
    it.prefix_slots = {slot, slot + 1};
    it.new_slots = {slot + 2};
    it.new_tokens = 1;
    slot += 3;
  }
  const auto layout = build_pass_layout(items, slot);
  ASSERT_EQ(layout.groups.size(), 1u);
  EXPECT_TRUE(layout.identity);
  EXPECT_EQ(layout.groups[0].keys, 3);
}

TEST(ragged_attention, one_long_prompt_does_not_pad_many_short_items) {
  std::vector<item_shape> items(9);
  items[0].new_tokens = 200;
  for (std::size_t i = 1; i < items.size(); ++i)
    items[i].new_tokens = 1;
  const auto layout = build_pass_layout(items, -1);
  ASSERT_EQ(layout.groups.size(), 2u);
  EXPECT_EQ(layout.groups[1].keys, 1) << "the short items form a group of their own";
}

} // namespace
