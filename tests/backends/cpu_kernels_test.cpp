// The direct CPU forward's own kernels, against plain references: vector_math.hpp
// (exp_nonpositive, silu, lane sums and maxima) and multiply_in_out (gemv for one or two
// rows, gemm beyond, with and without accumulating into the output).
#include "models/blas_product.hpp"
#include "models/vector_math.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace {

using namespace canopy::backends;

TEST(vector_exp, is_within_two_ulp_of_exp_over_the_range_attention_uses) {
  double worst = 0;
  float worst_at = 0;
  for (float x = 0; x >= -87.0f; x -= 1e-3f + std::abs(x) * 1e-4f) {
    const double exact = std::exp(static_cast<double>(x));
    const auto rounded = static_cast<float>(exact);
    const double ulp = std::nextafter(rounded, 2.0f) - rounded;
    const double error = std::abs(exp_nonpositive(x) - exact) / ulp;
    if (error > worst) {
      worst = error;
      worst_at = x;
    }
  }
  EXPECT_LE(worst, 2.0) << "at x = " << worst_at;
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
}

TEST(vector_exp, below_its_range_it_is_negligible_and_never_negative_or_nan) {
  for (float x : {-87.5f, -100.0f, -1e30f, -INFINITY}) {
    const float y = exp_nonpositive(x);
    EXPECT_GE(y, 0.0f) << x;
    EXPECT_LE(y, 2e-38f) << x;
  }
}

TEST(vector_math, silu_lane_sum_and_lane_max_match_their_definitions) {
  for (float x : {-200.0f, -30.0f, -1.5f, -1e-3f, 0.0f, 2e-3f, 0.7f, 9.0f, 95.0f}) {
    const double exact = x / (1.0 + std::exp(-static_cast<double>(x)));
    EXPECT_NEAR(silu(x), exact, 4e-7 * std::max(1.0, std::abs(exact))) << x;
  }
  std::vector<float> v;
  for (int i = 0; i < 37; ++i) // not a whole number of lanes
    v.push_back(static_cast<float>((i * 7919) % 101) - 50.0f + 0.25f);
  double sum = 0;
  for (float e : v)
    sum += e;
  EXPECT_NEAR(lane_sum(v.data(), 37), sum, 1e-4);
  EXPECT_EQ(lane_max(v.data(), 37), *std::max_element(v.begin(), v.end()));
  EXPECT_EQ(lane_max(v.data(), 3), *std::max_element(v.begin(), v.begin() + 3));
}

/// y = x w (+ y), in double.
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& y0, int rows, int in, int out,
                              bool accumulate) {
  std::vector<double> y(static_cast<std::size_t>(rows * out));
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double sum = accumulate ? y0[static_cast<std::size_t>(r * out + o)] : 0.0;
      for (int i = 0; i < in; ++i)
        sum += double(x[static_cast<std::size_t>(r * in + i)]) *
               w[static_cast<std::size_t>(i * out + o)];
      y[static_cast<std::size_t>(r * out + o)] = sum;
    }
  return y;
}

TEST(multiply_in_out,
     matches_the_product_for_every_row_count_with_and_without_accumulating) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1, 1);
  const int in = 67, out = 45;      // odd sizes: no kernel's tail is skipped
  for (int rows : {1, 2, 3, 8, 33}) // gemv (1, 2) and gemm (3 and more)
    for (bool accumulate : {false, true}) {
      std::vector<float> x(static_cast<std::size_t>(rows * in)),
          w(static_cast<std::size_t>(in * out)), y(static_cast<std::size_t>(rows * out));
      for (auto* v : {&x, &w, &y})
        for (auto& e : *v)
          e = value(rng);
      const auto expected = reference(x, w, y, rows, in, out, accumulate);
      multiply_in_out(x.data(), rows, w.data(), in, out, y.data(), accumulate);
      double worst = 0;
      for (std::size_t i = 0; i < y.size(); ++i)
        worst = std::max(worst, std::abs(y[i] - expected[i]));
      // 67 float products of magnitude < 1, summed in float: far below 1e-4.
      EXPECT_LE(worst, 1e-4) << rows << " rows, accumulate " << accumulate;
    }
}

} // namespace
