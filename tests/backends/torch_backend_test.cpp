// The LibTorch backend against the independent float64 oracle, driven directly (no
// engine): every row of every case, through a single pass, a ragged batch, KV reuse
// from a cached prefix and token-by-token extension, each under both forwards of a
// float32 Llama on the CPU (the direct one and ATen's); and the KV storage rules.
#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/models/torch_backend.hpp>

#include "oracle.hpp"
#include "pass_items.hpp"
#include "shared_fixtures.hpp"
#include "test_device.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using namespace canopy::backends;
using canopy::cache::token_seq;
using canopy::testing::load_oracle_cases;
using canopy::testing::max_abs_diff;
using canopy::testing::oracle_case;

using canopy::testing::item;
using canopy::testing::model_fixture;

token_seq slice(const token_seq& s, std::size_t from, std::size_t to) {
  return token_seq(s.begin() + static_cast<std::ptrdiff_t>(from),
                   s.begin() + static_cast<std::ptrdiff_t>(to));
}

/// max |got - oracle| over rows [from, from + rows of `out`) of the case.
double error(const item_output& out, const oracle_case& c, std::size_t from) {
  const auto n = out.logprobs.size();
  EXPECT_EQ(n % static_cast<std::size_t>(c.vocab), 0u);
  return max_abs_diff(out.logprobs.data(), c.row(static_cast<std::int64_t>(from)), n);
}

/// A model, and whether float32 Llama passes take the direct forward (GPT-2 takes
/// ATen's either way).
using fidelity_param = std::tuple<model_fixture, bool>;

class torch_backend_fidelity : public ::testing::TestWithParam<fidelity_param> {
protected:
  std::unique_ptr<backend_i> make(std::uint64_t kv_budget = 64u << 20) {
    torch_options options;
    options.kv_budget_bytes = kv_budget;
    options.direct_forward = std::get<1>(GetParam());
    return make_torch_backend(load_checkpoint(model_path), canopy::testing::test_device(),
                              options);
  }
  std::filesystem::path model_path;
  std::vector<oracle_case> cases;
};

TEST_P(torch_backend_fidelity, every_row_of_every_case_in_one_pass_matches_the_oracle) {
  CANOPY_LOAD_ORACLE_MODEL_OF(std::get<0>(GetParam()));
  auto backend = make();
  for (const auto& c : cases) {
    ASSERT_EQ(backend->info().vocab_size, c.vocab) << c.name;
    pass_request request;
    request.items.push_back(item(c.tokens, no_kv, 0, false));
    const auto result = backend->run(request);
    EXPECT_EQ(result.tokens_computed, c.tokens.size());
    EXPECT_TRUE(result.items[0].kv.empty()) << "keep_kv=false keeps nothing";
    EXPECT_LE(error(result.items[0], c, 0), c.tolerance) << c.name;
  }
  EXPECT_EQ(backend->kv_entries(), 0u);
}

TEST_P(torch_backend_fidelity, a_ragged_batch_matches_each_item_alone) {
  CANOPY_LOAD_ORACLE_MODEL_OF(std::get<0>(GetParam()));
  auto backend = make();
  // Prime the KV of a 3-token prefix of every case, then one pass of mixed items:
  // whole cases without a prefix, and continuations of different lengths.
  std::vector<std::vector<kv_handle>> primed;
  pass_request prime;
  for (const auto& c : cases)
    prime.items.push_back(item(slice(c.tokens, 0, 3)));
  for (const auto& out : backend->run(prime).items)
    primed.push_back(out.kv);
  pass_request batch;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& t = cases[i].tokens;
    batch.items.push_back(item(t));
    batch.items.push_back(item(slice(t, 3, t.size()), primed[i][2], 3));
    batch.items.push_back(item(slice(t, 3, 4), primed[i][2], 3, false));
  }
  const auto result = backend->run(batch);
  std::uint64_t expected_tokens = 0;
  for (const auto& it : batch.items)
    expected_tokens += it.tokens.size();
  EXPECT_EQ(result.tokens_computed, expected_tokens);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    EXPECT_LE(error(result.items[3 * i], c, 0), c.tolerance) << c.name << " whole";
    EXPECT_LE(error(result.items[3 * i + 1], c, 3), c.tolerance)
        << c.name << " continued";
    EXPECT_LE(error(result.items[3 * i + 2], c, 3), c.tolerance)
        << c.name << " one token";
  }
}

TEST_P(torch_backend_fidelity, extending_token_by_token_reuses_kv_and_matches) {
  CANOPY_LOAD_ORACLE_MODEL_OF(std::get<0>(GetParam()));
  auto backend = make();
  const auto& c = cases.back(); // the longest
  kv_handle last = no_kv;
  for (std::size_t i = 0; i < c.tokens.size(); ++i) {
    pass_request request;
    request.items.push_back(item({c.tokens[i]}, last, static_cast<std::uint32_t>(i)));
    const auto result = backend->run(request);
    ASSERT_EQ(result.tokens_computed, 1u);
    ASSERT_EQ(result.items[0].kv.size(), 1u);
    last = result.items[0].kv[0];
    ASSERT_NE(last, no_kv);
    EXPECT_LE(error(result.items[0], c, i), c.tolerance) << c.name << " position " << i;
  }
  EXPECT_EQ(backend->kv_entries(), c.tokens.size());
}

// Mistral's window (16): a token's KV is read only by the 15 tokens after it, so the
// worker may free it then. Served past the model's 512 positions (max_context_length),
// long_300 four times over: with no absolute position in the model (RoPE is relative)
// and a reach of 2 x 15 tokens through its 2 layers, the row after position i + 300k
// is the row after i for every i >= 30, so the oracle checks all 1,200 rows.
TEST(torch_backend_window, past_the_models_context_with_kv_older_than_the_window_freed) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/mistral-swa-synthetic");
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/mistral-swa-synthetic");
  const auto cases = load_oracle_cases(oracle);
  const auto& c = cases.back(); // long_300
  ASSERT_EQ(c.tokens.size(), 300u);
  constexpr std::size_t window = 16, repeats = 4, reach = 2 * (window - 1);
  token_seq tokens;
  for (std::size_t r = 0; r < repeats; ++r)
    tokens.insert(tokens.end(), c.tokens.begin(), c.tokens.end());
  torch_options options;
  options.kv_budget_bytes = 64u << 20;
  options.max_context_length = tokens.size();
  auto backend = make_torch_backend(load_checkpoint(model), "cpu", options);
  EXPECT_EQ(backend->info().context_length, 1200);
  std::vector<kv_handle> handles; // of every position, oldest first
  std::size_t released = 0;       // handles[0..released) are freed
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    pass_request request;
    request.items.push_back(item({tokens[i]}, handles.empty() ? no_kv : handles.back(),
                                 static_cast<std::uint32_t>(i)));
    const auto result = backend->run(request);
    ASSERT_EQ(result.items[0].kv.size(), 1u);
    handles.push_back(result.items[0].kv[0]);
    if (i < c.tokens.size() || i % c.tokens.size() >= reach) {
      EXPECT_LE(error(result.items[0], c, i % c.tokens.size()), c.tolerance)
          << "position " << i;
    }
    // Keep the newest window - 1 tokens' KV: all the next pass may read.
    while (handles.size() - released > window - 1)
      backend->release_kv({handles[released++]});
    EXPECT_EQ(backend->kv_entries(), std::min(handles.size(), window - 1));
  }
}

TEST(torch_backend_window, only_a_sliding_window_model_may_serve_past_its_context) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  torch_options options;
  options.max_context_length = 1024;
  try {
    make_torch_backend(load_checkpoint(model), "cpu", options);
    ADD_FAILURE() << "a model without a window served past its 512 positions";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(
        std::string(e.what()).find("max_context_length 1024 exceeds the model's context "
                                   "of 512"),
        std::string::npos)
        << e.what();
  }
  options.max_context_length = 8; // lowering is always allowed
  auto backend = make_torch_backend(load_checkpoint(model), "cpu", options);
  EXPECT_EQ(backend->info().context_length, 8);
  pass_request request;
  request.items.push_back(item(token_seq(9, 5)));
  EXPECT_THROW(backend->run(request), std::invalid_argument);
}

/// This process's resident memory, in bytes (VmRSS).
std::size_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stoull(line.substr(6)) * 1024;
  return 0;
}

// RoPE tables were built for every position the config declares, in float64: 2^31
// positions took 22.9 GB at load. They grow with the positions passes reach, block by
// block, so a position's values do not depend on the declared context.
TEST(torch_backend_rope,
     a_context_of_2_to_the_30_costs_nothing_at_load_and_changes_no_row) {
  CANOPY_SHARED_PATH_OR_SKIP(path, "models/stories260K/stories260K.bin");
  const auto ckpt = load_checkpoint(path);
  auto huge = ckpt;
  huge.config.context_length = std::int64_t{1} << 30;
  const auto before = resident_bytes();
  auto wide = make_torch_backend(huge, "cpu", torch_options{});
  EXPECT_LT(resident_bytes(), before + (64u << 20)) << "from " << before << " bytes";
  EXPECT_EQ(wide->info().context_length, std::int64_t{1} << 30);
  auto narrow = make_torch_backend(ckpt, "cpu", torch_options{});
  const token_seq tokens = {1, 403, 407, 261, 378, 8, 9, 10};
  pass_request request;
  request.items.push_back(item(tokens));
  const auto a = wide->run(request), b = narrow->run(request);
  ASSERT_EQ(a.items.size(), 1u);
  EXPECT_EQ(a.items[0].logprobs, b.items[0].logprobs)
      << "the same positions, the same tables, whatever the declared context";
}

TEST(torch_backend_load, a_nan_weight_is_refused_naming_its_tensor) {
  CANOPY_SHARED_PATH_OR_SKIP(path, "models/stories260K/stories260K.bin");
  auto ckpt = load_checkpoint(path);
  auto& norm = ckpt.tensors.at("model.norm.weight");
  ASSERT_EQ(norm.dtype, weight_dtype::f32);
  auto poisoned =
      std::make_shared<std::vector<float>>(static_cast<std::size_t>(numel(norm)));
  std::memcpy(poisoned->data(), norm.data, byte_size(norm));
  (*poisoned)[3] = std::numeric_limits<float>::quiet_NaN();
  norm.data = reinterpret_cast<const std::byte*>(poisoned->data());
  try {
    make_torch_backend(ckpt, "cpu", torch_options{});
    ADD_FAILURE() << "a NaN weight loaded";
  } catch (const checkpoint_error& e) {
    EXPECT_NE(
        std::string(e.what()).find("'model.norm.weight' holds NaN or infinite values"),
        std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(shared_models, torch_backend_fidelity,
                         ::testing::Combine(canopy::testing::oracle_models(),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<fidelity_param>& info) {
                           return std::string(std::get<0>(info.param).name) +
                                  (std::get<1>(info.param) ? "_direct" : "_aten");
                         });

class torch_backend_kv : public ::testing::Test {
protected:
  void SetUp() override {
    CANOPY_SHARED_PATH_OR_SKIP(path, "models/stories260K/stories260K.bin");
    ckpt = load_checkpoint(path);
  }
  std::unique_ptr<backend_i> make(std::uint64_t kv_budget) {
    torch_options options;
    options.kv_budget_bytes = kv_budget;
    return make_torch_backend(ckpt, canopy::testing::test_device(), options);
  }
  checkpoint ckpt;
};

TEST_F(torch_backend_kv, storage_is_the_budget_and_the_cache_keeps_seven_eighths) {
  auto backend =
      make(16 * 1280); // stories260K float32: 5 layers x 2 x 4 heads x 8 = 1280 B
  EXPECT_EQ(backend->info().kv_bytes_per_token, 1280u);
  EXPECT_EQ(backend->info().kv_keep_bytes, 14u * 1280u);
  EXPECT_THROW(make(1279), std::invalid_argument);
}

TEST_F(torch_backend_kv,
       a_full_storage_keeps_a_prefix_of_the_new_tokens_and_answers_anyway) {
  auto backend = make(4 * 1280);
  pass_request request;
  request.items.push_back(item({1, 403, 407, 261, 378, 432}));
  const auto out = backend->run(request).items[0];
  // With no room to lend, the pass packs its keys and takes ATen's forward; a roomy
  // storage takes the direct one. Each is within the oracle's 1e-4 of float64.
  const auto roomy = make(64 * 1280)->run(request).items[0];
  ASSERT_EQ(out.logprobs.size(), roomy.logprobs.size());
  EXPECT_LE(max_abs_diff(out.logprobs.data(), roomy.logprobs.data(), out.logprobs.size()),
            2e-4);
  ASSERT_EQ(out.kv.size(), 6u);
  for (std::size_t j = 0; j < 6; ++j)
    EXPECT_EQ(out.kv[j] != no_kv, j < 4) << j;
  EXPECT_EQ(backend->kv_entries(), 4u);
  backend->release_kv({out.kv[3]});
  EXPECT_EQ(backend->kv_entries(), 3u);
}

TEST_F(torch_backend_kv, released_or_mismatched_handles_fail_the_pass_and_keep_nothing) {
  auto backend = make(64 * 1280);
  pass_request first;
  first.items.push_back(item({1, 403, 407}));
  const auto kv = backend->run(first).items[0].kv;
  pass_request wrong_length;
  wrong_length.items.push_back(item({261}, kv[2], 2));
  EXPECT_THROW(backend->run(wrong_length), std::invalid_argument);
  backend->release_kv({kv[2]});
  pass_request stale;
  stale.items.push_back(item({261}, kv[2], 3));
  stale.items.push_back(item({1, 2}));
  EXPECT_THROW(backend->run(stale), std::invalid_argument);
  EXPECT_EQ(backend->kv_entries(), 2u) << "a failed pass gives its new slots back";
  // The slot is reused by a new token; the old handle still refers to nothing.
  pass_request refill;
  refill.items.push_back(item({1}));
  backend->run(refill);
  EXPECT_THROW(backend->run(stale), std::invalid_argument);
}

TEST_F(torch_backend_kv,
       an_attached_profile_names_each_part_of_every_pass_until_detached) {
  for (bool direct : {true, false}) {
    torch_options options;
    options.kv_budget_bytes = 64 * 1280;
    options.direct_forward = direct;
    auto backend = make_torch_backend(ckpt, "cpu", options);
    pass_profile profile;
    backend->attach_profile(&profile);
    pass_request request;
    request.items.push_back(item({1, 403, 407}));
    backend->run(request);
    backend->run(request);
    backend->attach_profile(nullptr);
    backend->run(request);
    EXPECT_EQ(profile.passes, 2u);
    std::vector<std::string> names;
    for (const auto& part : profile.parts)
      names.push_back(part.name);
    const std::vector<std::string> direct_parts = {"check items, take KV slots",
                                                   "layout",
                                                   "embed",
                                                   "layer 0: norm, qkv projection",
                                                   "layer 0: RoPE, KV write",
                                                   "layer 0: attention",
                                                   "layer 0: output projection",
                                                   "layer 0: norm, MLP"};
    const std::vector<std::string> aten_parts = {"check items, take KV slots", "layout",
                                                 "ATen forward", "rows to host",
                                                 "row copy"};
    const auto& expected = direct ? direct_parts : aten_parts;
    ASSERT_GE(names.size(), expected.size());
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), names.begin()))
        << (direct ? "direct" : "aten") << ": " << names[2];
    if (direct) {
      EXPECT_EQ(names.size(), 3u + 5u * 5u + 4u)
          << "5 layers of 5 parts, head, softmax, rows to host, copy";
      EXPECT_EQ(names.back(), "row copy");
    }
  }
}

TEST_F(torch_backend_kv, passes_started_together_answer_as_passes_run_one_by_one) {
  // A worker starts the pass behind one before it finishes that one: each keeps its own
  // rows (the direct forward's buffer serves its next pass, so a CPU pass is answered by
  // the time start returns), its own KV, and its own inputs (on a GPU, two decode steps
  // replay one bucket's graph, the second staged before the first's upload has run).
  struct setup {
    const char* name;
    bool direct;
    const char* decode_graphs;
  };
  for (const auto& [name, direct, decode_graphs] :
       {setup{"direct", true, "auto"}, setup{"aten", false, "auto"},
        setup{"buckets", false, "eager"}}) {
    torch_options options;
    options.kv_budget_bytes = 64 * 1280;
    options.direct_forward = direct;
    options.decode_graphs = decode_graphs;
    auto one_by_one = make_torch_backend(ckpt, canopy::testing::test_device(), options);
    auto together = make_torch_backend(ckpt, canopy::testing::test_device(), options);
    // Each side's answers to `requests`: one by one, and all started before any finishes.
    auto both = [&](const std::vector<pass_request>& alone_requests,
                    const std::vector<pass_request>& together_requests)
        -> std::pair<std::vector<item_output>, std::vector<item_output>> {
      std::vector<item_output> alone, started_together;
      for (const auto& r : alone_requests)
        alone.push_back(one_by_one->run(r).items[0]);
      std::vector<std::unique_ptr<started_pass>> started;
      for (const auto& r : together_requests)
        started.push_back(together->start(r));
      for (auto& pass : started)
        started_together.push_back(pass->finish().items[0]);
      for (std::size_t i = 0; i < alone.size(); ++i) {
        const auto& got = started_together[i].logprobs;
        EXPECT_EQ(std::count(started_together[i].kv.begin(), started_together[i].kv.end(),
                             no_kv),
                  0);
        EXPECT_EQ(got.size(), alone[i].logprobs.size());
        if (got.size() != alone[i].logprobs.size())
          continue;
        // The same kernels on the same inputs: equal but for a device's reordering.
        EXPECT_LE(max_abs_diff(got.data(), alone[i].logprobs.data(), got.size()), 1e-5)
            << name << ", pass " << i;
      }
      return std::pair{alone, started_together};
    };
    const std::vector<pass_request> prompts{{{item({1, 403, 407})}},
                                            {{item({1, 261, 378, 432})}}};
    const auto [alone, started] = both(prompts, prompts);
    EXPECT_EQ(together->kv_entries(), 7u) << name;
    // Decode steps continuing each, started together: each reads its own prompt's KV.
    both({{{item({261}, alone[0].kv.back(), 3)}}, {{item({50}, alone[1].kv.back(), 4)}}},
         {{{item({261}, started[0].kv.back(), 3)}},
          {{item({50}, started[1].kv.back(), 4)}}});
  }
}

TEST_F(torch_backend_kv, bad_items_are_refused_with_a_message_naming_the_problem) {
  auto backend = make(64 * 1280);
  auto message_of = [&](pass_item it) {
    pass_request request;
    request.items.push_back(std::move(it));
    try {
      backend->run(request);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message_of(item({1, 512})).find("token id 512"), std::string::npos);
  EXPECT_NE(message_of(item({-1})).find("token id -1"), std::string::npos);
  EXPECT_NE(message_of(item(token_seq(513, 1))).find("exceeds the context of 512"),
            std::string::npos);
  EXPECT_NE(message_of(item({})).find("no new tokens"), std::string::npos);
}

TEST_F(torch_backend_kv, devices_and_dtypes_are_checked) {
  torch_options options;
  EXPECT_THROW(make_torch_backend(ckpt, "tpu", options), std::invalid_argument);
  options.dtype = "float64";
  EXPECT_THROW(make_torch_backend(ckpt, "cpu", options), std::invalid_argument);
  options.dtype = "float16";
  try {
    make_torch_backend(ckpt, "cpu", options);
    ADD_FAILURE() << "float16 accepted on the CPU";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("needs a CUDA device"), std::string::npos)
        << e.what();
  }
  if (cuda_device_count() == 0) {
    options.dtype = "float32";
    try {
      make_torch_backend(ckpt, "cuda:0", options);
      ADD_FAILURE() << "cuda:0 accepted without CUDA";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA"), std::string::npos) << e.what();
    }
  }
}

} // namespace
