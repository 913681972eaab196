// KV stored in another format than the compute dtype (torch_options::kv_dtype), against
// the float64 oracle on every case of every oracle model, along the three ways a pass
// meets stored KV (oracle_paths.hpp).
//
// What storage can promise. Storing K and V moves each element by at most the
// format's unit roundoff u relative to it (float16 u = 2^-11, bfloat16 2^-8), or, for
// int8, by half a step of its head's scale (max|head| / 254, which for an element well
// below its head's largest is many times its own u). The log-probs move in proportion:
// an independent float64 simulation of stories260K with K and V rounded to float16
// (numpy, the same cases) moves them by up to 0.0157 = 32 u, and with int8 by up to
// 0.85, these tests measure 0.0168 and 0.851: the error is the format's, not the
// kernels'. The largest errors are on tail tokens (log-prob -20 and below); what a
// sampler sees is the distribution, so the bounds are:
//  - largest |error| at most 64 u for float16 and bfloat16 (twice the measured
//    amplification), 1.5 for int8 (measured 0.85);
//  - KL(oracle || stored) per row, which scales with u^2: 1e-4 float16 (measured
//    6.7e-6), 2e-3 bfloat16 (3.2e-4), 0.03 int8 (0.011);
//  - the top token kept on 99% of rows for float16, 97% for bfloat16 and 96% for int8
//    (measured 100%, 98.4% and 97.8%: the synthetic models' near-flat rows have near
//    ties).
// The issue asked for float16 and bfloat16 within 2e-3 and int8 within 5e-2 with the
// top token kept on 99% of rows; those do not hold for these models (docs/cache.md, "KV
// formats"). Each test prints what it met; the float32 cases show that the paths add
// nothing of their own (within the oracle's 1e-4).
#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/synthetic_checkpoint.hpp>
#include <canopy/backends/models/torch_backend.hpp>

#include "oracle.hpp"
#include "oracle_paths.hpp"
#include "pass_items.hpp"
#include "shared_fixtures.hpp"
#include "test_device.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <tuple>

namespace {

using namespace canopy::backends;
using canopy::cache::token_seq;
using canopy::testing::agreement_on_every_path;
using canopy::testing::item;
using canopy::testing::model_fixture;
using canopy::testing::oracle_agreement;
using canopy::testing::oracle_case;

/// A model, a kv_dtype and kv_residual_tokens.
using format_param = std::tuple<model_fixture, std::string, std::uint64_t>;

class kv_dtype_fidelity : public ::testing::TestWithParam<format_param> {
protected:
  oracle_agreement measure() const {
    torch_options options;
    options.kv_dtype = std::get<1>(GetParam());
    options.kv_residual_tokens = std::get<2>(GetParam());
    EXPECT_EQ(make_torch_backend(load_checkpoint(model_path),
                                 canopy::testing::test_device(), options)
                  ->info()
                  .kv_dtype,
              options.kv_dtype);
    const auto seen =
        agreement_on_every_path(model_path, options, cases, residual_bytes());
    std::cout << "[ kv_dtype " << std::get<1>(GetParam()) << " residual "
              << std::get<2>(GetParam()) << " on " << std::get<0>(GetParam()).name
              << ": largest error " << seen.largest_error << ", KL " << seen.largest_kl
              << ", top token kept on " << seen.same_top << " of " << seen.rows
              << " rows ]\n";
    return seen;
  }
  /// What the residual copies take of the budget (compute float32, K and V).
  std::uint64_t residual_bytes() const {
    const auto c = load_model_config(model_path);
    return std::get<2>(GetParam()) * 2 *
           static_cast<std::uint64_t>(c.num_layers * c.num_kv_heads * c.head_dim) * 4;
  }
  std::filesystem::path model_path;
  std::vector<oracle_case> cases;
};

/// The bounds above, by format.
struct format_bound {
  double largest_error, largest_kl, top_kept_share;
};

format_bound bound_of(const std::string& format) {
  if (format == "float32")
    return {1e-4, 1e-5, 1.0};
  if (format == "float16")
    return {64 * std::ldexp(1.0, -11), 1e-4, 0.99};
  if (format == "bfloat16")
    return {64 * std::ldexp(1.0, -8), 2e-3, 0.97};
  return {1.5, 0.03, 0.96};
}

TEST_P(kv_dtype_fidelity, stays_within_the_formats_bound_on_every_path) {
  CANOPY_LOAD_ORACLE_MODEL_OF(std::get<0>(GetParam()));
  const auto seen = measure();
  // Copies of more tokens than the longest case (300) hold every token read exactly.
  const auto bound = std::get<2>(GetParam()) >= 512 ? bound_of("float32")
                                                    : bound_of(std::get<1>(GetParam()));
  ASSERT_GT(seen.rows, 0u);
  EXPECT_LE(seen.largest_error, bound.largest_error);
  EXPECT_LE(seen.largest_kl, bound.largest_kl);
  EXPECT_GE(static_cast<double>(seen.same_top),
            bound.top_kept_share * static_cast<double>(seen.rows))
      << seen.same_top << " of " << seen.rows;
}

INSTANTIATE_TEST_SUITE_P(shared_models, kv_dtype_fidelity,
                         ::testing::Combine(canopy::testing::oracle_models(),
                                            ::testing::Values("float32", "float16",
                                                              "bfloat16", "int8"),
                                            ::testing::Values(std::uint64_t{0})),
                         [](const ::testing::TestParamInfo<format_param>& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  std::get<1>(info.param);
                         });

// int8 with residual tokens: 16 (reported), and 512, more than any case, where every
// token a pass reads is its exact copy, so the answers are float32's.
INSTANTIATE_TEST_SUITE_P(
    residual, kv_dtype_fidelity,
    ::testing::Combine(canopy::testing::oracle_models(), ::testing::Values("int8"),
                       ::testing::Values(std::uint64_t{16}, std::uint64_t{512})),
    [](const ::testing::TestParamInfo<format_param>& info) {
      return std::string(std::get<0>(info.param).name) + "_int8_residual_" +
             std::to_string(std::get<2>(info.param));
    });

/// Tokens one budget holds in `format`: passes of fresh 100-token sequences until
/// one keeps nothing.
std::size_t tokens_held(const checkpoint& ckpt, const std::string& format,
                        std::uint64_t budget, std::uint64_t residual_tokens = 0) {
  torch_options options;
  options.kv_dtype = format;
  options.kv_residual_tokens = residual_tokens;
  options.kv_budget_bytes = budget;
  auto backend = make_torch_backend(ckpt, canopy::testing::test_device(), options);
  for (int pass = 0; pass < 1000; ++pass) {
    pass_request request;
    request.items.push_back(item(token_seq(100, pass % 500)));
    const auto kept = backend->run(request).items[0].kv;
    if (kept.front() == no_kv)
      return backend->kv_entries();
  }
  ADD_FAILURE() << format << ": the storage never filled";
  return 0;
}

TEST(kv_dtype_budget,
     int8_holds_about_four_times_the_tokens_of_float32_less_residual_copies) {
  // Head size 64 (hidden 128, 2 heads): a token's head takes 256 bytes in float32 and
  // 64 + a 4-byte scale in int8, 3.76 times fewer.
  synthetic_spec spec;
  spec.hidden = 128;
  spec.heads = 2;
  const auto ckpt = make_synthetic_checkpoint(spec);
  constexpr std::uint64_t budget = 1u << 20;
  const auto f32 = tokens_held(ckpt, "float32", budget);
  const auto f16 = tokens_held(ckpt, "float16", budget);
  const auto i8 = tokens_held(ckpt, "int8", budget);
  EXPECT_EQ(f32, budget / (2 * 2 * 2 * 256)) << "every row of the storage holds a token";
  EXPECT_EQ(f16, 2 * f32);
  EXPECT_EQ(i8, budget / (2 * 2 * 2 * 68));
  EXPECT_GE(static_cast<double>(i8), 3.7 * static_cast<double>(f32));
  // Residual copies are float32 and come out of the same budget.
  EXPECT_EQ(tokens_held(ckpt, "int8", budget, 64),
            (budget - 64 * 2048) / (2 * 2 * 2 * 68));
  torch_options all_copies;
  all_copies.kv_dtype = "int8";
  all_copies.kv_budget_bytes = budget;
  all_copies.kv_residual_tokens = budget / 2048;
  try {
    make_torch_backend(ckpt, canopy::testing::test_device(), all_copies);
    ADD_FAILURE() << "copies that take the whole budget were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("kv_residual_tokens 512 take 1048576 bytes"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
