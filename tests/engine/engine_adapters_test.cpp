// LoRA adapters through the embedding API: add_adapter, remove_adapter, adapters(),
// query_options::adapter and the `adapters` setting. On the mock, whose rows under an
// adapter are those of mock_adapted over the directory's two files, the calls and
// their refusals; on a real model (the Llama 3 synthetic checkpoint), every oracle case
// under an adapter agrees with the same model with the adapter merged, computed alone
// and after the engine reused the adapter's KV of its prefix, while the base model
// answers as the oracle does beside it.

#include "lora_test_adapter.hpp"
#include "mock_adapter.hpp"
#include "oracle.hpp"
#include "shared_fixtures.hpp"

#include <canopy/backends/models/torch_backend.hpp>
#include <canopy/engine.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using canopy::engine;
using canopy::engine_config;
using canopy::errc;
using canopy::query_options;
using canopy::token_seq;
using canopy::testing::mock_adapted_row;
using canopy::testing::scratch_dir;
using canopy::testing::write_mock_adapter;

engine_config mock_config() {
  engine_config c;
  c.backend = "mock";
  c.vocab_size = 64;
  c.scheduler_threads = 2;
  return c;
}

std::vector<float> values(const at::Tensor& row) {
  const auto c = row.contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

query_options under(std::string adapter) {
  query_options o;
  o.adapter = std::move(adapter);
  return o;
}

template <class Call> canopy::error refusal(Call&& call) {
  try {
    call();
  } catch (const canopy::error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return canopy::error(errc::none, "");
}

TEST(engine_adapters, are_added_queried_listed_and_removed_with_errors_that_say_why) {
  scratch_dir a, b;
  write_mock_adapter(a, "weights of a");
  write_mock_adapter(b, "weights of b");
  const auto config = mock_config();
  engine lm{config};
  EXPECT_TRUE(lm.adapters().empty());
  lm.add_adapter("a", a.path().string());
  lm.add_adapter("b", b.path().string());
  EXPECT_EQ(lm.adapters(), (std::vector<std::string>{"a", "b"}));
  const token_seq tokens{1, 2, 3};
  EXPECT_EQ(values(lm.next_token_logprobs_sync(tokens, under("a"))),
            mock_adapted_row(config, a, tokens));
  EXPECT_EQ(values(lm.next_token_logprobs_sync(tokens, under("b"))),
            mock_adapted_row(config, b, tokens));

  auto taken = refusal([&] { lm.add_adapter("a", b.path().string()); });
  EXPECT_EQ(taken.code(), errc::invalid_request);
  EXPECT_NE(std::string(taken.what()).find("'a' is loaded already"), std::string::npos);
  EXPECT_EQ(refusal([&] { lm.add_adapter("", a.path().string()); }).code(),
            errc::invalid_request);
  EXPECT_EQ(refusal([&] { lm.add_adapter("bell\a", a.path().string()); }).code(),
            errc::invalid_request);
  scratch_dir empty;
  auto not_one = refusal([&] { lm.add_adapter("c", empty.path().string()); });
  EXPECT_EQ(not_one.code(), errc::invalid_request);
  EXPECT_NE(std::string(not_one.what()).find("no adapter_config.json"), std::string::npos)
      << not_one.what();

  lm.remove_adapter("a");
  EXPECT_EQ(lm.adapters(), (std::vector<std::string>{"b"}));
  auto gone = refusal([&] { lm.next_token_logprobs_sync(tokens, under("a")); });
  EXPECT_EQ(gone.code(), errc::unknown_adapter);
  EXPECT_NE(std::string(gone.what()).find("(loaded: b)"), std::string::npos)
      << gone.what();
  EXPECT_EQ(refusal([&] { lm.remove_adapter("a"); }).code(), errc::unknown_adapter);
  // Loaded again from other files: their rows, not the old cache's.
  lm.add_adapter("a", b.path().string());
  EXPECT_EQ(values(lm.next_token_logprobs_sync(tokens, under("a"))),
            mock_adapted_row(config, b, tokens));
}

TEST(engine_adapters, load_at_start_from_the_adapters_setting_within_their_budget) {
  scratch_dir a;
  write_mock_adapter(a, "weights of a");
  auto config = mock_config();
  config.adapters = {"tuned=" + a.path().string()};
  engine lm{config};
  EXPECT_EQ(lm.adapters(), (std::vector<std::string>{"tuned"}));
  EXPECT_EQ(values(lm.next_token_logprobs_sync({4, 5}, under("tuned"))),
            mock_adapted_row(config, a, {4, 5}));

  auto bad = mock_config();
  bad.adapters = {"no-path"};
  EXPECT_EQ(refusal([&] { engine{bad}; }).code(), errc::invalid_config);
  bad.adapters = {"x=" + a.path().string(), "x=" + a.path().string()};
  EXPECT_EQ(refusal([&] { engine{bad}; }).code(), errc::invalid_config);
  // Refused once the engine's actors run: the constructor throws and leaves none behind
  // (else the actor system's destructor would wait for them for ever).
  bad.adapters = {"x=/no/such/adapter"};
  const auto at_start = refusal([&] { engine{bad}; });
  EXPECT_EQ(at_start.code(), errc::invalid_request);
  EXPECT_NE(std::string(at_start.what()).find("adapter 'x'"), std::string::npos)
      << at_start.what();

  auto small = mock_config();
  small.adapter_budget_bytes = 8; // less than the directory's two files
  engine tight{small};
  auto over = refusal([&] { tight.add_adapter("a", a.path().string()); });
  EXPECT_EQ(over.code(), errc::invalid_request);
  EXPECT_NE(std::string(over.what()).find("its budget allows"), std::string::npos)
      << over.what();
  EXPECT_TRUE(tight.adapters().empty());
}

TEST(engine_adapters, rows_under_an_adapter_match_the_merged_model_with_kv_reuse) {
  std::filesystem::path model_path;
  std::vector<canopy::testing::oracle_case> cases;
  CANOPY_LOAD_ORACLE_MODEL_OF(canopy::testing::oracle_model_list().at(3));
  ASSERT_EQ(model_path.filename(), "llama3-synthetic");
  const auto base = canopy::backends::load_checkpoint(model_path);
  scratch_dir dir;
  const auto merged_checkpoint = canopy::testing::write_lora_adapter(base, dir.path());
  canopy::backends::torch_options options;
  options.kv_budget_bytes = 16u << 20;
  auto merged = canopy::backends::make_torch_backend(merged_checkpoint, "cpu", options);

  engine_config config;
  config.backend = "torch";
  config.model = model_path.string();
  config.kv_budget_bytes = 16u << 20;
  config.scheduler_threads = 2;
  engine lm{config};
  lm.add_adapter("merged-twin", dir.path().string());
  for (const auto& c : cases) {
    canopy::backends::pass_request request;
    canopy::backends::pass_item item;
    item.tokens = c.tokens;
    item.rows = {static_cast<std::uint32_t>(c.tokens.size() - 1)};
    item.keep_kv = false;
    request.items.push_back(item);
    const auto want = merged->run(request).items.at(0).logprobs;
    // The prefix first (its KV stays under the adapter), then the whole sequence on it.
    if (c.tokens.size() > 1)
      lm.next_token_logprobs_sync(token_seq(c.tokens.begin(), c.tokens.end() - 1),
                                  under("merged-twin"));
    const auto got = values(lm.next_token_logprobs_sync(c.tokens, under("merged-twin")));
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(canopy::testing::max_abs_diff(got.data(), want.data(), got.size()),
              c.tolerance)
        << c.name;
    const auto plain = values(lm.next_token_logprobs_sync(c.tokens));
    const auto* oracle_row = c.logprobs.data() + (c.tokens.size() - 1) * c.vocab;
    EXPECT_LE(canopy::testing::max_abs_diff(plain.data(), oracle_row, plain.size()),
              c.tolerance)
        << c.name << ": the base model beside its adapter";
  }
  EXPECT_GT(lm.stats().tokens_requested, lm.stats().tokens_computed)
      << "the adapter's KV of each prefix was reused";
}

} // namespace
