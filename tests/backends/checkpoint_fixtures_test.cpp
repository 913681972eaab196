// The shared test models (../shared/models, see its README) load with the README's
// configurations, and the llama2.c and HF forms of stories260K hold the same weights:
// equal bytes everywhere except q/k rows, which agree after the documented per-head
// permutation (new row h*hd + c*hd/2 + j = old row h*hd + 2j + c).

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/checkpoint_writer.hpp>

#include "checkpoint_test_support.hpp"
#include "shared_fixtures.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace {

using namespace canopy::backends;
using canopy::testing::read_bytes;
using canopy::testing::scratch_dir;
using canopy::testing::view_bytes;

void expect_stories_config(const model_config& c, rope_pairs rope) {
  EXPECT_EQ(c.arch, architecture::llama);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.context_length, 512);
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope, rope);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
}

float element(const tensor_view& view, std::size_t i) {
  float out;
  std::memcpy(&out, view.data + 4 * i, 4);
  return out;
}

TEST(checkpoint_fixtures, stories260_k_bin_has_the_readme_config) {
  CANOPY_SHARED_PATH_OR_SKIP(path, "models/stories260K/stories260K.bin");
  const checkpoint ckpt = load_checkpoint(path);
  expect_stories_config(ckpt.config, rope_pairs::interleaved);
  EXPECT_EQ(ckpt.tensors.size(), 1u + 5u * 9u + 1u);
  EXPECT_EQ(ckpt.tensors.count("lm_head.weight"), 0u);
  // Real trained weights: norm gains are far from zero, the embedding is not constant.
  EXPECT_GT(std::fabs(element(ckpt.tensors.at("model.norm.weight"), 0)), 0.01f);
  EXPECT_NE(element(ckpt.tensors.at("model.embed_tokens.weight"), 0),
            element(ckpt.tensors.at("model.embed_tokens.weight"), 1));
}

TEST(checkpoint_fixtures, stories260_k_hf_has_the_readme_config) {
  CANOPY_SHARED_PATH_OR_SKIP(path, "models/stories260K/hf");
  const checkpoint ckpt = load_checkpoint(path);
  expect_stories_config(ckpt.config, rope_pairs::rotate_half);
  EXPECT_EQ(ckpt.tensors.size(), 1u + 5u * 9u + 1u);
  for (const auto& [name, view] : ckpt.tensors)
    EXPECT_EQ(view.dtype, weight_dtype::f32) << name;
}

TEST(checkpoint_fixtures, stories260_k_bin_and_hf_hold_the_same_weights) {
  CANOPY_SHARED_PATH_OR_SKIP(bin_path, "models/stories260K/stories260K.bin");
  CANOPY_SHARED_PATH_OR_SKIP(hf_path, "models/stories260K/hf");
  const checkpoint bin = load_checkpoint(bin_path);
  const checkpoint hf = load_checkpoint(hf_path);
  ASSERT_EQ(bin.tensors.size(), hf.tensors.size());
  const std::int64_t hd = 8;
  int permuted = 0;
  for (const auto& [name, view] : bin.tensors) {
    ASSERT_EQ(hf.tensors.count(name), 1u) << name;
    const tensor_view& other = hf.tensors.at(name);
    ASSERT_EQ(view.shape, other.shape) << name;
    const std::string a = view_bytes(view), b = view_bytes(other);
    const bool qk = name.find("q_proj") != std::string::npos ||
                    name.find("k_proj") != std::string::npos;
    if (!qk) {
      EXPECT_EQ(a, b) << name;
      continue;
    }
    ++permuted;
    EXPECT_NE(a, b) << name << ": rows should differ before the permutation";
    const std::size_t row = static_cast<std::size_t>(view.shape[1]) * 4;
    for (std::int64_t h = 0; h < view.shape[0] / hd; ++h)
      for (std::int64_t c = 0; c < 2; ++c)
        for (std::int64_t j = 0; j < hd / 2; ++j)
          ASSERT_EQ(
              b.substr(static_cast<std::size_t>(h * hd + c * hd / 2 + j) * row, row),
              a.substr(static_cast<std::size_t>(h * hd + 2 * j + c) * row, row))
              << name << " head " << h << " c " << c << " j " << j;
  }
  EXPECT_EQ(permuted, 10);
}

TEST(checkpoint_fixtures, stories260_k_bin_written_as_hf_matches_the_shipped_hf) {
  // The writer's permutation is the fixture generator's: same tensors, same bytes.
  CANOPY_SHARED_PATH_OR_SKIP(bin_path, "models/stories260K/stories260K.bin");
  CANOPY_SHARED_PATH_OR_SKIP(hf_path, "models/stories260K/hf");
  scratch_dir dir;
  write_hf_checkpoint(load_checkpoint(bin_path), dir.path());
  const checkpoint written = load_checkpoint(dir.path());
  const checkpoint shipped = load_checkpoint(hf_path);
  EXPECT_EQ(written.config.rope, rope_pairs::rotate_half);
  ASSERT_EQ(written.tensors.size(), shipped.tensors.size());
  for (const auto& [name, view] : shipped.tensors)
    EXPECT_EQ(view_bytes(written.tensors.at(name)), view_bytes(view)) << name;
}

TEST(checkpoint_fixtures, gpt2_synthetic_has_the_readme_config) {
  CANOPY_SHARED_PATH_OR_SKIP(path, "models/gpt2-synthetic");
  const checkpoint ckpt = load_checkpoint(path);
  const model_config& c = ckpt.config;
  EXPECT_EQ(c.arch, architecture::gpt2);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate_size, 256);
  EXPECT_EQ(c.context_length, 128);
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.bos_token_id, 50256);
  EXPECT_EQ(c.eos_token_id, 50256);
  EXPECT_EQ(ckpt.tensors.size(), 2u + 2u * 12u + 2u);
  EXPECT_EQ(ckpt.tensors.at("transformer.wte.weight").shape,
            (std::vector<std::int64_t>{50257, 64}));
  EXPECT_EQ(ckpt.tensors.at("transformer.wpe.weight").shape,
            (std::vector<std::int64_t>{128, 64}));
  EXPECT_EQ(ckpt.tensors.at("transformer.h.1.attn.c_attn.weight").shape,
            (std::vector<std::int64_t>{64, 192}));
  EXPECT_EQ(ckpt.tensors.at("transformer.h.0.mlp.c_proj.weight").shape,
            (std::vector<std::int64_t>{256, 64}));
  // The views point at the file's bytes: the first wte value as stored on disk.
  const std::string file = read_bytes(path / "model.safetensors");
  const tensor_view& wte = ckpt.tensors.at("transformer.wte.weight");
  EXPECT_NE(file.find(view_bytes(wte).substr(0, 64)), std::string::npos);
}

TEST(checkpoint_fixtures, aidreams260_k_has_the_readme_config) {
  CANOPY_SHARED_PATH_OR_SKIP(path, "models/aidreams260K/aidreams260K.bin");
  const checkpoint ckpt = load_checkpoint(path);
  const model_config& c = ckpt.config;
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 4);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.context_length, 128);
  EXPECT_EQ(c.rope, rope_pairs::interleaved);
  EXPECT_TRUE(c.tied_embeddings);
}

} // namespace
