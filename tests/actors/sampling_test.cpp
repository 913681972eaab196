// Drawing tokens: the nucleus (top_p) and the stops of a sampling run.

#include <canopy/sampling.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace {

using canopy::sample_token;
using canopy::sampling_run;
using canopy::sampling_stream;

// Probabilities 0.5, 0.25, 0.125, 0.0625, 0.0625 (ids 3, 0, 4, 1, 2).
const std::vector<float> row = {std::log(0.25f), std::log(0.0625f), std::log(0.0625f),
                                std::log(0.5f), std::log(0.125f)};

std::map<std::int32_t, int> draws(double top_p, int n = 4000) {
  auto stream = sampling_stream(7, 0);
  std::map<std::int32_t, int> count;
  for (int i = 0; i < n; ++i)
    ++count[sample_token(row.data(), row.size(), 1.0, stream, top_p)];
  return count;
}

TEST(sampling, top_p_draws_only_from_the_smallest_set_that_reaches_it) {
  // 0.5 + 0.25 = 0.75 reaches 0.7: ids 3 and 0 only, in proportion 2:1.
  const auto kept = draws(0.7);
  ASSERT_EQ(kept.size(), 2u);
  ASSERT_TRUE(kept.count(3) && kept.count(0));
  EXPECT_NEAR(double(kept.at(3)) / 4000, 2.0 / 3, 0.03);
  // Exactly reaching a boundary keeps no more: 0.5 alone reaches 0.5.
  EXPECT_EQ(draws(0.5).size(), 1u);
  // A tiny top_p still keeps the most likely token.
  EXPECT_EQ(draws(1e-9), (std::map<std::int32_t, int>{{3, 4000}}));
  // top_p 1 draws from every token, as without it.
  EXPECT_EQ(draws(1.0).size(), row.size());
}

TEST(sampling, top_p_one_draws_the_same_tokens_as_no_top_p) {
  auto a = sampling_stream(3, 1), b = sampling_stream(3, 1);
  for (int i = 0; i < 200; ++i)
    EXPECT_EQ(sample_token(row.data(), row.size(), 0.8, a),
              sample_token(row.data(), row.size(), 0.8, b, 1.0));
}

TEST(sampling, a_run_ends_a_prompt_at_eos_at_stop_or_at_max_tokens) {
  sampling_run run({{1}, {2}, {3}}, 4, {3}, 0.0, 0); // argmax is id 3, an EOS id
  std::vector<float> no_eos = row;
  no_eos[3] = std::log(0.01f);            // argmax 0
  run.advance(0, row.data(), row.size()); // draws the EOS id
  run.advance(1, no_eos.data(), no_eos.size());
  run.stop(1); // a stop string, say
  EXPECT_TRUE(run.stopped(0));
  EXPECT_TRUE(run.stopped(1));
  EXPECT_FALSE(run.stopped(2));
  ASSERT_EQ(run.next_queries().size(), 1u);
  for (int i = 0; i < 4; ++i)
    run.advance(2, no_eos.data(), no_eos.size());
  EXPECT_FALSE(run.stopped(2)) << "max_tokens is not a stop";
  EXPECT_TRUE(run.finished());
  EXPECT_EQ(run.generated()[0], (canopy::cache::token_seq{3}));
  EXPECT_EQ(run.generated()[2].size(), 4u);
}

} // namespace
