// The direct CPU forward's own kernels, against plain references: vector_math.hpp
// (exp_nonpositive, silu, lane sums and maxima), multiply_in_out (sgemv or sgemm, or the
// AVX-512 kernels, with and without accumulating into the output), those kernels
// themselves (their emulated copy everywhere, the native one where the CPU has
// AVX-512), and the report of OpenBLAS's kernel set (blas_core.hpp).
#include "models/blas_core.hpp"
#include "models/blas_product.hpp"
#include "models/float_product.hpp"
#include "models/vector_math.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <strings.h>
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

/// Random operands of a product: x [rows, in], w [in, out] with rows `stride` apart (the
/// padding NaN: reading it spoils the result), y [rows, out].
struct operands {
  int rows, in, out, stride;
  std::vector<float> x, w, y;
  operands(int rows_, int in_, int out_, int stride_, std::mt19937& rng)
      : rows(rows_), in(in_), out(out_), stride(stride_),
        x(static_cast<std::size_t>(rows * in)),
        w(static_cast<std::size_t>(in * stride), NAN),
        y(static_cast<std::size_t>(rows * out)) {
    std::uniform_real_distribution<float> value(-1, 1);
    for (auto* v : {&x, &y})
      for (auto& e : *v)
        e = value(rng);
    for (int i = 0; i < in; ++i)
      for (int o = 0; o < out; ++o)
        w[static_cast<std::size_t>(i * stride + o)] = value(rng);
  }

  /// x w (+ y), in double, and what float arithmetic may miss it by: a sum of n terms
  /// in any order, each rounded once, is within (n + 1) u of the sum of their
  /// magnitudes (u = 2^-24; Higham's bound for recursive summation, FMA or not).
  struct exact {
    std::vector<double> value, bound;
  };
  exact product(bool accumulate) const {
    exact e{std::vector<double>(static_cast<std::size_t>(rows * out)),
            std::vector<double>(static_cast<std::size_t>(rows * out))};
    for (int r = 0; r < rows; ++r)
      for (int o = 0; o < out; ++o) {
        const auto at = static_cast<std::size_t>(r * out + o);
        double sum = accumulate ? y[at] : 0.0, magnitude = std::abs(sum);
        for (int i = 0; i < in; ++i) {
          const double term = double(x[static_cast<std::size_t>(r * in + i)]) *
                              w[static_cast<std::size_t>(i * stride + o)];
          sum += term;
          magnitude += std::abs(term);
        }
        e.value[at] = sum;
        e.bound[at] = (in + 2) * std::ldexp(1.0, -24) * magnitude;
      }
    return e;
  }
};

/// How far y is from the exact product, as a multiple of what float arithmetic may miss
/// it by (within 1: correct; NaN, from reading padding: infinite).
double worst_error(const std::vector<float>& y, const operands::exact& expected) {
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i)
    worst = std::isnan(y[i])
                ? INFINITY
                : std::max(worst, std::abs(y[i] - expected.value[i]) / expected.bound[i]);
  return worst;
}

TEST(multiply_in_out,
     matches_the_product_for_every_row_count_with_and_without_accumulating) {
  std::mt19937 rng(7);
  const int in = 67;
  // Odd sizes, so no kernel's tail is skipped; 300 outputs are two of the AVX-512
  // kernel's 128-output blocks and three 16-lane vectors, the last of 12 outputs. Rows
  // are contiguous or padded (Note [padded rows]).
  for (int out : {45, 300})
    for (int padding : {0, 5})
      for (int rows : {1, 2, 3, 8, 33}) // one or two rows decode; gemm from 3
        for (bool accumulate : {false, true}) {
          operands o(rows, in, out, out + padding, rng);
          const auto expected = o.product(accumulate);
          multiply_in_out(o.x.data(), rows, o.w.data(), in, out, o.stride, o.y.data(),
                          accumulate);
          EXPECT_LE(worst_error(o.y, expected), 1.0)
              << rows << " rows, " << out << " outputs, padding " << padding
              << ", accumulate " << accumulate;
        }
}

/// `kernel` over outputs [0, out) in one call, and again split at 128 into two calls
/// (as parallel tasks split it): both the product, and the same bits.
void expect_products(float_product_fn kernel) {
  std::mt19937 rng(11);
  std::vector<float> scratch(float_product_scratch_floats);
  // One and two rows decode; from three, six-row tiles and their remainders, and chunks
  // of 64 rows. 600 inputs are two runs of the tiles' 512; 300 outputs are two 128-output
  // decoding blocks (four 64-output tile blocks) and three vectors, the last of 12
  // outputs.
  for (int in : {67, 600})
    for (int out : {7, 16, 45, 64, 128, 300})
      for (int padding : {0, 5})
        for (int rows : {1, 2, 3, 5, 6, 13, 64, 70})
          for (bool accumulate : {false, true}) {
            if (in == 600 && rows > 13 && out != 300)
              continue; // the largest cases once: they take the most time emulated
            operands o(rows, in, out, out + padding, rng);
            const auto expected = o.product(accumulate);
            auto whole = o.y, split = o.y;
            const float* x = o.x.data();
            const float* w = o.w.data();
            float* s = scratch.data();
            kernel(x, rows, w, in, out, o.stride, 0, out, whole.data(), accumulate, s);
            const int cut = std::min(out, 128);
            kernel(x, rows, w, in, out, o.stride, 0, cut, split.data(), accumulate, s);
            kernel(x, rows, w, in, out, o.stride, cut, out, split.data(), accumulate, s);
            EXPECT_LE(worst_error(whole, expected), 1.0)
                << rows << " rows, " << in << " inputs, " << out << " outputs, padding "
                << padding << ", accumulate " << accumulate;
            EXPECT_EQ(whole, split) << rows << " rows, " << out << " outputs";
            // Stopping three outputs short (a partial vector: Note [partial vectors]):
            // the same bits before, nothing written after.
            auto part = o.y;
            kernel(x, rows, w, in, out, o.stride, 0, out - 3, part.data(), accumulate, s);
            for (int r = 0; r < rows; ++r)
              for (int j = 0; j < out; ++j) {
                const auto at = static_cast<std::size_t>(r * out + j);
                ASSERT_EQ(part[at], j < out - 3 ? whole[at] : o.y[at])
                    << rows << " rows, " << out << " outputs: row " << r << ", output "
                    << j << " of a product stopped at " << out - 3;
              }
          }
}

TEST(float_products, the_avx512_kernels_compute_the_product_emulated_on_any_avx2_cpu) {
  expect_products(avx512_float_emulated::product);
}

TEST(float_products,
     the_avx512_kernels_compute_the_product_natively_where_the_cpu_has_it) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f"))
    GTEST_SKIP() << "this CPU has no AVX-512; the emulated copy's test ran instead";
  expect_products(avx512_float::product);
}

TEST(float_products, avx512_cpus_multiply_by_the_kernels_unless_aten_is_held_to_avx2) {
  __builtin_cpu_init();
  const char* capability = std::getenv("ATEN_CPU_CAPABILITY");
  const bool held = capability != nullptr && (std::string(capability) == "avx2" ||
                                              std::string(capability) == "default");
  const bool expected = __builtin_cpu_supports("avx512f") && !held;
  EXPECT_EQ(float_product_here() != nullptr, expected);
  EXPECT_STREQ(float_product_kernels_here(), expected ? "avx512" : "blas");
}

TEST(blas_core, names_the_kernel_set_openblas_runs) {
  const auto core = blas_core();
  if (core.empty())
    GTEST_SKIP() << "the process's BLAS is not OpenBLAS";
  const char* asked = std::getenv("OPENBLAS_CORETYPE");
  if (asked == nullptr)
    GTEST_SKIP() << "OpenBLAS chose " << core << " itself; nothing to compare with";
  EXPECT_EQ(strcasecmp(core.c_str(), asked), 0)
      << "OPENBLAS_CORETYPE=" << asked << " but the report says " << core;
}

} // namespace
