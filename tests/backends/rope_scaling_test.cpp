// RoPE frequency scaling as HF defines it, checked by its properties: linear divides
// every frequency by the factor; llama3 keeps the high frequencies, slows the low ones
// by the factor, and blends continuously in between; a GGUF file's per-frequency
// factors divide each frequency by its own. (The llama3-synthetic oracle
// checks the whole model; no oracle case uses linear scaling.)
#include "models/llama_model.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

namespace {

using namespace canopy::backends;

model_config with(rope_scaling scaling) {
  model_config c;
  c.head_dim = 64;
  c.rope_theta = 500000.0;
  c.scaling = scaling;
  return c;
}

TEST(rope_scaling, linear_divides_every_frequency_by_the_factor) {
  const auto plain = rope_inverse_frequencies(with({}));
  const auto linear =
      rope_inverse_frequencies(with({rope_scaling::kind::linear, 4.0, 1.0, 4.0, 0, {}}));
  ASSERT_EQ(plain.numel(), 32);
  EXPECT_TRUE(at::allclose(linear * 4.0, plain, 1e-15, 0));
}

TEST(rope_scaling, per_frequency_factors_divide_each_frequency_by_its_own) {
  rope_scaling r;
  r.type = rope_scaling::kind::per_frequency;
  for (int i = 0; i < 32; ++i)
    r.frequency_factors.push_back(1.0 + 0.25 * i);
  const auto plain = rope_inverse_frequencies(with({}));
  const auto scaled = rope_inverse_frequencies(with(r));
  ASSERT_EQ(scaled.numel(), 32);
  for (std::int64_t i = 0; i < 32; ++i)
    EXPECT_EQ(scaled[i].item<double>(), plain[i].item<double>() / (1.0 + 0.25 * i)) << i;
}

TEST(rope_scaling, llama3_keeps_high_frequencies_slows_low_ones_and_blends_between) {
  const rope_scaling r{rope_scaling::kind::llama3, 8.0, 1.0, 4.0, 8192, {}};
  const auto plain = rope_inverse_frequencies(with({}));
  const auto scaled = rope_inverse_frequencies(with(r));
  const double high_wavelen = 8192 / 4.0, low_wavelen = 8192 / 1.0;
  int kept = 0, slowed = 0, blended = 0;
  for (std::int64_t i = 0; i < plain.numel(); ++i) {
    const double f = plain[i].item<double>(), g = scaled[i].item<double>();
    const double wavelen = 2 * M_PI / f;
    if (wavelen < high_wavelen) {
      EXPECT_EQ(g, f) << i;
      ++kept;
    } else if (wavelen > low_wavelen) {
      EXPECT_NEAR(g, f / 8.0, 1e-15 * f) << i;
      ++slowed;
    } else {
      EXPECT_LT(g, f) << i;
      EXPECT_GT(g, f / 8.0) << i;
      ++blended;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(slowed, 0);
  EXPECT_GT(blended, 0) << "theta 5e5, head_dim 64 and 8192 have all three kinds";
  // Continuity at the edges of the blend: HF's smooth factor is 1 at the high edge
  // (the frequency kept) and 0 at the low edge (divided by the factor).
  model_config edge = with(r);
  edge.head_dim = 2; // one frequency: 1 / theta^0 = 1, wavelength 2 pi
  edge.rope_theta = 10000.0;
  edge.scaling.original_context = static_cast<std::int64_t>(std::llround(2 * M_PI * 4.0));
  const double at_high_edge = rope_inverse_frequencies(edge)[0].item<double>();
  EXPECT_NEAR(at_high_edge, 1.0, 0.02) << "wavelength ~ original / high_freq_factor";
}

} // namespace
