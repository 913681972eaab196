// Weights in blocks of 32 (weight_blocks.hpp) and their products (block_dot.hpp,
// block_product.hpp), against what the formats define:
//  - each weight within half a step of its block (a whole step where int4's grid
//    clips), plus the float16 rounding of the scale (|q| d 2^-11 at most);
//    llama.cpp's nibble order for int4;
//  - a product equal to the exact integer arithmetic on the quantized operands, up to
//    float's rounding ((blocks + 2) 2^-24 of the sum of magnitudes: per block one
//    rounding of d_w d_x and one of the FMA that adds it, Note [exact block sums]);
//  - the same bits for a row whether it is computed alone or among others (in wide
//    tiles too), on one thread or two (Note [block product tiles]);
//  - the portable, AVX2 and AVX-512 VNNI kernels equal bit for bit, on every tile shape
//    (the VNNI wide tiles of Note [wide tiles] too), in every group, and at the
//    integers' extremes: the VNNI copy emulated by SIMDe
//    wherever AVX2 runs, the native one where the CPU has VNNI.
#include "models/block_dot.hpp"
#include "models/block_dot_vnni.hpp"
#include "models/block_product.hpp"
#include "models/weight_blocks.hpp"
#include "models/weight_format.hpp"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace canopy::backends;

std::vector<float> normal(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v)
    x = dist(rng);
  return v;
}

/// Largest |w| of the block holding element j of `row` (inputs wide).
float block_max(const float* row, std::int64_t inputs, std::int64_t j) {
  const auto first = j / block_width * block_width;
  const auto last = std::min(inputs, first + block_width);
  float m = 0;
  for (auto i = first; i < last; ++i)
    m = std::max(m, std::fabs(row[i]));
  return m;
}

TEST(weight_blocks, every_weight_is_within_its_blocks_step) {
  const std::int64_t rows = 5, inputs = 200; // 6 whole blocks and one of 8
  const auto w = normal(rows * inputs, 1);
  for (const auto format : {block_format::q8_0, block_format::q4_0}) {
    const block_matrix m(format, w.data(), rows, inputs);
    EXPECT_EQ(m.blocks_per_row(), 7);
    // One group of eight rows, three of them padding; 7 scales a row, and 7 units of
    // 32 bytes (int8) or 4 (int4, two blocks a unit, the last half used).
    EXPECT_EQ(m.bytes(), static_cast<std::size_t>(
                             8 * (7 * 2 + (format == block_format::q8_0 ? 7 : 4) * 32)));
    // Half a step: max|w| / 254 for int8; int4's grid stops at -7m/8 opposite the
    // largest weight m, so there a weight clips by up to a whole step, max|w| / 8.
    const double steps = format == block_format::q8_0 ? 254 : 8;
    std::vector<float> back(inputs);
    for (std::int64_t r = 0; r < rows; ++r) {
      m.dequantize_row(r, back.data());
      for (std::int64_t j = 0; j < inputs; ++j) {
        const double amax = block_max(w.data() + r * inputs, inputs, j);
        EXPECT_LE(std::fabs(back[j] - w[r * inputs + j]),
                  amax / steps + amax * std::ldexp(1.0, -11))
            << weight_format_name(format_of(format)) << " row " << r << " element " << j;
      }
    }
  }
}

TEST(weight_blocks, int4_quantizes_as_llama_cpp_q4_0_and_packs_two_blocks_a_unit) {
  // x_j = j - 16 in block 0 and 16 - j in block 1. Block 0's largest magnitude is -16,
  // so d = -16 / -8 = 2 and q = x / 2 + 8 rounded half up, clamped to 15; block 1's is
  // +16, so d = -2. Block 0's q sit in the unit's low nibbles, block 1's in its high
  // ones (Note [quant units]).
  std::vector<float> x(64);
  for (int j = 0; j < 32; ++j) {
    x[j] = static_cast<float>(j - 16);
    x[32 + j] = static_cast<float>(16 - j);
  }
  const block_matrix m(block_format::q4_0, x.data(), 1, 64);
  EXPECT_EQ(from_half_bits(m.scales(0)[0]), 2.0f);
  EXPECT_EQ(from_half_bits(m.scales(0)[group_rows]), -2.0f);
  for (int j = 0; j < 32; ++j) {
    const int low = std::min(15, static_cast<int>((j - 16) / 2.0 + 8.5));
    const int high = std::min(15, static_cast<int>((16 - j) / -2.0 + 8.5));
    EXPECT_EQ(m.quants(0)[j], low | (high << 4)) << "byte " << j;
  }
}

TEST(weight_blocks, int8_maps_a_blocks_largest_weight_to_127) {
  std::vector<float> x(32, 0.25f);
  x[7] = -3.0f;
  const block_matrix m(block_format::q8_0, x.data(), 1, 32);
  EXPECT_EQ(static_cast<std::int8_t>(m.quants(0)[7]), -127);
  EXPECT_EQ(m.scales(0)[0], to_half_bits(3.0f / 127));
  EXPECT_EQ(static_cast<std::int8_t>(m.quants(0)[0]),
            static_cast<std::int8_t>(std::round(0.25f * 127 / 3.0f)));
}

struct exact_product {
  std::vector<double> value, magnitude; // [rows, outputs]
};

/// x W^T on the quantized operands, in double: each block's integer sum is exact.
exact_product exactly(const std::vector<float>& x, std::int64_t rows,
                      const block_matrix& w) {
  const auto blocks = w.blocks_per_row();
  std::vector<std::int8_t> xq(static_cast<std::size_t>(rows * blocks * block_width));
  std::vector<float> xd(static_cast<std::size_t>(rows * blocks));
  std::vector<std::int32_t> xs(static_cast<std::size_t>(rows * blocks));
  quantize_activations(x.data(), rows, w.inputs(), blocks, xq.data(), xd.data(),
                       xs.data());
  std::vector<float> row(static_cast<std::size_t>(blocks * block_width), 0.0f);
  exact_product p{std::vector<double>(static_cast<std::size_t>(rows * w.rows())),
                  std::vector<double>(static_cast<std::size_t>(rows * w.rows()))};
  for (std::int64_t o = 0; o < w.rows(); ++o) {
    w.dequantize_row(o, row.data());
    for (std::int64_t t = 0; t < rows; ++t)
      for (std::int64_t b = 0; b < blocks; ++b) {
        const double d = from_half_bits(w.scales(o)[b * group_rows]);
        double sum = 0; // integers times d: the dequantized row over d is exact
        for (std::int64_t j = 0; j < block_width; ++j)
          sum += std::round(row[b * block_width + j] / d * 1.0) *
                 xq[(t * blocks + b) * block_width + j];
        const double term = d * xd[b * rows + t] * sum;
        p.value[t * w.rows() + o] += term;
        p.magnitude[t * w.rows() + o] += std::fabs(term);
      }
  }
  return p;
}

class block_product : public ::testing::TestWithParam<block_format> {};

TEST_P(block_product, is_the_exact_block_arithmetic_within_floats_rounding_of_the_sum) {
  const std::int64_t rows = 7, outputs = 37, inputs = 200;
  const auto x = normal(rows * inputs, 2, 3.0f);
  const auto wf = normal(outputs * inputs, 3, 0.05f);
  const block_matrix w(GetParam(), wf.data(), outputs, inputs);
  const auto exact = exactly(x, rows, w);
  const double u = std::ldexp(1.0, -24) * static_cast<double>(w.blocks_per_row() + 2);
  std::vector<float> y(rows * outputs, 1.0f);
  multiply_blocks(x.data(), rows, w, y.data(), false);
  std::vector<float> accumulated(rows * outputs, 1.0f);
  multiply_blocks(x.data(), rows, w, accumulated.data(), true);
  for (std::size_t i = 0; i < y.size(); ++i) {
    EXPECT_LE(std::fabs(y[i] - exact.value[i]), u * exact.magnitude[i]) << i;
    EXPECT_EQ(accumulated[i], 1.0f + y[i]) << i;
  }
}

TEST(block_quantizer, avx2_quantizes_activations_as_the_portable_one_bit_for_bit) {
  const auto avx2 = avx2_block_kernels();
  if (!avx2)
    GTEST_SKIP() << "this CPU has no AVX2";
  const std::int64_t rows = 3, inputs = 200, blocks = 7; // a partial last block
  auto x = normal(rows * inputs, 8, 2.0f);
  x[5] = 0.5f / 127 * 3; // a value halfway between steps rounds to even
  std::fill(x.begin() + inputs, x.begin() + inputs + 32, 0.0f); // an all-zero block
  std::vector<std::int8_t> q1(rows * blocks * 32, 9), q2(rows * blocks * 32, 9);
  std::vector<float> d1(rows * blocks), d2(rows * blocks);
  std::vector<std::int32_t> s1(rows * blocks), s2(rows * blocks);
  quantize_activations(x.data(), rows, inputs, blocks, q1.data(), d1.data(), s1.data());
  avx2->quantize(x.data(), rows, inputs, blocks, q2.data(), d2.data(), s2.data());
  EXPECT_EQ(q1, q2);
  EXPECT_EQ(d1, d2);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(d1[0 * rows + 1], 0.0f) << "row 1's first block is all zeros";
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t b = 0; b < blocks; ++b) {
      std::int32_t sum = 0;
      for (std::int64_t j = 0; j < 32; ++j)
        sum += q1[(r * blocks + b) * 32 + j];
      EXPECT_EQ(s1[b * rows + r], sum) << "row " << r << ", block " << b;
    }
}

TEST(block_kernel_choice,
     is_vnni_by_tile_where_the_cpu_has_it_avx2_else_and_follows_the_names_asked) {
  const auto avx2 = avx2_block_kernels();
  const std::string best = avx2 ? "avx2" : "portable";
  const std::string vnni_or_best = avx512_vnni_block_kernels() ? "avx512_vnni" : best;
  const std::string by_tile = by_tile_block_kernels() ? "avx512_vnni+avx2" : best;
  EXPECT_EQ(std::string(choose_block_kernels("", "").isa), by_tile);
  EXPECT_EQ(std::string(choose_block_kernels("", "avx512").isa), by_tile);
  EXPECT_EQ(std::string(choose_block_kernels("", "avx2").isa), best)
      << "as an AVX2-only CPU (the suite's .as_on_avx2 runs)";
  EXPECT_EQ(std::string(choose_block_kernels("", "default").isa), "portable");
  EXPECT_EQ(std::string(choose_block_kernels("portable", "").isa), "portable");
  EXPECT_EQ(std::string(choose_block_kernels("avx2", "").isa), best);
  EXPECT_EQ(std::string(choose_block_kernels("avx2", "default").isa), best)
      << "CANOPY_BLOCK_KERNELS decides over ATen's capability";
  EXPECT_EQ(std::string(choose_block_kernels("avx512_vnni", "").isa), vnni_or_best);
  EXPECT_EQ(std::string(choose_block_kernels("avx512_vnni+avx2", "avx2").isa), by_tile);
  try {
    choose_block_kernels("sse4", "");
    ADD_FAILURE() << "an unknown kernel set was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("CANOPY_BLOCK_KERNELS='sse4'"),
              std::string::npos)
        << e.what();
  }
}

/// Activation rows quantized for the kernels.
struct quantized_rows {
  std::vector<std::int8_t> quants;
  std::vector<float> scales;
  std::vector<std::int32_t> sums;
  std::int64_t rows, blocks;

  activation_blocks view() const {
    return {quants.data(),        scales.data(), sums.data(),
            blocks * block_width, rows,          blocks};
  }
};

quantized_rows quantized(const std::vector<float>& x, std::int64_t rows,
                         std::int64_t inputs, std::int64_t blocks) {
  quantized_rows q{std::vector<std::int8_t>(rows * blocks * block_width),
                   std::vector<float>(rows * blocks),
                   std::vector<std::int32_t>(rows * blocks), rows, blocks};
  quantize_activations(x.data(), rows, inputs, blocks, q.quants.data(), q.scales.data(),
                       q.sums.data());
  return q;
}

/// Every tile shape (one, two, four activation rows) in every group of `w`, through
/// `kernels` and the AVX2 ones: the same bits.
void expect_avx2_bits(const block_kernels& kernels, const block_matrix& w,
                      const activation_blocks& x, const std::string& what) {
  const auto avx2 = avx2_block_kernels();
  for (std::int64_t g = 0; g < w.groups(); ++g)
    for (int n : {1, 2, 4}) {
      const weight_rows rows{w.quants(g * group_rows), w.scales(g * group_rows)};
      float expected[32], got[32];
      avx2->for_format(w.format())(rows, x, n, expected);
      kernels.for_format(w.format())(rows, x, n, got);
      EXPECT_EQ(std::memcmp(expected, got, sizeof(float) * group_rows * n), 0)
          << kernels.isa << " " << what << ": 8 x " << n << " tile of group " << g;
    }
}

TEST_P(block_product, portable_and_avx2_kernels_give_the_same_bits_on_every_tile) {
  if (!avx2_block_kernels())
    GTEST_SKIP() << "this CPU has no AVX2";
  // 9 blocks: int4's last unit half filled. 16 rows: two groups.
  const std::int64_t inputs = 9 * block_width - 5, blocks = 9;
  const auto x = normal(4 * inputs, 6, 2.0f);
  const auto wf = normal(16 * inputs, 7, 0.05f);
  const block_matrix w(GetParam(), wf.data(), 16, inputs);
  expect_avx2_bits(portable_block_kernels(), w, quantized(x, 4, inputs, blocks).view(),
                   "random");
}

/// The VNNI kernels this machine can run: SIMDe's emulation wherever AVX2 runs (it is
/// built with AVX2), and the native ones, alone and by tile, where the CPU has AVX-512
/// VNNI.
std::vector<std::pair<std::string, block_kernels>> vnni_kernels_here() {
  std::vector<std::pair<std::string, block_kernels>> sets;
  if (const auto avx2 = avx2_block_kernels())
    sets.push_back(
        {"emulated", block_kernels{"avx512_vnni_emulated", avx512_vnni_emulated::dot_q8_0,
                                   avx512_vnni_emulated::dot_q4_0, avx2->quantize,
                                   avx512_vnni_emulated::prepare_wide_q8_0,
                                   avx512_vnni_emulated::prepare_wide_q4_0,
                                   avx512_vnni_emulated::wide_dot}});
  if (const auto native = avx512_vnni_block_kernels())
    sets.push_back({"native", *native});
  if (const auto by_tile = by_tile_block_kernels())
    sets.push_back({"by tile", *by_tile});
  return sets;
}

/// Rows first..first+n-1 of `x` in a wide tile (Note [wide tiles]) against each group
/// of `w` through `kernels`, and each row alone through the AVX2 kernels: the same bits.
void expect_wide_avx2_bits(const block_kernels& kernels, const block_matrix& w,
                           const activation_blocks& x, std::int64_t first, std::int64_t n,
                           const std::string& what) {
  ASSERT_NE(kernels.wide_dot, nullptr) << kernels.isa;
  const auto avx2 = avx2_block_kernels();
  const auto blocks = x.blocks;
  std::vector<std::uint8_t> packed(wide_quant_bytes(blocks), 7);
  std::vector<float> packed_scales(wide_scale_count(blocks), 7.0f);
  pack_wide_rows(x, first, n, packed.data(), packed_scales.data());
  std::vector<std::int8_t> quants(blocks * group_rows * block_width);
  std::vector<std::int32_t> offsets(blocks * group_rows);
  std::vector<float> scales(blocks * group_rows);
  for (std::int64_t g = 0; g < w.groups(); ++g) {
    const weight_rows rows{w.quants(g * group_rows), w.scales(g * group_rows)};
    const auto ready = kernels.prepare_wide_for(w.format())(
        rows, blocks, quants.data(), offsets.data(), scales.data());
    float got[group_rows * wide_tile_rows];
    kernels.wide_dot(ready, wide_activations{packed.data(), packed_scales.data(), blocks},
                     got);
    for (std::int64_t i = 0; i < n; ++i) {
      float expected[group_rows];
      avx2->for_format(w.format())(rows, x.from_row(first + i), 1, expected);
      for (std::int64_t k = 0; k < group_rows; ++k)
        EXPECT_EQ(std::memcmp(&expected[k], &got[k * wide_tile_rows + i], sizeof(float)),
                  0)
            << kernels.isa << " " << what << ": wide tile of group " << g << ", row "
            << first + i << ", output " << k << ": " << got[k * wide_tile_rows + i]
            << " against " << expected[k];
    }
  }
}

TEST_P(block_product, gives_a_row_the_same_bits_alone_among_others_and_on_two_threads) {
  // 27 rows: where the kernels have wide tiles, a whole one and eleven rows in a second
  // (Note [block product tiles]).
  const std::int64_t rows = 27, outputs = 300, inputs = 200;
  const auto x = normal(rows * inputs, 4);
  const auto wf = normal(outputs * inputs, 5, 0.05f);
  const block_matrix w(GetParam(), wf.data(), outputs, inputs);
  auto sets = vnni_kernels_here();
  sets.insert(sets.begin(), {"here", block_kernels_here()});
  const int threads = at::get_num_threads();
  for (const auto& [name, kernels] : sets) {
    at::set_num_threads(1);
    std::vector<float> together(rows * outputs);
    multiply_blocks(x.data(), rows, w, together.data(), false, kernels);
    at::set_num_threads(2);
    std::vector<float> two_threads(rows * outputs);
    multiply_blocks(x.data(), rows, w, two_threads.data(), false, kernels);
    at::set_num_threads(threads);
    EXPECT_EQ(together, two_threads) << name;
    std::vector<float> alone(outputs);
    for (std::int64_t t = 0; t < rows; ++t) {
      multiply_blocks(x.data() + t * inputs, 1, w, alone.data(), false, kernels);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), together.begin() + t * outputs))
          << name << ": row " << t;
    }
  }
}

TEST_P(block_product, vnni_kernels_give_the_avx2_kernels_bits_on_every_tile) {
  if (!avx2_block_kernels())
    GTEST_SKIP() << "this CPU has no AVX2: neither the AVX2 kernels nor their "
                    "SIMDe-emulated VNNI copy run here";
  // 9 blocks: int4's last unit half filled. 16 weight rows: two groups. Wide tiles of
  // all sixteen activation rows, and of eleven from the sixth (the rest zero rows).
  const std::int64_t inputs = 9 * block_width - 5, blocks = 9;
  const auto x = normal(16 * inputs, 11, 2.0f);
  const auto wf = normal(16 * inputs, 12, 0.05f);
  const block_matrix w(GetParam(), wf.data(), 16, inputs);
  const auto q = quantized(x, 16, inputs, blocks);
  for (const auto& [name, vnni] : vnni_kernels_here()) {
    expect_avx2_bits(vnni, w, q.view(), name + " random");
    expect_wide_avx2_bits(vnni, w, q.view(), 0, 16, name + " random");
    expect_wide_avx2_bits(vnni, w, q.view(), 5, 11, name + " random");
  }
}

/// A row of llama.cpp block records whose every weight is `q` (its extremes: Q8_0's
/// -128 and 127, Q4_0's -8 and 7), each block's scale `d`.
std::vector<std::byte> records_of(block_format format, int q, float d,
                                  std::int64_t blocks) {
  const std::size_t record = format == block_format::q8_0 ? 34 : 18;
  std::vector<std::byte> row(blocks * record);
  const auto half = to_half_bits(d);
  for (std::int64_t b = 0; b < blocks; ++b) {
    std::byte* r = row.data() + b * record;
    std::memcpy(r, &half, 2);
    const auto byte = format == block_format::q8_0
                          ? static_cast<std::uint8_t>(static_cast<std::int8_t>(q))
                          : static_cast<std::uint8_t>((q + 8) | (q + 8) << 4);
    std::memset(r + 2, byte, record - 2);
  }
  return row;
}

TEST_P(block_product, every_kernel_gives_the_avx2_kernels_bits_at_the_integers_extremes) {
  if (!avx2_block_kernels())
    GTEST_SKIP() << "this CPU has no AVX2: neither the AVX2 kernels nor their "
                    "SIMDe-emulated VNNI copy run here";
  const std::int64_t blocks = 3, inputs = blocks * block_width;
  const bool int8 = GetParam() == block_format::q8_0;
  // Eight rows: the format's two extremes, alternating.
  std::vector<std::vector<std::byte>> stored;
  std::vector<const std::byte*> records;
  for (int k = 0; k < 8; ++k) {
    stored.push_back(records_of(GetParam(),
                                k % 2 == 0 ? (int8 ? -128 : -8) : (int8 ? 127 : 7),
                                0.5f + k, blocks));
    records.push_back(stored.back().data());
  }
  const block_matrix w(GetParam(), records, inputs);
  // Activations at +-127 (the quantizer's range), all of one sign or alternating.
  quantized_rows q{std::vector<std::int8_t>(4 * inputs),
                   std::vector<float>(4 * blocks, 0.25f),
                   std::vector<std::int32_t>(4 * blocks), 4, blocks};
  auto& xq = q.quants;
  for (std::int64_t j = 0; j < inputs; ++j) {
    xq[j] = 127;
    xq[inputs + j] = -127;
    xq[2 * inputs + j] = j % 2 == 0 ? 127 : -127;
    xq[3 * inputs + j] = j % 3 == 0 ? -127 : 127;
  }
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t b = 0; b < blocks; ++b)
      for (std::int64_t j = 0; j < block_width; ++j)
        q.sums[b * 4 + i] += xq[i * inputs + b * block_width + j];
  expect_avx2_bits(portable_block_kernels(), w, q.view(), "extremes");
  // And the value itself: row 0 (every weight the lowest) against activation row 0.
  float y[8];
  for (const auto& [name, vnni] : vnni_kernels_here()) {
    expect_avx2_bits(vnni, w, q.view(), name + " extremes");
    expect_wide_avx2_bits(vnni, w, q.view(), 0, 4, name + " extremes");
    vnni.for_format(GetParam())(weight_rows{w.quants(0), w.scales(0)}, q.view(), 1, y);
    EXPECT_EQ(y[0], 0.5f * 0.25f * (int8 ? -128 : -8) * 127 * inputs) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(formats, block_product,
                         ::testing::Values(block_format::q8_0, block_format::q4_0),
                         [](const ::testing::TestParamInfo<block_format>& info) {
                           return weight_format_name(format_of(info.param));
                         });

} // namespace
