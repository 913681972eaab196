// HF checkpoint directories: round trips through write_hf_checkpoint (single file,
// hand-written shards, F16/BF16), GPT-2 name normalization, and every malformed
// directory giving a checkpoint_error that names the file and the tensor
// (hf_config_json_test.cpp: config.json's keys).

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
using canopy::testing::config_json;
using canopy::testing::expect_same_config;
using canopy::testing::expect_same_tensors;
using canopy::testing::read_bytes;
using canopy::testing::scratch_dir;
using canopy::testing::small_checkpoint;
using canopy::testing::view_bytes;
using canopy::testing::write_bytes;
using canopy::testing::write_dir;
using json = nlohmann::json;

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
