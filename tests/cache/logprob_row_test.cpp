#include <canopy/cache/logprob_row.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace canopy::cache {
namespace {

std::uint32_t bits_of(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float float_of(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

bool half_is_nan(std::uint16_t h) {
  return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
}
bool bf16_is_nan(std::uint16_t b) {
  return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu);
}

// Independent reference for float -> half: the nearest of the two neighbouring
// halves by exact (double) distance, ties to the even bit pattern. Past the largest
// half, rounding treats 2^16 as the next value, which IEEE maps to infinity.
std::uint16_t reference_half(float value) {
  const std::uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const double x = std::fabs(static_cast<double>(value));
  const auto magnitude = [](std::uint16_t h) {
    return h == 0x7c00 ? 65536.0 : static_cast<double>(half_to_float(h));
  };
  std::uint16_t lo = 0, hi = 0x7c00; // magnitude(lo) <= x < magnitude(hi)
  if (x >= magnitude(hi))
    return sign | 0x7c00;
  while (hi - lo > 1) {
    const auto mid = static_cast<std::uint16_t>((lo + hi) / 2);
    (magnitude(mid) <= x ? lo : hi) = mid;
  }
  const double below = x - magnitude(lo), above = magnitude(hi) - x;
  const std::uint16_t nearest = below < above   ? lo
                                : above < below ? hi
                                                : (lo & 1 ? hi : lo);
  return sign | nearest;
}

// Same for bfloat16, whose neighbours are the float's bits truncated and one step up.
std::uint16_t reference_bf16(float value) {
  const std::uint32_t bits = bits_of(value);
  const std::uint32_t lo = bits & 0xffff0000u, hi = lo + 0x10000u;
  const double x = std::fabs(static_cast<double>(value));
  const double lo_mag = std::fabs(static_cast<double>(float_of(lo)));
  const double hi_mag = (hi & 0x7fffffffu) == 0x7f800000u
                            ? std::ldexp(1.0, 128)
                            : std::fabs(static_cast<double>(float_of(hi)));
  const double below = x - lo_mag, above = hi_mag - x;
  const std::uint32_t nearest = below < above   ? lo
                                : above < below ? hi
                                                : ((lo >> 16) & 1 ? hi : lo);
  return static_cast<std::uint16_t>(nearest >> 16);
}

std::vector<float> encode_decode(const std::vector<float>& values, row_dtype dtype) {
  const row_ptr row = logprob_row::encode(values.data(), values.size(), dtype);
  std::vector<float> out(values.size());
  row->decode(out.data());
  return out;
}

// A next-token distribution shaped like a language model's: logits with a spread of a
// few nats plus a handful of strong candidates, then log-softmax. Values span roughly
// [-30, 0], with most of the mass of the vocabulary far below zero.
std::vector<float> log_softmax_row(std::size_t vocab, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> logit(0.0, 3.0);
  std::vector<double> logits(vocab);
  for (double& l : logits)
    l = logit(rng);
  for (int i = 0; i < 5; ++i)
    logits[rng() % vocab] += 12.0;
  const double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (double l : logits)
    sum += std::exp(l - top);
  const double log_z = top + std::log(sum);
  std::vector<float> row(vocab);
  for (std::size_t i = 0; i < vocab; ++i)
    row[i] = static_cast<float>(logits[i] - log_z);
  return row;
}

struct error_figures {
  double max_abs = 0;
  double max_rel = 0;
  double min_value = 0;
};

error_figures measure(const std::vector<float>& values, row_dtype dtype) {
  const std::vector<float> back = encode_decode(values, dtype);
  error_figures e;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double err = std::fabs(static_cast<double>(back[i]) - values[i]);
    e.max_abs = std::max(e.max_abs, err);
    if (values[i] != 0)
      e.max_rel = std::max(e.max_rel, err / std::fabs(static_cast<double>(values[i])));
    e.min_value = std::min(e.min_value, static_cast<double>(values[i]));
  }
  return e;
}

TEST(row_dtype, parses_its_own_names_only) {
  for (row_dtype d : {row_dtype::float32, row_dtype::float16, row_dtype::bfloat16})
    EXPECT_EQ(parse_row_dtype(to_string(d)), d);
  EXPECT_EQ(to_string(row_dtype::bfloat16), "bfloat16");
  EXPECT_FALSE(parse_row_dtype("float64"));
  EXPECT_FALSE(parse_row_dtype("Float32"));
  EXPECT_FALSE(parse_row_dtype(""));
  EXPECT_EQ(element_bytes(row_dtype::float32), 4u);
  EXPECT_EQ(element_bytes(row_dtype::float16), 2u);
  EXPECT_EQ(element_bytes(row_dtype::bfloat16), 2u);
}

TEST(logprob_row, float32_is_exact_and_shared_without_copy) {
  const std::vector<float> values = log_softmax_row(512, 1);
  const row_ptr row =
      logprob_row::encode(values.data(), values.size(), row_dtype::float32);
  EXPECT_EQ(row->dtype(), row_dtype::float32);
  EXPECT_EQ(row->vocab(), 512u);
  EXPECT_EQ(row->bytes(), 512u * 4);
  ASSERT_NE(row->float32_data(), nullptr);
  EXPECT_EQ(static_cast<const void*>(row->float32_data()),
            static_cast<const void*>(row->raw()));
  std::vector<float> out(values.size());
  row->decode(out.data());
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(bits_of(row->float32_data()[i]), bits_of(values[i]));
    EXPECT_EQ(bits_of(out[i]), bits_of(values[i]));
    EXPECT_EQ(bits_of(row->at(i)), bits_of(values[i]));
  }
}

TEST(logprob_row, sixteen_bit_rows_halve_the_bytes_and_have_no_float32_view) {
  const std::vector<float> values = {-0.5f, -1.0f, -2.75f, 0.0f, -10.25f};
  for (row_dtype d : {row_dtype::float16, row_dtype::bfloat16}) {
    const row_ptr row = logprob_row::encode(values.data(), values.size(), d);
    EXPECT_EQ(row->bytes(), values.size() * 2);
    EXPECT_EQ(row->float32_data(), nullptr);
    // These values are representable in both formats, so they come back exactly.
    EXPECT_EQ(encode_decode(values, d), values);
    for (std::size_t i = 0; i < values.size(); ++i)
      EXPECT_EQ(row->at(i), values[i]);
  }
}

TEST(logprob_row, empty_row_is_valid) {
  const row_ptr row = logprob_row::encode(nullptr, 0, row_dtype::float16);
  EXPECT_EQ(row->vocab(), 0u);
  EXPECT_EQ(row->bytes(), 0u);
}

TEST(logprob_row, adopt_validates_size_and_keeps_the_bytes) {
  const std::vector<float> values = {-1.5f, -0.25f, -7.0f};
  for (row_dtype d : {row_dtype::float32, row_dtype::float16, row_dtype::bfloat16}) {
    const row_ptr made = logprob_row::encode(values.data(), values.size(), d);
    std::vector<std::uint8_t> bytes(made->raw(), made->raw() + made->bytes());
    const row_ptr adopted = logprob_row::adopt(d, values.size(), bytes);
    EXPECT_EQ(adopted->dtype(), d);
    EXPECT_EQ(adopted->vocab(), values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      EXPECT_EQ(adopted->at(i), made->at(i));

    bytes.pop_back();
    EXPECT_THROW(logprob_row::adopt(d, values.size(), bytes), std::invalid_argument);
    bytes.resize(made->bytes() + element_bytes(d));
    EXPECT_THROW(logprob_row::adopt(d, values.size(), bytes), std::invalid_argument);
  }
  // 4 bytes are one float32 but two 16-bit values.
  EXPECT_THROW(logprob_row::adopt(row_dtype::float32, 2, std::vector<std::uint8_t>(4)),
               std::invalid_argument);
  EXPECT_NO_THROW(
      logprob_row::adopt(row_dtype::float16, 2, std::vector<std::uint8_t>(4)));
  // A vocab whose byte count would overflow must not wrap around to a match.
  const std::size_t huge = std::numeric_limits<std::size_t>::max() / 2 + 1;
  EXPECT_THROW(logprob_row::adopt(row_dtype::float16, huge, {}), std::invalid_argument);
}

TEST(half_conversion, rounds_to_nearest_even) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa.
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
}

TEST(half_conversion, overflows_to_infinity_at_the_rounding_boundary) {
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.996f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00); // halfway; 0x7bff is odd
  EXPECT_EQ(float_to_half(1e9f), 0x7c00);
  EXPECT_EQ(float_to_half(-1e9f), 0xfc00);
}

TEST(half_conversion, handles_subnormals) {
  const float tiny = std::ldexp(1.0f, -24); // smallest half subnormal
  EXPECT_EQ(float_to_half(tiny), 0x0001);
  EXPECT_EQ(half_to_float(0x0001), tiny);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000); // tie: to even zero
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);
  EXPECT_EQ(float_to_half(3 * std::ldexp(1.0f, -25)), 0x0002); // tie between 1 and 2
  EXPECT_EQ(float_to_half(1023 * tiny), 0x03ff);               // largest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400); // smallest normal
  EXPECT_EQ(float_to_half(-tiny), 0x8001);
  EXPECT_EQ(float_to_half(1e-30f), 0x0000);
  EXPECT_EQ(float_to_half(-1e-30f), 0x8000);
}

TEST(half_conversion, every_half_survives_a_round_trip) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = half_to_float(bits);
    if (half_is_nan(bits)) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(half_is_nan(float_to_half(f))) << h;
    } else {
      EXPECT_EQ(float_to_half(f), bits) << h;
    }
  }
}

TEST(half_conversion, agrees_with_an_exact_reference) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    // Half of the samples near the half range, where the interesting cases live.
    std::uint32_t bits = any(rng);
    if (i % 2)
      bits = (bits & 0x807fffffu) | ((100u + bits % 45u) << 23);
    const float f = float_of(bits);
    if (std::isnan(f))
      continue;
    ASSERT_EQ(float_to_half(f), reference_half(f)) << std::hex << bits;
  }
}

TEST(bfloat16_conversion, rounds_to_nearest_even_and_matches_a_reference) {
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16(float_of(0x3f808000u)), 0x3f80); // tie, even stays
  EXPECT_EQ(float_to_bfloat16(float_of(0x3f818000u)), 0x3f82); // tie, odd rounds up
  EXPECT_EQ(float_to_bfloat16(float_of(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7f80);
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    const float f = float_of(any(rng));
    if (std::isnan(f))
      continue;
    ASSERT_EQ(float_to_bfloat16(f), reference_bf16(f)) << std::hex << bits_of(f);
  }
}

TEST(bfloat16_conversion, every_bfloat16_survives_a_round_trip) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = bfloat16_to_float(bits);
    if (bf16_is_nan(bits))
      EXPECT_TRUE(std::isnan(f) && bf16_is_nan(float_to_bfloat16(f))) << b;
    else
      EXPECT_EQ(float_to_bfloat16(f), bits) << b;
  }
}

TEST(logprob_row, special_values_are_preserved) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {
      -inf,
      inf,
      std::numeric_limits<float>::quiet_NaN(),
      float_of(0x7f800001u), // signalling NaN whose payload sits only in the low bits
      float_of(0xffc00000u),
      -0.0f,
      0.0f};
  for (row_dtype d : {row_dtype::float32, row_dtype::float16, row_dtype::bfloat16}) {
    const std::vector<float> back = encode_decode(values, d);
    EXPECT_EQ(back[0], -inf) << to_string(d);
    EXPECT_EQ(back[1], inf) << to_string(d);
    EXPECT_TRUE(std::isnan(back[2])) << to_string(d);
    EXPECT_TRUE(std::isnan(back[3])) << to_string(d);
    EXPECT_TRUE(std::isnan(back[4]) && std::signbit(back[4])) << to_string(d);
    EXPECT_TRUE(back[5] == 0.0f && std::signbit(back[5])) << to_string(d);
    EXPECT_TRUE(back[6] == 0.0f && !std::signbit(back[6])) << to_string(d);
  }
}

// Accuracy on log-prob values. With p explicit mantissa bits, rounding to nearest has
// relative error at most 2^-(p+1) for normal values: 2^-11 (4.9e-4) for float16 and
// 2^-8 (3.9e-3) for bfloat16. In [-32, -16] the spacing is 2^-6 (float16) and 2^-3
// (bfloat16), so on [-30, 0] the absolute error is at most 2^-7 = 0.0078 for float16
// and 2^-4 = 0.0625 for bfloat16, and it shrinks towards 0, where the probable tokens
// are. Measured on a dense sweep of [-30, 0] (printed): float16 0.0078, bfloat16
// 0.0625, relative 4.9e-4 and 3.9e-3: the bounds are reached.
TEST(logprob_row_accuracy, sweep_of_log_prob_range_stays_within_half_an_ulp) {
  std::vector<float> sweep;
  for (int i = 0; i <= 300000; ++i)
    sweep.push_back(-30.0f + 1e-4f * static_cast<float>(i));
  const error_figures half = measure(sweep, row_dtype::float16);
  const error_figures bf16 = measure(sweep, row_dtype::bfloat16);
  std::cout << "[sweep -30..0] float16 max abs " << half.max_abs << " max rel "
            << half.max_rel << "; bfloat16 max abs " << bf16.max_abs << " max rel "
            << bf16.max_rel << "\n";
  EXPECT_LE(half.max_abs, std::ldexp(1.0, -7));
  EXPECT_LE(half.max_rel, std::ldexp(1.0, -11));
  EXPECT_LE(bf16.max_abs, std::ldexp(1.0, -4));
  EXPECT_LE(bf16.max_rel, std::ldexp(1.0, -8));
}

// Realistic log-softmax rows (see log_softmax_row), 8 per vocabulary size; the bounds
// are the relative ones above applied to the row's most negative value. Measured
// (printed; docs/cache.md quotes these): vocab 512, min -26.9: float16 max abs 0.0078,
// bfloat16 0.062; vocab 50257, min -35.1: float16 0.0103, bfloat16 0.118 (the far
// tail, below -32, has twice the spacing). Relative error stays under 4.9e-4 (float16)
// and 3.9e-3 (bfloat16) throughout.
TEST(logprob_row_accuracy, log_softmax_rows_stay_within_the_stated_bounds) {
  for (std::size_t vocab : {std::size_t{512}, std::size_t{50257}}) {
    error_figures half, bf16;
    for (std::uint32_t seed = 0; seed < 8; ++seed) {
      const std::vector<float> row = log_softmax_row(vocab, seed);
      const error_figures h = measure(row, row_dtype::float16);
      const error_figures b = measure(row, row_dtype::bfloat16);
      half.max_abs = std::max(half.max_abs, h.max_abs);
      half.max_rel = std::max(half.max_rel, h.max_rel);
      half.min_value = std::min(half.min_value, h.min_value);
      bf16.max_abs = std::max(bf16.max_abs, b.max_abs);
      bf16.max_rel = std::max(bf16.max_rel, b.max_rel);
    }
    std::cout << "[log-softmax vocab " << vocab << ", 8 rows, min " << half.min_value
              << "] float16 max abs " << half.max_abs << " max rel " << half.max_rel
              << "; bfloat16 max abs " << bf16.max_abs << " max rel " << bf16.max_rel
              << "\n";
    const double largest = -half.min_value;
    EXPECT_LE(half.max_abs, std::ldexp(largest, -11));
    EXPECT_LE(half.max_rel, std::ldexp(1.0, -11));
    EXPECT_LE(bf16.max_abs, std::ldexp(largest, -8));
    EXPECT_LE(bf16.max_rel, std::ldexp(1.0, -8));
  }
}

// The probable tokens matter most: for log-probs in [-1, 0] (probability above 0.37)
// float16 stays under 2^-12 absolute and bfloat16 under 2^-9.
TEST(logprob_row_accuracy, probable_tokens_are_most_accurate) {
  std::vector<float> near_zero;
  for (int i = 0; i <= 100000; ++i)
    near_zero.push_back(-1e-5f * static_cast<float>(i));
  EXPECT_LE(measure(near_zero, row_dtype::float16).max_abs, std::ldexp(1.0, -12));
  EXPECT_LE(measure(near_zero, row_dtype::bfloat16).max_abs, std::ldexp(1.0, -9));
}

} // namespace
} // namespace canopy::cache
