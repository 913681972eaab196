// Next-byte distributions (issue 30's contract) against a reference that follows the
// contract's words literally: a loop over every token in long double, no byte order, no
// tree. A hand-made vocabulary pins the edge cases; random rows over the shared
// tokenizers (512 to 152k tokens) check the rest.

#include <canopy/backends/tokenizers/next_byte.hpp>
#include <canopy/backends/tokenizers/tokenizer.hpp>
#include <canopy/cache/logprob_row.hpp>

#include "next_byte_reference.hpp"
#include "shared_fixtures.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace canopy::backends;
using canopy::testing::expect_same;
using canopy::testing::reference;
using vocab = std::vector<std::optional<std::string>>;
constexpr double none = -std::numeric_limits<double>::infinity();

/// A normalized random row with a few dominant tokens and a long tail down to e^-60.
std::vector<float> random_row(std::size_t size, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-60.0, 0.0);
  std::vector<double> raw(size);
  for (auto& x : raw)
    x = u(rng);
  for (int i = 0; i < 5; ++i)
    raw[rng() % size] = 5.0;
  double z = 0;
  for (const auto x : raw)
    z += std::exp(x);
  std::vector<float> row(size);
  for (std::size_t i = 0; i < size; ++i)
    row[i] = static_cast<float>(raw[i] - std::log(z));
  return row;
}

std::shared_ptr<const byte_order> order_of(const vocab& v,
                                           std::vector<std::int32_t> eos) {
  return std::make_shared<const byte_order>(v, std::move(eos));
}

byte_masses
masses_of(std::shared_ptr<const byte_order> order, const std::vector<float>& row,
          canopy::cache::row_dtype dtype = canopy::cache::row_dtype::float32) {
  return byte_masses(std::move(order),
                     canopy::cache::logprob_row::encode(row.data(), row.size(), dtype));
}

// Tokens 0 and 1: control and EOS; "a" twice (shared byte strings count each); bytes
// above 0x7f; "b" alone.
const vocab small{
    std::nullopt,      std::string("</s>"), std::string("a"),        std::string("a"),
    std::string("ab"), std::string("ac"),   std::string("\xff\x80"), std::string("b"),
    std::string()};

TEST(next_byte, sums_follow_the_contract_on_a_small_vocabulary) {
  const auto order = order_of(small, {1});
  std::vector<float> row = {std::log(0.05f), std::log(0.1f),  std::log(0.2f),
                            std::log(0.1f),  std::log(0.15f), std::log(0.05f),
                            std::log(0.25f), std::log(0.05f), std::log(0.05f)};
  const auto masses = masses_of(order, row);
  const auto root = masses.next_byte("", byte_reduce::sum);
  // Z = every token with bytes, plus EOS: 0.9 (the control token and the empty one out).
  EXPECT_NEAR(root.log_mass, std::log(0.9), 1e-6);
  EXPECT_NEAR(root.logprobs['a'], std::log(0.5 / 0.9), 1e-6);
  EXPECT_NEAR(root.logprobs['b'], std::log(0.05 / 0.9), 1e-6);
  EXPECT_NEAR(root.logprobs[0xff], std::log(0.25 / 0.9), 1e-6);
  EXPECT_EQ(root.logprobs['c'], none);
  EXPECT_EQ(root.end_of_token, none);
  ASSERT_TRUE(root.eos);
  EXPECT_NEAR(*root.eos, std::log(0.1 / 0.9), 1e-6);

  const auto a = masses.next_byte("a", byte_reduce::sum);
  EXPECT_NEAR(a.log_mass, std::log(0.5), 1e-6);
  EXPECT_NEAR(a.end_of_token, std::log(0.3 / 0.5), 1e-6); // both tokens spelled "a"
  EXPECT_NEAR(a.logprobs['b'], std::log(0.15 / 0.5), 1e-6);
  EXPECT_NEAR(a.logprobs['c'], std::log(0.05 / 0.5), 1e-6);
  EXPECT_FALSE(a.eos);

  const auto nothing = masses.next_byte("z", byte_reduce::sum);
  EXPECT_EQ(nothing.log_mass, none);
  EXPECT_EQ(nothing.end_of_token, none);
  for (const auto lp : nothing.logprobs)
    EXPECT_EQ(lp, none);
}

TEST(next_byte, maxima_are_the_best_token_under_each_byte) {
  const std::vector<float> row = {-1, -2, -3, -0.5f, -4, -5, -6, -7, -0.1f};
  const auto masses = masses_of(order_of(small, {1}), row);
  const auto root = masses.next_byte("", byte_reduce::max);
  EXPECT_EQ(root.logprobs['a'], -0.5);
  EXPECT_EQ(root.logprobs[0xff], -6.0);
  ASSERT_TRUE(root.eos);
  EXPECT_EQ(*root.eos, -2.0);
  EXPECT_EQ(root.log_mass, -0.5); // neither the control token nor the empty one counts
  const auto a = masses.next_byte("a", byte_reduce::max);
  EXPECT_EQ(a.end_of_token, -0.5);
  EXPECT_EQ(a.logprobs['b'], -4.0);
  EXPECT_EQ(a.log_mass, -0.5);
}

TEST(next_byte, eos_ids_are_a_set_inside_the_vocabulary_and_a_row_must_fit_it) {
  EXPECT_THROW(byte_order(small, {9}), std::invalid_argument);
  EXPECT_EQ(byte_order(small, {1, 1}).eos_ids(), std::vector<std::int32_t>{1});
  const std::vector<float> row(3, 0.0f);
  EXPECT_THROW(masses_of(order_of(small, {1}), row), std::invalid_argument);
}

TEST(next_byte, half_precision_rows_are_read_as_their_decoded_values) {
  std::vector<float> row = {-1, -2, -3.1f, -0.51f, -4, -5, -6, -7, -0.1f};
  const auto order = order_of(small, {1});
  const auto half = masses_of(order, row, canopy::cache::row_dtype::float16);
  // The reference gets the values the row holds: float16 roundings of the originals.
  for (auto& x : row)
    x = canopy::cache::half_to_float(canopy::cache::float_to_half(x));
  for (const auto reduce : {byte_reduce::sum, byte_reduce::max}) {
    const auto got = half.next_byte("a", reduce);
    const auto want = masses_of(order, row).next_byte("a", reduce);
    EXPECT_EQ(got.logprobs['b'], want.logprobs['b']);
    EXPECT_EQ(got.end_of_token, want.end_of_token);
  }
}

TEST(next_byte, masses_take_a_fraction_of_their_rows_memory) {
  vocab v;
  for (int i = 0; i < 100000; ++i)
    v.push_back(std::to_string(i));
  const std::vector<float> row(v.size(), -11.5f);
  const auto masses = masses_of(order_of(v, {}), row);
  // Two trees of 8- and 4-byte entries over one leaf per block_tokens tokens.
  const double per_token = double(masses.bytes()) / double(v.size());
  EXPECT_LE(per_token, 2 * 12.0 / byte_masses::block_tokens + 0.01);
  EXPECT_LT(masses.bytes(), row.size() * sizeof(float) / 2);
}

class next_byte_on_shared : public ::testing::TestWithParam<const char*> {};

TEST_P(next_byte_on_shared, random_rows_match_the_reference_at_every_kind_of_prefix) {
  CANOPY_SHARED_PATH_OR_SKIP(path, GetParam());
  const auto tok = load_tokenizer(path);
  const auto& v = tok->byte_vocab();
  // EOS: the first control token (the usual case) and the last token, which has bytes
  // (an EOS id counts only as EOS).
  std::vector<std::int32_t> eos;
  for (std::size_t t = 0; t < v.size() && eos.empty(); ++t)
    if (!v[t] || v[t]->empty())
      eos.push_back(static_cast<std::int32_t>(t));
  eos.push_back(static_cast<std::int32_t>(v.size() - 1));
  const auto order = order_of(v, eos);
  std::mt19937_64 rng(7);
  for (int r = 0; r < 2; ++r) {
    const auto row = random_row(v.size(), rng);
    const auto masses = masses_of(order, row);
    // The empty prefix, then prefixes of random tokens (every length of each), and one
    // byte string no token starts with.
    std::vector<std::string> prefixes{""};
    for (int k = 0; k < 6; ++k) {
      const auto& bytes = v[rng() % v.size()];
      if (bytes)
        for (std::size_t n = 1; n <= bytes->size(); ++n)
          prefixes.push_back(bytes->substr(0, n));
    }
    prefixes.push_back(std::string("\xff\xfe\xfd", 3));
    for (const auto& b : prefixes)
      for (const auto reduce : {byte_reduce::sum, byte_reduce::max}) {
        const auto got = masses.next_byte(b, reduce);
        // Float64 sums of at most 152k positive terms: relative error far below 1e-9.
        expect_same(got, reference(v, eos, row.data(), b, reduce), 1e-9,
                    std::string(GetParam()) + " prefix of " + std::to_string(b.size()) +
                        (reduce == byte_reduce::sum ? " bytes, sum" : " bytes, max"));
        if (reduce == byte_reduce::sum && !std::isinf(got.log_mass)) {
          double total = std::exp(got.end_of_token) + std::exp(got.eos.value_or(none));
          for (const auto lp : got.logprobs)
            total += std::exp(lp);
          EXPECT_NEAR(total, 1.0, 1e-12) << "prefix of " << b.size() << " bytes";
        }
      }
  }
}

INSTANTIATE_TEST_SUITE_P(vocabularies, next_byte_on_shared,
                         ::testing::Values("models/stories260K/tok512.bin",
                                           "models/gpt2-synthetic",
                                           "models/tokenizers/llama3/tokenizer.json",
                                           "models/tokenizers/qwen3/tokenizer.json"),
                         [](const auto& info) {
                           return std::string(
                               std::array<const char*, 4>{"stories260K", "gpt2_synthetic",
                                                          "llama3", "qwen3"}[info.index]);
                         });

} // namespace
