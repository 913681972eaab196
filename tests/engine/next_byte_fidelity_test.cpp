// Next-byte distributions from the engine against issue 30's contract applied to the
// float64 oracle's rows, on the real models that come with their tokenizers. Every
// log-prob of a row is within the oracle's tolerance t; a log of a sum of exponentials
// moves by at most the largest move of its terms, so a log mass is within t, a
// normalized log-prob (two of them) within 2t, and a max within t.

#include "next_byte_reference.hpp"
#include "oracle.hpp"
#include "shared_fixtures.hpp"
#include "test_device.hpp"

#include <canopy/engine.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using canopy::engine;
using canopy::backends::byte_reduce;
using canopy::testing::model_fixture;
using canopy::testing::oracle_case;

class next_byte_fidelity : public ::testing::TestWithParam<model_fixture> {
protected:
  std::filesystem::path model_path;
  std::vector<oracle_case> cases;
};

TEST_P(next_byte_fidelity, distributions_match_the_contract_over_the_oracle_rows) {
  CANOPY_LOAD_ORACLE_MODEL();
  canopy::engine_config c;
  c.model = model_path.string();
  c.scheduler_threads = 2;
  c.devices = {canopy::testing::test_device()};
  engine lm{c};
  ASSERT_TRUE(lm.has_tokenizer());
  const auto& vocab = lm.byte_vocab();
  for (const auto& oc : cases) {
    const auto* row = oc.row(static_cast<std::int64_t>(oc.tokens.size()) - 1);
    // The empty prefix, then every prefix of the likeliest token's bytes.
    std::size_t best = 0;
    for (std::size_t t = 0; t < vocab.size(); ++t)
      if (vocab[t] && row[t] > row[best])
        best = t;
    std::vector<std::string> prefixes{""};
    for (std::size_t n = 1; vocab[best] && n <= vocab[best]->size(); ++n)
      prefixes.push_back(vocab[best]->substr(0, n));
    for (const auto& prefix : prefixes)
      for (const auto reduce : {byte_reduce::sum, byte_reduce::max}) {
        const auto got = lm.next_byte_logprobs(oc.tokens, prefix, reduce).get();
        const auto want =
            canopy::testing::reference(vocab, lm.eos_token_ids(), row, prefix, reduce);
        const double bound = (reduce == byte_reduce::sum ? 2 : 1) * oc.tolerance;
        canopy::testing::expect_same(got, want, bound,
                                     oc.name + " prefix of " +
                                         std::to_string(prefix.size()) + " bytes");
      }
  }
  EXPECT_EQ(lm.stats().next_byte_masses_made, cases.size());
}

INSTANTIATE_TEST_SUITE_P(
    shared_models, next_byte_fidelity,
    ::testing::Values(model_fixture{"models/stories260K/stories260K.bin",
                                    "oracle/stories260K", "stories260K_bin"},
                      model_fixture{"models/gpt2-synthetic", "oracle/gpt2-synthetic",
                                    "gpt2_synthetic"}),
    canopy::testing::oracle_model_name);

} // namespace
