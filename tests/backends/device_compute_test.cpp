// Reduced-precision compute on a CUDA device (float16 and bfloat16), against the float64
// oracle on stories260K. Runs where CANOPY_TEST_DEVICE names a CUDA device (the `cuda`
// label, support/test_device.hpp); the CPU's bfloat16 is bfloat16_compute_test.cpp's,
// and the CPU has no float16 matmul.
//
// What the arithmetic promises. cuBLAS accumulates float16 and bfloat16 products in
// float32, so the error is the rounding of each stored activation and weight to the
// dtype: unit roundoff u = 2^-11 (float16), 2^-8 (bfloat16). A logit error of standard
// deviation s gives KL(reference || computed) of about s^2 / 2 per row, and s grows
// with u. bfloat16_compute_test.cpp bounds KL by 0.1 nats (s = 0.45, beyond what a
// bfloat16 kernel that accumulates in bfloat16 reaches); the same s / u ratio gives
// float16 0.1 / 64 (s scales by 2^-3, KL by 2^-6). The top token is kept on 9 rows of
// 10 in both (the models' near-flat rows have near ties).
#include <canopy/backends/checkpoint.hpp>
#include <canopy/backends/torch_backend.hpp>

#include "oracle.hpp"
#include "pass_items.hpp"
#include "shared_fixtures.hpp"
#include "test_device.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>

namespace {

using namespace canopy::backends;
using canopy::testing::load_oracle_cases;

struct precision {
  const char* dtype;
  double largest_kl; // nats per row
};

void PrintTo(const precision& p, std::ostream* out) {
  *out << p.dtype;
}

class device_compute : public ::testing::TestWithParam<precision> {};

TEST_P(device_compute, keeps_the_reference_distributions) {
  if (!canopy::testing::testing_on_cuda())
    GTEST_SKIP() << "reduced-precision compute on a CUDA device: CANOPY_TEST_DEVICE is "
                 << canopy::testing::test_device()
                 << " (ctest -L cuda runs it on cuda:0)";
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  CANOPY_SHARED_PATH_OR_SKIP(oracle_dir, "oracle/stories260K");
  torch_options options;
  options.dtype = GetParam().dtype;
  auto backend =
      make_torch_backend(load_checkpoint(model), canopy::testing::test_device(), options);
  EXPECT_EQ(backend->info().kv_bytes_per_token, 640u)
      << "KV is stored in the compute dtype";
  std::size_t rows = 0, same_argmax = 0;
  double largest_kl = 0;
  for (const auto& c : load_oracle_cases(oracle_dir)) {
    pass_request request;
    request.items.push_back(canopy::testing::item(c.tokens, no_kv, 0, false));
    const auto out = backend->run(request).items[0];
    ASSERT_EQ(out.logprobs.size(), static_cast<std::size_t>(c.rows * c.vocab)) << c.name;
    for (std::int64_t r = 0; r < c.rows; ++r, ++rows) {
      const float* got = out.logprobs.data() + r * c.vocab;
      const float* want = c.row(r);
      double kl = 0;
      for (std::int64_t v = 0; v < c.vocab; ++v)
        kl += std::exp(static_cast<double>(want[v])) *
              (static_cast<double>(want[v]) - got[v]);
      ASSERT_FALSE(std::isnan(kl)) << c.name << " row " << r;
      EXPECT_LE(kl, GetParam().largest_kl) << c.name << " row " << r;
      largest_kl = std::max(largest_kl, kl);
      same_argmax += std::max_element(got, got + c.vocab) - got ==
                     std::max_element(want, want + c.vocab) - want;
    }
  }
  EXPECT_GE(same_argmax * 10, rows * 9) << same_argmax << " of " << rows;
  std::cout << GetParam().dtype << " on " << canopy::testing::test_device()
            << ": largest KL " << largest_kl << ", top token kept on " << same_argmax
            << " of " << rows << " rows\n";
}

INSTANTIATE_TEST_SUITE_P(dtypes, device_compute,
                         ::testing::Values(precision{"bfloat16", 0.1},
                                           precision{"float16", 0.1 / 64}),
                         [](const ::testing::TestParamInfo<precision>& info) {
                           return std::string(info.param.dtype);
                         });

} // namespace
