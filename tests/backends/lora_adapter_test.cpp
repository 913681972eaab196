// PEFT LoRA adapter directories (lora_adapter.hpp), built here as PEFT's
// save_pretrained writes them, against a small Llama config: what loads (rank, alpha,
// the scale with and without rsLoRA, every factor under the name of the weight it
// adapts, "all-linear"), and what is refused, each problem by name: settings that
// change the math, unknown keys holding a value, other adapter types and modules,
// missing, extra and misshapen tensors, a GPT-2 base, q/k rows in llama2.c's order;
// and make_synthetic_lora's adapters, which load as written, the same for the same spec.
#include <canopy/backends/checkpoints/checkpoint_writer.hpp>
#include <canopy/backends/checkpoints/lora_adapter.hpp>
#include <canopy/backends/checkpoints/synthetic_lora_adapter.hpp>

#include "scratch_files.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace canopy::backends;
using json = nlohmann::json;

model_config small_llama() {
  model_config c;
  c.arch = architecture::llama;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 32;
  c.context_length = 64;
  return c;
}

/// [out, in] of each module in small_llama().
std::map<std::string, std::pair<std::int64_t, std::int64_t>> module_shapes() {
  return {{"q_proj", {16, 16}},   {"k_proj", {8, 16}},     {"v_proj", {8, 16}},
          {"o_proj", {16, 16}},   {"gate_proj", {24, 16}}, {"up_proj", {24, 16}},
          {"down_proj", {16, 24}}};
}

std::string block_of(const std::string& module) {
  return module.size() == 6 && module[1] == '_' ? "self_attn" : "mlp";
}

/// An adapter directory as PEFT saves it: every layer, each of `modules`, rank r.
class adapter_dir {
public:
  adapter_dir(std::vector<std::string> modules, std::int64_t r)
      : modules_(std::move(modules)), r_(r) {
    config_ = {{"peft_type", "LORA"},
               {"task_type", "CAUSAL_LM"},
               {"base_model_name_or_path", "small"},
               {"r", r},
               {"lora_alpha", 16},
               {"lora_dropout", 0.05},
               {"target_modules", modules_},
               {"bias", "none"},
               {"use_rslora", false},
               {"use_dora", false},
               {"fan_in_fan_out", false},
               {"modules_to_save", nullptr},
               {"rank_pattern", json::object()},
               {"alpha_pattern", json::object()},
               {"layers_to_transform", nullptr},
               {"inference_mode", true}};
    const auto shapes = module_shapes();
    for (int layer = 0; layer < 2; ++layer)
      for (const auto& m : modules_) {
        const auto [out, in] = shapes.at(m);
        const std::string path = "base_model.model.model.layers." +
                                 std::to_string(layer) + "." + block_of(m) + "." + m;
        add(path + ".lora_A.weight", {r_, in});
        add(path + ".lora_B.weight", {out, r_});
      }
  }

  json& config() { return config_; }
  void add(const std::string& name, std::vector<std::int64_t> shape) {
    std::int64_t n = 1;
    for (auto d : shape)
      n *= d;
    auto& values = storage_[name];
    values.resize(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<float>(i % 7) * 0.01f;
    shapes_[name] = std::move(shape);
  }
  void remove(const std::string& name) {
    storage_.erase(name);
    shapes_.erase(name);
  }

  /// Writes the directory and loads it against `base`.
  lora_adapter load(const model_config& base = small_llama()) {
    std::map<std::string, tensor_view> tensors;
    for (const auto& [name, values] : storage_)
      tensors[name] = tensor_view{weight_dtype::f32, shapes_.at(name),
                                  reinterpret_cast<const std::byte*>(values.data())};
    write_safetensors_file(dir_ / "adapter_model.safetensors", tensors);
    dir_.write("adapter_config.json", config_.dump(2));
    return load_lora_adapter(dir_.path(), base, "small-llama");
  }
  const canopy::testing::scratch_dir& dir() const { return dir_; }

private:
  std::vector<std::string> modules_;
  std::int64_t r_;
  json config_;
  std::map<std::string, std::vector<float>> storage_;
  std::map<std::string, std::vector<std::int64_t>> shapes_;
  canopy::testing::scratch_dir dir_;
};

/// The message of the checkpoint_error that loading `a` throws ("" if none).
std::string refusal(adapter_dir& a, const model_config& base = small_llama()) {
  try {
    a.load(base);
  } catch (const checkpoint_error& e) {
    return e.what();
  }
  return "";
}

TEST(lora_adapter, loads_every_factor_under_the_weight_it_adapts) {
  adapter_dir a({"q_proj", "v_proj", "down_proj"}, 4);
  const auto adapter = a.load();
  EXPECT_EQ(adapter.rank, 4);
  EXPECT_EQ(adapter.alpha, 16.0);
  EXPECT_FALSE(adapter.rslora);
  EXPECT_EQ(adapter.scale, 4.0); // alpha / r
  EXPECT_EQ(adapter.modules, (std::vector<std::string>{"q_proj", "v_proj", "down_proj"}));
  ASSERT_EQ(adapter.factors.size(), 6u);
  const auto& q = adapter.factors.at("model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(q.a.shape, (std::vector<std::int64_t>{4, 16}));
  EXPECT_EQ(q.b.shape, (std::vector<std::int64_t>{16, 4}));
  const auto& down = adapter.factors.at("model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(down.a.shape, (std::vector<std::int64_t>{4, 24}));
  EXPECT_EQ(down.b.shape, (std::vector<std::int64_t>{16, 4}));
  float second = 0;
  std::memcpy(&second, down.a.data + sizeof(float), sizeof second);
  EXPECT_EQ(second, 0.01f) << "the view reads the file's values";
}

TEST(lora_adapter, rslora_scales_by_the_square_root_of_the_rank) {
  adapter_dir a({"o_proj"}, 9);
  a.config()["use_rslora"] = true;
  a.config()["lora_alpha"] = 6;
  const auto adapter = a.load();
  EXPECT_TRUE(adapter.rslora);
  EXPECT_DOUBLE_EQ(adapter.scale, 2.0); // 6 / sqrt(9)
}

TEST(lora_adapter, all_linear_targets_the_seven_projections) {
  adapter_dir a(
      {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}, 2);
  a.config()["target_modules"] = "all-linear";
  const auto adapter = a.load();
  EXPECT_EQ(adapter.modules.size(), 7u);
  EXPECT_EQ(adapter.factors.size(), 14u);
}

TEST(lora_adapter, refuses_settings_that_change_the_math_by_name) {
  const std::vector<std::pair<std::string, json>> settings{
      {"use_dora", true},
      {"bias", "all"},
      {"modules_to_save", json::array({"lm_head"})},
      {"fan_in_fan_out", true},
      {"rank_pattern", {{"q_proj", 8}}},
      {"alpha_pattern", {{"q_proj", 8}}},
      {"layers_to_transform", json::array({0})},
      {"a_future_peft_feature", "on"}};
  for (const auto& [key, value] : settings) {
    adapter_dir a({"q_proj"}, 4);
    a.config()[key] = value;
    const auto why = refusal(a);
    EXPECT_NE(why.find("'" + key + "'"), std::string::npos) << key << ": " << why;
    EXPECT_NE(why.find("not support"), std::string::npos) << why;
  }
  adapter_dir unused({"q_proj"}, 4);
  unused.config()["a_future_peft_feature"] = nullptr;
  unused.config()["megatron_config"] = false;
  EXPECT_EQ(refusal(unused), "") << "a key holding nothing changes nothing";
}

TEST(lora_adapter, refuses_other_types_modules_and_bad_numbers_by_name) {
  const std::vector<std::tuple<std::string, json, std::string>> cases{
      {"peft_type", "IA3", "only LORA"},
      {"target_modules", json::array({"q_proj", "lm_head"}), "'lm_head'"},
      {"target_modules", ".*proj", "pattern"},
      {"target_modules", json::array(), "empty"},
      {"r", 0, "positive integer"},
      {"r", 2.5, "positive integer"},
      {"lora_alpha", "sixteen", "finite number"}};
  for (const auto& [key, value, expected] : cases) {
    adapter_dir a({"q_proj"}, 4);
    a.config()[key] = value;
    const auto why = refusal(a);
    EXPECT_NE(why.find("'" + key + "'"), std::string::npos) << key << ": " << why;
    EXPECT_NE(why.find(expected), std::string::npos) << key << ": " << why;
  }
}

TEST(lora_adapter, refuses_missing_extra_and_misshapen_tensors_by_name) {
  {
    adapter_dir a({"q_proj", "up_proj"}, 4);
    a.remove("base_model.model.model.layers.1.mlp.up_proj.lora_B.weight");
    EXPECT_NE(refusal(a).find("no tensor base_model.model.model.layers.1.mlp.up_proj."
                              "lora_B.weight"),
              std::string::npos);
  }
  {
    adapter_dir a({"q_proj"}, 4);
    a.add("base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight", {4, 16});
    const auto why = refusal(a);
    EXPECT_NE(
        why.find("do not account for: "
                 "'base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight'"),
        std::string::npos)
        << why;
  }
  {
    adapter_dir a({"k_proj"}, 4);
    a.add("base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight", {16, 4});
    const auto why = refusal(a); // k_proj's outputs are 2 KV heads x 4 = 8
    EXPECT_NE(why.find("k_proj.lora_B.weight has shape [16, 4], expected [8, 4]"),
              std::string::npos)
        << why;
  }
  {
    adapter_dir a({"v_proj"}, 4);
    a.config()["r"] = 8; // the tensors are rank 4
    EXPECT_NE(refusal(a).find("expected [8, 16] (rank 8"), std::string::npos);
  }
}

TEST(lora_adapter, refuses_what_is_not_an_adapter_for_this_model) {
  {
    canopy::testing::scratch_dir empty;
    try {
      load_lora_adapter(empty.path(), small_llama(), "small-llama");
      ADD_FAILURE() << "an empty directory loaded";
    } catch (const checkpoint_error& e) {
      EXPECT_NE(std::string(e.what()).find("no adapter_config.json"), std::string::npos);
    }
  }
  {
    adapter_dir a({"q_proj"}, 4);
    a.load();
    a.dir().write("adapter_config.json", "{\"r\": 4,");
    try {
      load_lora_adapter(a.dir().path(), small_llama(), "small-llama");
      ADD_FAILURE() << "malformed JSON loaded";
    } catch (const checkpoint_error& e) {
      EXPECT_NE(std::string(e.what()).find("adapter_config.json: not valid JSON"),
                std::string::npos)
          << e.what();
    }
  }
  {
    adapter_dir a({"v_proj"}, 4);
    auto gpt2 = small_llama();
    gpt2.arch = architecture::gpt2;
    EXPECT_NE(refusal(a, gpt2).find("small-llama is gpt2"), std::string::npos);
  }
  {
    adapter_dir a({"q_proj"}, 4);
    auto llama2c = small_llama();
    llama2c.rope = rope_pairs::interleaved;
    EXPECT_NE(refusal(a, llama2c).find("interleaved RoPE order"), std::string::npos);
    adapter_dir v({"v_proj", "gate_proj"}, 4);
    EXPECT_EQ(refusal(v, llama2c), "") << "v and the MLP do not depend on RoPE's order";
  }
}

} // namespace

TEST(synthetic_lora, loads_as_written_and_the_same_spec_writes_the_same_bytes) {
  synthetic_lora_spec spec;
  spec.rank = 3;
  spec.alpha = 6;
  spec.seed = 11;
  const auto made = make_synthetic_lora(small_llama(), spec);
  ASSERT_EQ(made.factors.size(), 14u) << "seven projections in each of two layers";
  canopy::testing::scratch_dir first, second;
  write_lora_adapter(made, first.path());
  write_lora_adapter(make_synthetic_lora(small_llama(), spec), second.path());
  for (const char* file : {"adapter_config.json", "adapter_model.safetensors"})
    EXPECT_EQ(canopy::testing::read_bytes(first.path() / file),
              canopy::testing::read_bytes(second.path() / file))
        << file;
  spec.seed = 12;
  EXPECT_NE(make_synthetic_lora(small_llama(), spec).factors.begin()->second.a,
            made.factors.begin()->second.a)
      << "the seed draws other factors";

  const auto loaded = load_lora_adapter(first.path(), small_llama(), "small-llama");
  EXPECT_EQ(loaded.rank, 3);
  EXPECT_DOUBLE_EQ(loaded.scale, made.scale());
  EXPECT_EQ(loaded.modules.size(), 7u);
  for (const auto& [weight, f] : made.factors) {
    const auto& read = loaded.factors.at(weight);
    EXPECT_EQ(read.a.shape, (std::vector<std::int64_t>{3, f.in})) << weight;
    EXPECT_EQ(read.b.shape, (std::vector<std::int64_t>{f.out, 3})) << weight;
    EXPECT_EQ(std::memcmp(read.a.data, f.a.data(), f.a.size() * sizeof(float)), 0)
        << weight;
    EXPECT_EQ(std::memcmp(read.b.data, f.b.data(), f.b.size() * sizeof(float)), 0)
        << weight;
  }
}

TEST(synthetic_lora, refuses_specs_and_bases_it_cannot_describe_by_name) {
  auto why = [](const model_config& base, const synthetic_lora_spec& spec) {
    try {
      make_synthetic_lora(base, spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  synthetic_lora_spec no_rank;
  no_rank.rank = 0;
  EXPECT_NE(why(small_llama(), no_rank).find("rank"), std::string::npos);
  synthetic_lora_spec too_wide;
  too_wide.rank = 9;
  EXPECT_NE(why(small_llama(), too_wide).find("at most 8"), std::string::npos)
      << "k_proj and v_proj have 8 rows";
  synthetic_lora_spec no_alpha;
  no_alpha.alpha = -1;
  EXPECT_NE(why(small_llama(), no_alpha).find("alpha"), std::string::npos);
  auto gpt2 = small_llama();
  gpt2.arch = architecture::gpt2;
  EXPECT_NE(why(gpt2, {}).find("gpt2"), std::string::npos);
}
