// An HF directory's config.json: the defaults HF's classes take for absent keys, and
// every malformed or contradictory key giving a checkpoint_error that names the file and
// the key.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/checkpoint_writer.hpp>
#include <canopy/backends/checkpoints/hf_config.hpp>

#include "checkpoint_test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>

namespace {

using namespace canopy::backends;
using canopy::testing::config_json;
using canopy::testing::expect_same_config;
using canopy::testing::scratch_dir;
using canopy::testing::small_checkpoint;
using canopy::testing::write_dir;
using json = nlohmann::json;

// --- config.json ----------------------------------------------------------------------

TEST(hf_checkpoint, missing_config_is_an_error) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  write_hf_checkpoint(original, dir.path());
  std::filesystem::remove(dir / "config.json");
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir.path()),
                          {dir.path().string(), "config.json"});
}

TEST(hf_checkpoint, config_problems_name_the_file_and_key) {
  const checkpoint llama = small_checkpoint(architecture::llama);
  const checkpoint gpt2 = small_checkpoint(architecture::gpt2);
  struct edit_case {
    const checkpoint* base;
    std::function<void(json&)> edit;
    std::vector<std::string> expected;
  };
  const std::vector<edit_case> cases{
      {&llama,
       [](json& c) { c["architectures"] = {"Gemma2ForCausalLM"}; },
       {"Gemma2ForCausalLM", "not supported", "Qwen3ForCausalLM"}},
      {&llama, [](json& c) { c["model_type"] = "gpt2"; }, {"model_type", "contradicts"}},
      {&llama,
       [](json& c) {
         c["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
       },
       {"rope_scaling", "'dynamic'", "sequence's length"}},
      {&llama,
       [](json& c) {
         c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
       },
       {"rope_scaling", "'yarn'", "linear, llama3"}},
      {&llama,
       [](json& c) {
         c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
       },
       {"rope_scaling", "low_freq_factor", "missing"}},
      {&llama,
       [](json& c) {
         c["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", 8.0},
                              {"low_freq_factor", 4.0},
                              {"high_freq_factor", 1.0},
                              {"original_max_position_embeddings", 64}};
       },
       {"high > low"}},
      {&llama, [](json& c) { c["rope_scaling"] = 2; }, {"rope_scaling", "not an object"}},
      {&llama,
       [](json& c) { c["attn_logit_softcapping"] = 50.0; },
       {"attn_logit_softcapping", "50"}},
      {&llama,
       [](json& c) { c["partial_rotary_factor"] = 0.5; },
       {"partial_rotary_factor", "0.5"}},
      {&llama,
       [](json& c) {
         c["architectures"] = {"Qwen2ForCausalLM"};
         c["model_type"] = "qwen2";
         c["use_sliding_window"] = true;
       },
       {"use_sliding_window", "true"}},
      {&llama,
       [](json& c) {
         c["layer_types"] = {"full_attention", "sliding_attention"};
       },
       {"layer_types", "sliding_attention"}},
      {&llama,
       [](json& c) {
         c["architectures"] = {"MistralForCausalLM"};
         c["model_type"] = "mistral";
         c["sliding_window"] = -3;
       },
       {"sliding_window -3"}},
      {&llama, [](json& c) { c.erase("hidden_size"); }, {"hidden_size", "missing"}},
      {&llama,
       [](json& c) { c["hidden_size"] = "16"; },
       {"hidden_size", "not an integer"}},
      {&llama, [](json& c) { c["num_key_value_heads"] = 3; }, {"num_kv_heads 3"}},
      {&llama, [](json& c) { c["hidden_act"] = "gelu"; }, {"hidden_act", "gelu"}},
      {&llama, [](json& c) { c["attention_bias"] = true; }, {"attention_bias"}},
      {&llama, [](json& c) { c["head_dim"] = 5; }, {"head_dim 5", "odd"}},
      {&llama, [](json& c) { c["vocab_size"] = -40; }, {"vocab_size -40"}},
      {&llama, [](json& c) { c["eos_token_id"] = 40; }, {"eos_token_id 40"}},
      {&llama, [](json& c) { c["rms_norm_eps"] = 0; }, {"eps"}},
      {&gpt2,
       [](json& c) { c["activation_function"] = "gelu"; },
       {"activation_function", "'gelu'", "gelu_new"}},
      {&gpt2, [](json& c) { c["n_head"] = 3; }, {"\"n_embd\" 16", "n_head 3"}},
      {&gpt2,
       [](json& c) { c["scale_attn_by_inverse_layer_idx"] = true; },
       {"scale_attn_by_inverse_layer_idx"}},
      {&gpt2,
       [](json& c) {
         c.erase("architectures");
         c.erase("model_type");
       },
       {"model_type", "missing"}},
  };
  for (const edit_case& test : cases) {
    scratch_dir dir;
    json config = config_json(*test.base);
    test.edit(config);
    write_dir(dir.path(), config, test.base->tensors);
    std::vector<std::string> expected = test.expected;
    expected.push_back((dir / "config.json").string());
    try {
      load_checkpoint(dir.path());
      ADD_FAILURE() << "no error for config " << config.dump();
    } catch (const checkpoint_error& e) {
      for (const std::string& part : expected)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
            << "message lacks \"" << part << "\": " << e.what();
    }
  }
}

TEST(hf_checkpoint, config_defaults_follow_hf) {
  // Llama: kv heads = heads, head_dim = hidden / heads, theta 1e4, untied, eps 1e-6.
  const model_config llama = parse_hf_config(
      R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 32, "intermediate_size": 64,
          "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
          "max_position_embeddings": 64, "eos_token_id": [7, 9]})",
      "c.json");
  EXPECT_EQ(llama.num_kv_heads, 4);
  EXPECT_EQ(llama.head_dim, 8);
  EXPECT_EQ(llama.rope_theta, 10000.0);
  EXPECT_EQ(llama.norm_eps, 1e-6);
  EXPECT_FALSE(llama.tied_embeddings);
  EXPECT_EQ(llama.rope, rope_pairs::rotate_half);
  EXPECT_EQ(llama.bos_token_id, -1);
  EXPECT_EQ(llama.eos_token_id, 7);
  EXPECT_EQ(llama.sliding_window, 0);
  EXPECT_FALSE(llama.qkv_bias || llama.qk_norm);
  EXPECT_EQ(llama.scaling.type, rope_scaling::kind::none);
  // Mistral: MistralConfig's sliding_window is 4096 when absent; null means none.
  const std::string mistral_keys =
      R"("architectures": ["MistralForCausalLM"], "hidden_size": 32, "intermediate_size": 64,
       "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
       "max_position_embeddings": 64)";
  EXPECT_EQ(parse_hf_config("{" + mistral_keys + "}", "c.json").sliding_window, 4096);
  EXPECT_EQ(parse_hf_config("{" + mistral_keys + R"(, "sliding_window": null})", "c.json")
                .sliding_window,
            0);
  // Qwen2 always has q/k/v biases (its use_sliding_window false leaves the window
  // unused); Qwen3 has q/k norms and head_dim 128 unless told.
  const model_config qwen2 = parse_hf_config(
      R"({"model_type": "qwen2", "hidden_size": 32, "intermediate_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
        "max_position_embeddings": 64, "use_sliding_window": false,
        "sliding_window": 32})",
      "c.json");
  EXPECT_EQ(qwen2.arch, architecture::qwen2);
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.qk_norm);
  EXPECT_EQ(qwen2.sliding_window, 0);
  const model_config qwen3 = parse_hf_config(
      R"({"model_type": "qwen3", "hidden_size": 32, "intermediate_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
        "max_position_embeddings": 64, "rope_scaling": {"type": "linear", "factor": 2}})",
      "c.json");
  EXPECT_EQ(qwen3.head_dim, 128);
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_FALSE(qwen3.qkv_bias);
  EXPECT_EQ(qwen3.scaling.type, rope_scaling::kind::linear);
  EXPECT_EQ(qwen3.scaling.factor, 2.0);
  // GPT-2: n_inner null = 4 * n_embd, tied, eps 1e-5, gelu_new.
  const model_config gpt2 = parse_hf_config(
      R"({"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 4, "n_inner": null,
          "vocab_size": 100, "n_positions": 64})",
      "c.json");
  EXPECT_EQ(gpt2.arch, architecture::gpt2);
  EXPECT_EQ(gpt2.intermediate_size, 128);
  EXPECT_EQ(gpt2.head_dim, 8);
  EXPECT_EQ(gpt2.num_kv_heads, 4);
  EXPECT_EQ(gpt2.norm_eps, 1e-5);
  EXPECT_TRUE(gpt2.tied_embeddings);
}

TEST(hf_checkpoint,
     the_config_of_every_architecture_and_feature_is_written_and_read_back) {
  model_config base;
  base.hidden_size = 64;
  base.intermediate_size = 192;
  base.num_layers = 2;
  base.num_heads = 4;
  base.num_kv_heads = 2;
  base.head_dim = 32;
  base.vocab_size = 512;
  base.context_length = 1024;
  base.norm_eps = 1e-6;
  base.rope_theta = 5e5;
  base.tied_embeddings = false;
  base.bos_token_id = 1;
  base.eos_token_id = 2;
  auto llama3 = base;
  llama3.scaling = {rope_scaling::kind::llama3, 8.0, 1.0, 4.0, 64, {}};
  auto linear = base;
  linear.arch = architecture::qwen3;
  linear.qk_norm = true;
  linear.scaling = {rope_scaling::kind::linear, 2.0, 1.0, 4.0, 0, {}};
  auto qwen2 = base;
  qwen2.arch = architecture::qwen2;
  qwen2.qkv_bias = true;
  auto mistral = base;
  mistral.arch = architecture::mistral;
  mistral.sliding_window = 16;
  auto unwindowed = mistral;
  unwindowed.sliding_window = 0;
  for (const auto& config : {llama3, linear, qwen2, mistral, unwindowed}) {
    SCOPED_TRACE(to_string(config.arch));
    const auto text = hf_config_json(config, weight_dtype::f32);
    expect_same_config(parse_hf_config(text, "c.json"), config);
  }
}

TEST(hf_checkpoint, config_that_is_not_json_is_named) {
  EXPECT_CHECKPOINT_ERROR(parse_hf_config("{nope", "x/config.json"),
                          {"x/config.json", "not valid JSON"});
  EXPECT_CHECKPOINT_ERROR(parse_hf_config("[]", "x/config.json"),
                          {"x/config.json", "not a JSON object"});
}

} // namespace
