// Weights in bfloat16 (weight_dtype bfloat16: projection.hpp, bfloat16_product.hpp)
// against what the format defines:
//  - each weight rounded to the nearest bfloat16 (ties to even): within 2^-8 of itself
//    (8 bits of significand), and read back by a table row exactly as rounded;
//  - widening exact for every bit pattern, at every length (eight a step, then one);
//  - a product equal to the float64 product of the rounded weights up to float32's
//    rounding of a dot product of `in` terms, gamma(in + 1) sum |x||w| (Higham's bound,
//    whatever order BLAS sums in), plus the accumulated value's own rounding; for one
//    activation row and two (the AVX2 decoding kernels, or sgemv) and many (sgemm),
//    over several panels and a partial one.
#include "models/bfloat16_product.hpp"
#include "models/projection.hpp"

#include <c10/util/BFloat16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

using namespace canopy::backends;

constexpr double unit_roundoff_32 = 0x1p-24;

at::Tensor normal_rows(std::int64_t rows, std::int64_t inputs, std::uint64_t seed) {
  at::manual_seed(seed);
  return at::randn({rows, inputs});
}

TEST(bfloat16_weights, widening_is_exact_for_every_bit_pattern_and_length) {
  std::vector<std::uint16_t> bits(1 << 16);
  for (std::size_t i = 0; i < bits.size(); ++i)
    bits[i] = static_cast<std::uint16_t>(i);
  std::vector<float> wide(bits.size());
  widen_bfloat16(bits.data(), static_cast<std::int64_t>(bits.size()), wide.data());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const float expected = c10::BFloat16(bits[i], c10::BFloat16::from_bits());
    ASSERT_TRUE(std::memcmp(&wide[i], &expected, sizeof(float)) == 0) << "bits " << i;
  }
  for (std::int64_t count = 0; count <= 17; ++count) {
    std::vector<float> out(18, -1.0f);
    widen_bfloat16(bits.data() + 0x3f80, count, out.data()); // 1.0 onwards
    for (std::int64_t i = 0; i < count; ++i)
      EXPECT_EQ(out[i],
                static_cast<float>(c10::BFloat16(static_cast<std::uint16_t>(0x3f80 + i),
                                                 c10::BFloat16::from_bits())));
    EXPECT_EQ(out[count], -1.0f) << "wrote past " << count;
  }
}

TEST(bfloat16_weights, each_weight_is_its_nearest_bfloat16_and_a_row_reads_it_back) {
  const auto w = normal_rows(37, 70, 1);
  const auto p = make_projection(w, weight_format::bf16);
  ASSERT_TRUE(p.bfloat16.defined());
  EXPECT_EQ(p.inputs(), 70);
  EXPECT_EQ(p.outputs(), 37);
  EXPECT_EQ(p.bytes(), 37u * 70u * 2u);
  const auto table = token_embedding::rows_of(p);
  EXPECT_TRUE(table.shares(p));
  std::vector<float> row(70);
  for (std::int64_t r = 0; r < 37; ++r) {
    table.row_into(r, row.data());
    for (std::int64_t j = 0; j < 70; ++j) {
      const float original = w[r][j].item<float>();
      EXPECT_EQ(row[j], static_cast<float>(c10::BFloat16(original)));
      EXPECT_LE(std::fabs(row[j] - original), 0x1p-8 * std::fabs(original));
    }
  }
  EXPECT_TRUE(at::equal(
      table.lookup(at::tensor({5, 0, 36}, at::kLong)),
      p.bfloat16.index_select(0, at::tensor({5, 0, 36}, at::kLong)).to(at::kFloat)));
}

TEST(bfloat16_weights, products_are_float32_arithmetic_on_the_rounded_weights) {
  const std::int64_t inputs = 100;
  const auto panel = bfloat16_panel_rows(inputs);
  const auto outputs = 2 * panel + panel / 2; // two whole panels and a partial one
  const auto p = make_projection(normal_rows(outputs, inputs, 2), weight_format::bf16);
  const auto w64 = p.bfloat16.to(at::kDouble);
  const double gamma =
      (inputs + 1) * unit_roundoff_32 / (1 - (inputs + 1) * unit_roundoff_32);
  for (const std::int64_t rows : {1, 2, 3, 9}) {
    const auto x = normal_rows(rows, inputs, 3 + rows);
    const auto x64 = x.to(at::kDouble);
    const auto exact = at::mm(x64, w64.t());
    const auto magnitude = at::mm(x64.abs(), w64.abs().t());
    for (const bool accumulate : {false, true}) {
      const auto before = normal_rows(rows, outputs, 20 + rows);
      const auto expected = accumulate ? exact + before.to(at::kDouble) : exact;
      // The final add (of the prior value) rounds once more: the result's own unit
      // roundoff.
      const auto bound =
          gamma * magnitude * (1 + unit_roundoff_32) + unit_roundoff_32 * expected.abs();
      // The product as the forwards take it (AVX2 kernels for up to two rows where the
      // CPU has them), and through BLAS panels whatever the rows.
      for (const bool panels : {false, true}) {
        auto y = accumulate ? before.clone() : at::zeros({rows, outputs});
        if (panels)
          multiply_bfloat16_panels(x.data_ptr<float>(), rows, p.bfloat16,
                                   y.data_ptr<float>(), accumulate);
        else
          project_into(x.data_ptr<float>(), rows, p, y.data_ptr<float>(), accumulate);
        const auto excess =
            ((y.to(at::kDouble) - expected).abs() - bound).max().item<double>();
        EXPECT_LE(excess, 0.0) << rows << " rows, accumulate " << accumulate
                               << ", panels " << panels;
      }
    }
  }
}

} // namespace
