// HF checkpoint directories: round trips through write_hf_checkpoint (single file,
// hand-written shards, F16/BF16), GPT-2 name normalization, and every malformed
// directory giving a checkpoint_error that names the file and the tensor or key.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/checkpoint_schema.hpp>
#include <canopy/backends/checkpoints/checkpoint_writer.hpp>
#include <canopy/backends/checkpoints/hf_config.hpp>

#include "checkpoint_test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>

namespace {

using namespace canopy::backends;
using canopy::testing::read_bytes;
using canopy::testing::scratch_dir;
using canopy::testing::small_checkpoint;
using canopy::testing::view_bytes;
using canopy::testing::write_bytes;
using json = nlohmann::json;

void expect_same_config(const model_config& a, const model_config& b) {
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.context_length, b.context_length);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope, b.rope);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
  EXPECT_EQ(a.scaling.type, b.scaling.type);
  EXPECT_EQ(a.scaling.factor, b.scaling.factor);
  EXPECT_EQ(a.scaling.low_freq_factor, b.scaling.low_freq_factor);
  EXPECT_EQ(a.scaling.high_freq_factor, b.scaling.high_freq_factor);
  EXPECT_EQ(a.scaling.original_context, b.scaling.original_context);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_id, b.eos_token_id);
}

void expect_same_tensors(const checkpoint& a, const checkpoint& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, view] : a.tensors) {
    auto it = b.tensors.find(name);
    ASSERT_NE(it, b.tensors.end()) << name;
    EXPECT_EQ(view.dtype, it->second.dtype) << name;
    EXPECT_EQ(view.shape, it->second.shape) << name;
    EXPECT_EQ(view_bytes(view), view_bytes(it->second)) << name;
  }
}

/// Writes config.json from `config` (edited by the test) and model.safetensors from
/// `tensors` (edited by the test) into `dir`.
void write_dir(const std::filesystem::path& dir, const json& config,
               const std::map<std::string, tensor_view>& tensors) {
  write_bytes(dir / "config.json", config.dump());
  write_safetensors_file(dir / "model.safetensors", tensors);
}

json config_json(const checkpoint& ckpt) {
  return json::parse(hf_config_json(ckpt.config, weight_dtype::f32));
}

// --- round trips ----------------------------------------------------------------------

class hf_round_trip : public ::testing::TestWithParam<architecture> {};

TEST_P(hf_round_trip, synthetic_writes_and_loads_back_identically) {
  const checkpoint original = small_checkpoint(GetParam());
  scratch_dir dir;
  write_hf_checkpoint(original, dir.path());
  const checkpoint loaded = load_checkpoint(dir.path());
  EXPECT_EQ(loaded.source, dir.path().string());
  expect_same_config(loaded.config, original.config);
  expect_same_tensors(loaded, original);
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors.tmp"));
}

TEST_P(hf_round_trip, untied_checkpoint_keeps_lm_head) {
  checkpoint original = small_checkpoint(GetParam());
  original.config.tied_embeddings = false;
  const std::string embedding = GetParam() == architecture::llama
                                    ? "model.embed_tokens.weight"
                                    : "transformer.wte.weight";
  original.tensors["lm_head.weight"] = original.tensors.at(embedding);
  scratch_dir dir;
  write_hf_checkpoint(original, dir.path());
  const checkpoint loaded = load_checkpoint(dir.path());
  EXPECT_FALSE(loaded.config.tied_embeddings);
  ASSERT_EQ(loaded.tensors.count("lm_head.weight"), 1u);
  expect_same_tensors(loaded, original);
}

TEST_P(hf_round_trip, half_precision_dtypes_are_kept_as_stored) {
  // Reinterpret the float32 buffers' first halves as F16 / BF16 values: any bit
  // pattern is fine for a byte-exact round trip.
  checkpoint original = small_checkpoint(GetParam());
  bool bf16 = false;
  for (auto& [name, view] : original.tensors) {
    view.dtype = bf16 ? weight_dtype::bf16 : weight_dtype::f16;
    bf16 = !bf16;
  }
  scratch_dir dir;
  write_hf_checkpoint(original, dir.path());
  const checkpoint loaded = load_checkpoint(dir.path());
  expect_same_tensors(loaded, original);
  const std::string embedding = GetParam() == architecture::llama
                                    ? "model.embed_tokens.weight"
                                    : "transformer.wte.weight";
  EXPECT_EQ(json::parse(read_bytes(dir / "config.json")).at("torch_dtype"),
            original.tensors.at(embedding).dtype == weight_dtype::f16 ? "float16"
                                                                      : "bfloat16");
}

TEST_P(hf_round_trip, sharded_index_loads_the_same) {
  const checkpoint original = small_checkpoint(GetParam());
  scratch_dir dir;
  write_bytes(dir / "config.json", hf_config_json(original.config, weight_dtype::f32));
  std::map<std::string, tensor_view> first, second;
  json weight_map = json::object();
  bool odd = false;
  for (const auto& [name, view] : original.tensors) {
    (odd ? second : first).emplace(name, view);
    weight_map[name] =
        odd ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
    odd = !odd;
  }
  write_safetensors_file(dir / "model-00001-of-00002.safetensors", first);
  write_safetensors_file(dir / "model-00002-of-00002.safetensors", second);
  write_bytes(dir / "model.safetensors.index.json",
              json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());
  const checkpoint loaded = load_checkpoint(dir.path());
  expect_same_config(loaded.config, original.config);
  expect_same_tensors(loaded, original);
}

INSTANTIATE_TEST_SUITE_P(architectures, hf_round_trip,
                         ::testing::Values(architecture::llama, architecture::gpt2),
                         [](const auto& info) { return to_string(info.param); });

TEST(hf_checkpoint, writer_permutes_interleaved_query_and_key_rows) {
  checkpoint original = small_checkpoint(architecture::llama);
  original.config.rope = rope_pairs::interleaved;
  scratch_dir dir;
  write_hf_checkpoint(original, dir.path());
  const checkpoint loaded = load_checkpoint(dir.path());
  EXPECT_EQ(loaded.config.rope, rope_pairs::rotate_half);
  const std::int64_t hd = original.config.head_dim, D = original.config.hidden_size;
  const std::size_t row = static_cast<std::size_t>(D) * 4;
  for (const char* proj : {"q_proj", "k_proj"}) {
    const std::string name = std::string("model.layers.1.self_attn.") + proj + ".weight";
    const std::string before = view_bytes(original.tensors.at(name));
    const std::string after = view_bytes(loaded.tensors.at(name));
    const std::int64_t rows = original.tensors.at(name).shape[0];
    for (std::int64_t h = 0; h < rows / hd; ++h)
      for (std::int64_t c = 0; c < 2; ++c)
        for (std::int64_t j = 0; j < hd / 2; ++j)
          EXPECT_EQ(
              after.substr(static_cast<std::size_t>(h * hd + c * hd / 2 + j) * row, row),
              before.substr(static_cast<std::size_t>(h * hd + 2 * j + c) * row, row))
              << name << " head " << h << " c " << c << " j " << j;
    EXPECT_NE(after, before) << name;
  }
  EXPECT_EQ(view_bytes(loaded.tensors.at("model.layers.1.self_attn.v_proj.weight")),
            view_bytes(original.tensors.at("model.layers.1.self_attn.v_proj.weight")));
}

// --- GPT-2 name normalization ---------------------------------------------------------

TEST(hf_checkpoint, gpt2_names_without_prefix_and_mask_buffers_are_normalized) {
  const checkpoint original = small_checkpoint(architecture::gpt2);
  scratch_dir dir;
  std::map<std::string, tensor_view> tensors;
  const std::string prefix = "transformer.";
  for (const auto& [name, view] : original.tensors)
    tensors.emplace(name.substr(prefix.size()), view);
  // The causal-mask buffers older transformers versions saved: [1,1,C,C] and a scalar.
  const std::int64_t C = original.config.context_length;
  std::vector<float> mask(static_cast<std::size_t>(C * C), 1.0f);
  const float masked_bias = -1e4f;
  for (int layer = 0; layer < 2; ++layer) {
    tensors["h." + std::to_string(layer) + ".attn.bias"] = {
        weight_dtype::f32, {1, 1, C, C}, reinterpret_cast<const std::byte*>(mask.data())};
    tensors["h." + std::to_string(layer) + ".attn.masked_bias"] = {
        weight_dtype::f32, {}, reinterpret_cast<const std::byte*>(&masked_bias)};
  }
  // A tied file that also carries lm_head.weight of the embedding's shape.
  tensors["lm_head.weight"] = original.tensors.at("transformer.wte.weight");
  write_dir(dir.path(), config_json(original), tensors);
  const checkpoint loaded = load_checkpoint(dir.path());
  expect_same_tensors(loaded, original);
}

TEST(hf_checkpoint, gpt2_name_given_with_and_without_prefix_is_an_error) {
  const checkpoint original = small_checkpoint(architecture::gpt2);
  scratch_dir dir;
  auto tensors = original.tensors;
  tensors["ln_f.bias"] = tensors.at("transformer.ln_f.bias");
  write_dir(dir.path(), config_json(original), tensors);
  EXPECT_CHECKPOINT_ERROR(
      load_checkpoint(dir.path()),
      {(dir / "model.safetensors").string(), "'ln_f.bias'", "'transformer.ln_f.bias'"});
}

TEST(hf_checkpoint, other_attention_bias_names_are_not_dropped) {
  // Only h.N.attn.bias / masked_bias are buffers; anything else unknown is an error.
  const checkpoint original = small_checkpoint(architecture::gpt2);
  scratch_dir dir;
  auto tensors = original.tensors;
  tensors["transformer.h.0.attn.extra_bias"] = tensors.at("transformer.ln_f.bias");
  write_dir(dir.path(), config_json(original), tensors);
  EXPECT_CHECKPOINT_ERROR(
      load_checkpoint(dir.path()),
      {"model.safetensors", "'transformer.h.0.attn.extra_bias'", "unexpected"});
}

TEST(hf_checkpoint, llama_rotary_frequency_buffers_are_dropped) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  auto tensors = original.tensors;
  const float inv_freq[2] = {1.0f, 0.01f};
  for (int layer = 0; layer < 2; ++layer)
    tensors["model.layers." + std::to_string(layer) + ".self_attn.rotary_emb.inv_freq"] =
        {weight_dtype::f32, {2}, reinterpret_cast<const std::byte*>(inv_freq)};
  write_dir(dir.path(), config_json(original), tensors);
  const checkpoint loaded = load_checkpoint(dir.path());
  expect_same_tensors(loaded, original);
}

// --- schema: the weights against the config -------------------------------------------

TEST(checkpoint_schema, tensor_without_data_is_named) {
  checkpoint broken = small_checkpoint(architecture::gpt2);
  broken.tensors.at("transformer.h.0.ln_2.bias").data = nullptr;
  EXPECT_CHECKPOINT_ERROR(check_checkpoint(broken),
                          {broken.source, "'transformer.h.0.ln_2.bias'", "no data"});
}

TEST(checkpoint_schema, expected_tensors_are_the_documented_sets) {
  const checkpoint llama = small_checkpoint(architecture::llama);
  const auto specs = expected_tensors(llama.config);
  ASSERT_EQ(specs.size(), 1u + 2u * 9u + 1u);
  EXPECT_EQ(specs.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(specs[1].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(specs[1].shape, (std::vector<std::int64_t>{16, 16}));
  EXPECT_EQ(specs[2].shape, (std::vector<std::int64_t>{8, 16})); // k_proj: 2 kv heads * 4
  EXPECT_EQ(specs.back().name, "model.norm.weight");
  model_config untied = llama.config;
  untied.tied_embeddings = false;
  EXPECT_EQ(expected_tensors(untied).back().name, "lm_head.weight");
  const checkpoint gpt2 = small_checkpoint(architecture::gpt2);
  const auto gpt2_specs = expected_tensors(gpt2.config);
  ASSERT_EQ(gpt2_specs.size(), 2u + 2u * 12u + 2u);
  EXPECT_EQ(gpt2_specs[1].name, "transformer.wpe.weight");
  EXPECT_EQ(gpt2_specs[1].shape, (std::vector<std::int64_t>{12, 16}));
  EXPECT_EQ(gpt2_specs[4].name, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(gpt2_specs[4].shape, (std::vector<std::int64_t>{16, 48}));
}

TEST(hf_checkpoint, missing_tensor_is_named) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  auto tensors = original.tensors;
  tensors.erase("model.norm.weight");
  write_dir(dir.path(), config_json(original), tensors);
  EXPECT_CHECKPOINT_ERROR(
      load_checkpoint(dir.path()),
      {(dir / "model.safetensors").string(), "missing", "'model.norm.weight'"});
}

TEST(hf_checkpoint, unexpected_tensor_is_named) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  auto tensors = original.tensors;
  tensors["model.layers.0.self_attn.q_proj.bias"] = tensors.at("model.norm.weight");
  write_dir(dir.path(), config_json(original), tensors);
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir.path()),
                          {(dir / "model.safetensors").string(), "unexpected",
                           "'model.layers.0.self_attn.q_proj.bias'"});
}

TEST(hf_checkpoint, shape_mismatch_is_named) {
  const checkpoint original = small_checkpoint(architecture::gpt2);
  scratch_dir dir;
  auto tensors = original.tensors;
  tensors["transformer.h.1.mlp.c_fc.weight"].shape = {24, 16}; // [out,in]: transposed
  write_dir(dir.path(), config_json(original), tensors);
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir.path()),
                          {(dir / "model.safetensors").string(),
                           "'transformer.h.1.mlp.c_fc.weight'", "[24, 16]", "[16, 24]"});
}

TEST(hf_checkpoint, config_vocab_contradicting_the_embedding_is_named) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  json config = config_json(original);
  config["vocab_size"] = 41;
  write_dir(dir.path(), config, original.tensors);
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir.path()),
                          {(dir / "model.safetensors").string(),
                           "'model.embed_tokens.weight'", "[40, 16]", "[41, 16]",
                           "vocab 41"});
}

TEST(hf_checkpoint, config_with_fewer_layers_than_the_file_names_the_extra_layer) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  json config = config_json(original);
  config["num_hidden_layers"] = 1;
  write_dir(dir.path(), config, original.tensors);
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir.path()), {"model.safetensors", "unexpected",
                                                        "'model.layers.1.", "layers 1"});
}

TEST(hf_checkpoint, untied_config_without_lm_head_is_missing_it) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  json config = config_json(original);
  config["tie_word_embeddings"] = false;
  write_dir(dir.path(), config, original.tensors);
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir.path()),
                          {"model.safetensors", "missing", "'lm_head.weight'"});
}

TEST(hf_checkpoint, tied_lm_head_of_the_wrong_shape_is_an_error) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  auto tensors = original.tensors;
  tensors["lm_head.weight"] = tensors.at("model.layers.0.mlp.gate_proj.weight");
  write_dir(dir.path(), config_json(original), tensors);
  EXPECT_CHECKPOINT_ERROR(
      load_checkpoint(dir.path()),
      {(dir / "model.safetensors").string(), "'lm_head.weight'", "ties it"});
}

TEST(hf_checkpoint, unsupported_dtype_in_the_file_is_named) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  write_hf_checkpoint(original, dir.path());
  std::string bytes = read_bytes(dir / "model.safetensors");
  const std::size_t at = bytes.find("\"F32\"");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 5, "\"I32\"");
  write_bytes(dir / "model.safetensors", bytes);
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir.path()),
                          {(dir / "model.safetensors").string(), "I32", "tensor '"});
}

TEST(hf_checkpoint, truncated_weights_file_is_named) {
  const checkpoint original = small_checkpoint(architecture::gpt2);
  scratch_dir dir;
  write_hf_checkpoint(original, dir.path());
  std::string bytes = read_bytes(dir / "model.safetensors");
  bytes.resize(bytes.size() - 3);
  write_bytes(dir / "model.safetensors", bytes);
  // The last tensor in name order is the one cut short.
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir.path()),
                          {(dir / "model.safetensors").string(),
                           "'" + original.tensors.rbegin()->first + "'", "past the end"});
}

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
  llama3.scaling = {rope_scaling::kind::llama3, 8.0, 1.0, 4.0, 64};
  auto linear = base;
  linear.arch = architecture::qwen3;
  linear.qk_norm = true;
  linear.scaling = {rope_scaling::kind::linear, 2.0, 1.0, 4.0, 0};
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

// --- weights files and shards ---------------------------------------------------------

TEST(hf_checkpoint, directory_without_weights_is_an_error) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  write_hf_checkpoint(original, dir.path());
  std::filesystem::remove(dir / "model.safetensors");
  write_bytes(dir / "pytorch_model.bin", "PK");
  EXPECT_CHECKPOINT_ERROR(
      load_checkpoint(dir.path()),
      {dir.path().string(), "model.safetensors", "pytorch_model.bin"});
}

/// A two-shard directory; `edit` may change the weight map before it is written.
void write_sharded(const scratch_dir& dir, const checkpoint& original,
                   const std::function<void(json&)>& edit) {
  write_bytes(dir / "config.json", hf_config_json(original.config, weight_dtype::f32));
  std::map<std::string, tensor_view> first, second;
  json weight_map = json::object();
  for (const auto& [name, view] : original.tensors) {
    const bool in_first = name.find("layers.1.") == std::string::npos;
    (in_first ? first : second).emplace(name, view);
    weight_map[name] = in_first ? "a.safetensors" : "b.safetensors";
  }
  write_safetensors_file(dir / "a.safetensors", first);
  write_safetensors_file(dir / "b.safetensors", second);
  edit(weight_map);
  write_bytes(dir / "model.safetensors.index.json",
              json{{"weight_map", weight_map}}.dump());
}

TEST(hf_checkpoint, shard_missing_from_disk_is_named) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  write_sharded(dir, original, [](json&) {});
  std::filesystem::remove(dir / "b.safetensors");
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir.path()),
                          {(dir / "model.safetensors.index.json").string(),
                           "'b.safetensors'", "missing", "model.layers.1."});
}

TEST(hf_checkpoint, index_listing_a_tensor_the_shard_lacks_is_named) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  write_sharded(dir, original, [](json& map) {
    map["model.layers.0.mlp.up_proj.weight"] = "b.safetensors";
  });
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir.path()),
                          {"model.safetensors.index.json",
                           "'model.layers.0.mlp.up_proj.weight'", "'b.safetensors'"});
}

TEST(hf_checkpoint, shard_holding_an_unlisted_tensor_is_named) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  write_sharded(dir, original, [](json& map) { map.erase("model.norm.weight"); });
  EXPECT_CHECKPOINT_ERROR(
      load_checkpoint(dir.path()),
      {(dir / "a.safetensors").string(), "'model.norm.weight'", "not listed"});
}

TEST(hf_checkpoint, shard_outside_the_directory_is_refused) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  write_sharded(dir, original,
                [](json& map) { map["model.norm.weight"] = "../a.safetensors"; });
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir.path()),
                          {"model.safetensors.index.json", "'model.norm.weight'",
                           "'../a.safetensors'", "not a file name"});
}

TEST(hf_checkpoint, index_without_weight_map_is_named) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  write_sharded(dir, original, [](json&) {});
  write_bytes(dir / "model.safetensors.index.json", R"({"metadata": {}})");
  EXPECT_CHECKPOINT_ERROR(
      load_checkpoint(dir.path()),
      {(dir / "model.safetensors.index.json").string(), "weight_map"});
}

// --- load_checkpoint dispatch and the writer's own checks -----------------------------

TEST(load_checkpoint, missing_path_is_named) {
  scratch_dir dir;
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir / "nothing-here"),
                          {(dir / "nothing-here").string(), "no such file"});
}

TEST(load_checkpoint, a_file_of_an_hf_directory_asks_for_the_directory) {
  const checkpoint original = small_checkpoint(architecture::gpt2);
  scratch_dir dir;
  write_hf_checkpoint(original, dir.path());
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir / "model.safetensors"),
                          {(dir / "model.safetensors").string(), "directory"});
}

TEST(write_hf_checkpoint, refuses_an_inconsistent_checkpoint_and_writes_nothing) {
  checkpoint broken = small_checkpoint(architecture::llama);
  broken.tensors.erase("model.layers.1.mlp.down_proj.weight");
  scratch_dir dir;
  EXPECT_CHECKPOINT_ERROR(write_hf_checkpoint(broken, dir / "out"),
                          {"'model.layers.1.mlp.down_proj.weight'", "missing"});
  EXPECT_FALSE(std::filesystem::exists(dir / "out" / "model.safetensors"));
}

} // namespace
