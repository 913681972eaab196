// Decode passes through fixed-shape buckets (decode_graphs.hpp), against the float64
// oracle: SMC-like steps of every model, items padded to a power of two and keys to a
// bucket, on the CPU op by op ("eager") and, in the CUDA label, recorded as CUDA graphs
// and replayed ("auto"); a pass without rows for its padding, or past the largest
// bucket, runs ragged; settings the buckets cannot take are refused by name.
#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/models/torch_backend.hpp>
#include <canopy/backends/pass_profile.hpp>

#include "oracle.hpp"
#include "pass_items.hpp"
#include "shared_fixtures.hpp"
#include "test_device.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace canopy::backends;
using canopy::testing::item;
using canopy::testing::max_abs_diff;
using canopy::testing::model_fixture;
using canopy::testing::oracle_case;

/// The buckets as this device runs them: recorded on a GPU, op by op elsewhere.
std::string bucket_mode() {
  return canopy::testing::testing_on_cuda() ? "auto" : "eager";
}

bool has_part(const pass_profile& profile, const std::string& prefix) {
  return std::any_of(
      profile.parts.begin(), profile.parts.end(),
      [&](const pass_profile::part& p) { return p.name.rfind(prefix, 0) == 0; });
}

/// One token after `prefix_length` tokens whose KV is `prefix`, its one row asked for.
pass_item decode_item(token_id token, kv_handle prefix, std::uint32_t prefix_length,
                      bool keep_kv) {
  return item({token}, prefix, prefix_length, keep_kv);
}

class decode_buckets : public ::testing::TestWithParam<model_fixture> {
protected:
  std::unique_ptr<backend_i> make(const std::string& decode_graphs,
                                  std::uint64_t kv_budget = 64u << 20) {
    torch_options options;
    options.kv_budget_bytes = kv_budget;
    options.decode_graphs = decode_graphs;
    return make_torch_backend(load_checkpoint(model_path), canopy::testing::test_device(),
                              options);
  }
  std::filesystem::path model_path;
  std::vector<oracle_case> cases;
};

// Each case is three particles: one keeps its KV and carries the chain, two read the same
// prefix without keeping theirs (duplicates within a pass). Cases of different lengths
// drop out as they end, so steps take 3 x cases items, then fewer: counts that are not
// powers of two, padded; long cases cross key buckets (32 ... 512); Mistral's window
// keeps its keys at 16 however long the sequence.
TEST_P(decode_buckets, smc_steps_match_the_oracle_through_the_buckets) {
  CANOPY_LOAD_ORACLE_MODEL();
  auto backend = make(bucket_mode());
  std::vector<kv_handle> chain(cases.size());
  pass_request first; // every case's first token, one ragged pass
  for (const auto& c : cases)
    first.items.push_back(item({c.tokens[0]}));
  const auto primed = backend->run(first);
  for (std::size_t i = 0; i < cases.size(); ++i)
    chain[i] = primed.items[i].kv[0];

  pass_profile profile;
  backend->attach_profile(&profile);
  std::size_t longest = 0;
  for (const auto& c : cases)
    longest = std::max(longest, c.tokens.size());
  for (std::size_t position = 1; position < longest; ++position) {
    pass_request step;
    std::vector<std::size_t> of_case;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      if (position >= cases[i].tokens.size())
        continue;
      const auto token = cases[i].tokens[position];
      const auto at = static_cast<std::uint32_t>(position);
      for (const bool keep : {true, false, false}) {
        step.items.push_back(decode_item(token, chain[i], at, keep));
        of_case.push_back(i);
      }
    }
    const auto result = backend->run(step);
    ASSERT_EQ(result.tokens_computed, step.items.size());
    for (std::size_t k = 0; k < step.items.size(); ++k) {
      const auto& c = cases[of_case[k]];
      const auto& rows = result.items[k].logprobs;
      ASSERT_EQ(rows.size(), static_cast<std::size_t>(c.vocab));
      EXPECT_LE(max_abs_diff(rows.data(), c.row(static_cast<std::int64_t>(position)),
                             rows.size()),
                c.tolerance)
          << c.name << " position " << position << " item " << k;
      if (step.items[k].keep_kv)
        chain[of_case[k]] = result.items[k].kv[0];
    }
  }
  backend->attach_profile(nullptr);
  EXPECT_TRUE(has_part(profile, "decode step")) << "no step went through a bucket";
  EXPECT_FALSE(has_part(profile, "layout")) << "a decode step ran ragged";
  // The kept chains, no more: padding and duplicates gave their rows back.
  std::size_t kept = 0;
  for (const auto& c : cases)
    kept += c.tokens.size();
  EXPECT_EQ(backend->kv_entries(), kept);
}

INSTANTIATE_TEST_SUITE_P(shared_models, decode_buckets, canopy::testing::oracle_models(),
                         canopy::testing::oracle_model_name);

// Three items pad to a bucket of four: the fourth writes its KV to a borrowed row. With
// no row left to borrow, the pass runs ragged, and both give the oracle's row.
TEST(decode_buckets_storage, a_step_without_a_row_for_its_padding_runs_ragged) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/stories260K");
  const auto cases = canopy::testing::load_oracle_cases(oracle);
  const auto& c = cases.back(); // 37 tokens
  constexpr std::size_t prefix = 17;
  const auto per_token =
      make_torch_backend(load_checkpoint(model), canopy::testing::test_device(), {})
          ->info()
          .kv_bytes_per_token;
  for (const std::size_t spare : {3u, 4u}) {
    torch_options options;
    options.decode_graphs = bucket_mode();
    options.kv_budget_bytes = per_token * (prefix + spare);
    auto backend = make_torch_backend(load_checkpoint(model),
                                      canopy::testing::test_device(), options);
    pass_request prime;
    prime.items.push_back(
        item(canopy::cache::token_seq(c.tokens.begin(), c.tokens.begin() + prefix)));
    const auto last = backend->run(prime).items[0].kv.back();
    ASSERT_NE(last, no_kv);
    pass_profile profile;
    backend->attach_profile(&profile);
    pass_request step;
    for (int k = 0; k < 3; ++k)
      step.items.push_back(decode_item(c.tokens[prefix], last, prefix, false));
    const auto result = backend->run(step);
    for (const auto& out : result.items)
      EXPECT_LE(max_abs_diff(out.logprobs.data(), c.row(prefix), out.logprobs.size()),
                c.tolerance)
          << spare << " spare rows";
    EXPECT_EQ(has_part(profile, "decode step"), spare == 4) << spare << " spare rows";
    EXPECT_EQ(backend->kv_entries(), prefix) << "borrowed rows given back";
  }
}

// 256 items fill the largest bucket; 257 run ragged. Both give the oracle's row.
TEST(decode_buckets_storage, a_step_past_the_largest_bucket_runs_ragged) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/stories260K");
  const auto cases = canopy::testing::load_oracle_cases(oracle);
  const auto& c = cases.back();
  constexpr std::size_t prefix = 9;
  torch_options options;
  options.decode_graphs = bucket_mode();
  auto backend =
      make_torch_backend(load_checkpoint(model), canopy::testing::test_device(), options);
  pass_request prime;
  prime.items.push_back(
      item(canopy::cache::token_seq(c.tokens.begin(), c.tokens.begin() + prefix)));
  const auto last = backend->run(prime).items[0].kv.back();
  for (const std::size_t items : {256u, 257u}) {
    pass_profile profile;
    backend->attach_profile(&profile);
    pass_request step;
    for (std::size_t k = 0; k < items; ++k)
      step.items.push_back(decode_item(c.tokens[prefix], last, prefix, false));
    const auto result = backend->run(step);
    backend->attach_profile(nullptr);
    double worst = 0;
    for (const auto& out : result.items)
      worst = std::max(
          worst, max_abs_diff(out.logprobs.data(), c.row(prefix), out.logprobs.size()));
    EXPECT_LE(worst, c.tolerance) << items << " items";
    EXPECT_EQ(has_part(profile, "decode step"), items == 256) << items << " items";
  }
}

TEST(decode_buckets_settings, unknown_settings_and_residual_kv_are_refused_by_name) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  const auto ckpt = load_checkpoint(model);
  auto refusal = [&](const torch_options& options) {
    try {
      make_torch_backend(ckpt, "cpu", options);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  torch_options unknown;
  unknown.decode_graphs = "sometimes";
  EXPECT_NE(refusal(unknown).find("unknown decode_graphs 'sometimes'"),
            std::string::npos);
  torch_options residual;
  residual.decode_graphs = "eager";
  residual.kv_residual_tokens = 8;
  EXPECT_NE(refusal(residual).find("kv_residual_tokens"), std::string::npos);
}

} // namespace
