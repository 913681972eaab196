#pragma once
// Issue 30's next-byte contract followed literally, for tests: a loop over every token in
// long double, no byte order, no tree; and comparisons of two distributions.
// Thread contract: pure functions.

#include <canopy/backends/tokenizers/next_byte.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace canopy::testing {

using backends::byte_reduce;
using backends::next_byte_distribution;

inline constexpr double no_mass = -std::numeric_limits<double>::infinity();

/// The contract, token by token.
inline next_byte_distribution reference(const std::vector<std::optional<std::string>>& v,
                                        const std::vector<std::int32_t>& eos,
                                        const float* row, const std::string& b,
                                        byte_reduce reduce) {
  const bool summing = reduce == byte_reduce::sum;
  std::vector<long double> child(256, summing ? 0.0L : -INFINITY);
  long double exact = summing ? 0.0L : -INFINITY, under = exact, eos_value = exact;
  auto add = [&](long double& to, float lp) {
    to = summing ? to + std::exp(static_cast<long double>(lp))
                 : std::max(to, static_cast<long double>(lp));
  };
  for (std::size_t t = 0; t < v.size(); ++t) {
    const bool is_eos = std::find(eos.begin(), eos.end(), std::int32_t(t)) != eos.end();
    if (is_eos)
      add(eos_value, row[t]);
    if (is_eos || !v[t] || v[t]->empty() || v[t]->compare(0, b.size(), b) != 0)
      continue;
    add(under, row[t]);
    if (v[t]->size() == b.size())
      add(exact, row[t]);
    else
      add(child[static_cast<unsigned char>((*v[t])[b.size()])], row[t]);
  }
  next_byte_distribution out;
  const bool empty = b.empty();
  if (summing) {
    const long double z = under + (empty ? eos_value : 0.0L);
    auto lg = [&](long double m) {
      return m > 0 && z > 0 ? double(std::log(m) - std::log(z)) : no_mass;
    };
    out.log_mass = z > 0 ? double(std::log(z)) : no_mass;
    for (int x = 0; x < 256; ++x)
      out.logprobs[x] = lg(child[x]);
    out.end_of_token = empty ? no_mass : lg(exact);
    if (empty)
      out.eos = lg(eos_value);
  } else {
    for (int x = 0; x < 256; ++x)
      out.logprobs[x] = double(child[x]);
    out.end_of_token = empty ? no_mass : double(exact);
    if (empty)
      out.eos = double(eos_value);
    out.log_mass = double(std::max(under, empty ? eos_value : -INFINITY));
  }
  return out;
}

/// Within `tolerance` in log space (a relative error of the mass), or both none.
inline void expect_near_log(double got, double want, double tolerance,
                            const std::string& what) {
  if (std::isinf(want) || std::isinf(got))
    EXPECT_EQ(got, want) << what;
  else
    EXPECT_NEAR(got, want, tolerance) << what;
}

inline void expect_same(const next_byte_distribution& got,
                        const next_byte_distribution& want, double tolerance,
                        const std::string& what) {
  for (int x = 0; x < 256; ++x)
    expect_near_log(got.logprobs[x], want.logprobs[x], tolerance,
                    what + " byte " + std::to_string(x));
  expect_near_log(got.end_of_token, want.end_of_token, tolerance, what + " end_of_token");
  ASSERT_EQ(got.eos.has_value(), want.eos.has_value()) << what;
  if (want.eos)
    expect_near_log(*got.eos, *want.eos, tolerance, what + " eos");
  expect_near_log(got.log_mass, want.log_mass, tolerance, what + " log_mass");
}

} // namespace canopy::testing
