// Synthetic checkpoints: deterministic and portable (values pinned against an
// independent Python transcription of splitmix64 + Box-Muller), consistent with the
// schema, scaled as documented, clearly non-uniform next-token distributions, and
// clear std::invalid_argument messages for impossible specs.

#include <canopy/backends/checkpoints/checkpoint_schema.hpp>
#include <canopy/backends/checkpoints/synthetic_checkpoint.hpp>

#include "checkpoint_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace {

using namespace canopy::backends;
using canopy::testing::view_bytes;

std::vector<float> values(const tensor_view& view) {
  std::vector<float> out(static_cast<std::size_t>(numel(view)));
  std::memcpy(out.data(), view.data, out.size() * 4);
  return out;
}

struct moments {
  double mean, std;
};

moments moments_of(const std::vector<float>& v) {
  double sum = 0, sq = 0;
  for (float x : v) {
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  const double mean = sum / static_cast<double>(v.size());
  return {mean, std::sqrt(sq / static_cast<double>(v.size()) - mean * mean)};
}

TEST(synthetic_checkpoint, normal_stream_matches_an_independent_transcription) {
  // Values from a Python transcription of the documented algorithm (fnv1a name hash,
  // mix64 key, splitmix64 outputs 2p/2p+1, Box-Muller in double).
  EXPECT_NEAR(synthetic_normal(1, "model.norm.weight", 0), 1.1213167020588064, 1e-14);
  EXPECT_NEAR(synthetic_normal(1, "model.norm.weight", 1), 1.1351483936178808, 1e-14);
  EXPECT_NEAR(synthetic_normal(1, "model.norm.weight", 2), -1.1218566352420103, 1e-14);
  EXPECT_NEAR(synthetic_normal(1, "model.norm.weight", 3), 0.3638049945363577, 1e-14);
  EXPECT_NEAR(synthetic_normal(12345, "transformer.wte.weight", 1001), -1.330034084769443,
              1e-14);
}

TEST(synthetic_checkpoint, normal_stream_is_standard_normal) {
  double sum = 0, sq = 0;
  int within_one = 0;
  constexpr int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double z = synthetic_normal(3, "stats", static_cast<std::uint64_t>(i));
    sum += z;
    sq += z * z;
    within_one += std::fabs(z) < 1.0;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.01);
  EXPECT_NEAR(static_cast<double>(within_one) / n, 0.6827, 0.005);
}

TEST(synthetic_checkpoint, same_spec_same_bytes_other_seed_other_bytes) {
  synthetic_spec spec;
  const checkpoint a = make_synthetic_checkpoint(spec);
  const checkpoint b = make_synthetic_checkpoint(spec);
  spec.seed = 2;
  const checkpoint c = make_synthetic_checkpoint(spec);
  for (const auto& [name, view] : a.tensors) {
    EXPECT_EQ(view_bytes(view), view_bytes(b.tensors.at(name))) << name;
    EXPECT_NE(view_bytes(view), view_bytes(c.tensors.at(name))) << name;
  }
}

TEST(synthetic_checkpoint, growing_the_model_keeps_existing_tensors) {
  synthetic_spec spec;
  const checkpoint small = make_synthetic_checkpoint(spec);
  spec.layers = 3;
  const checkpoint large = make_synthetic_checkpoint(spec);
  EXPECT_EQ(large.tensors.size(), small.tensors.size() + 9);
  for (const auto& [name, view] : small.tensors)
    EXPECT_EQ(view_bytes(view), view_bytes(large.tensors.at(name))) << name;
}

TEST(synthetic_checkpoint, config_follows_the_spec) {
  synthetic_spec spec;
  spec.hidden = 96;
  spec.heads = 6;
  spec.kv_heads = 2;
  spec.vocab = 300;
  spec.context = 77;
  const checkpoint llama = make_synthetic_checkpoint(spec);
  EXPECT_EQ(llama.config.arch, architecture::llama);
  EXPECT_EQ(llama.config.head_dim, 16);
  EXPECT_EQ(llama.config.num_kv_heads, 2);
  EXPECT_EQ(llama.config.intermediate_size, 256); // floor(8*96/3) = 256, a multiple of 32
  EXPECT_EQ(llama.config.context_length, 77);
  EXPECT_EQ(llama.config.rope, rope_pairs::rotate_half);
  EXPECT_TRUE(llama.config.tied_embeddings);
  EXPECT_EQ(llama.config.bos_token_id, 1);
  EXPECT_EQ(llama.config.eos_token_id, 2);
  EXPECT_NO_THROW(check_checkpoint(llama));

  spec.arch = architecture::gpt2;
  spec.kv_heads = 0;
  const checkpoint gpt2 = make_synthetic_checkpoint(spec);
  EXPECT_EQ(gpt2.config.intermediate_size, 384);
  EXPECT_EQ(gpt2.config.num_kv_heads, 6);
  EXPECT_EQ(gpt2.config.bos_token_id, 299);
  EXPECT_EQ(gpt2.config.eos_token_id, 299);
  EXPECT_EQ(gpt2.tensors.at("transformer.wpe.weight").shape,
            (std::vector<std::int64_t>{77, 96}));
  EXPECT_NO_THROW(check_checkpoint(gpt2));
}

TEST(synthetic_checkpoint, default_intermediate_sizes) {
  EXPECT_EQ(default_intermediate_size(architecture::llama, 64), 192);
  EXPECT_EQ(default_intermediate_size(architecture::llama, 288), 768);
  EXPECT_EQ(default_intermediate_size(architecture::llama, 4096), 10944);
  EXPECT_EQ(default_intermediate_size(architecture::gpt2, 768), 3072);
}

TEST(synthetic_checkpoint, scales_are_the_documented_ones) {
  synthetic_spec spec;
  spec.arch = architecture::gpt2;
  spec.hidden = 256;
  spec.heads = 8;
  spec.vocab = 2000;
  const checkpoint ckpt = make_synthetic_checkpoint(spec);
  const double s = std::sqrt(64.0 / 256.0);
  auto m = [&](const char* name) { return moments_of(values(ckpt.tensors.at(name))); };
  EXPECT_NEAR(m("transformer.wte.weight").std, 0.05, 0.002);
  EXPECT_NEAR(m("transformer.wpe.weight").std, 0.03, 0.002);
  EXPECT_NEAR(m("transformer.h.0.attn.c_attn.weight").std, 0.2 * s, 0.005);
  EXPECT_NEAR(m("transformer.h.0.mlp.c_proj.weight").std, 0.1 * s, 0.003);
  EXPECT_NEAR(m("transformer.h.1.ln_1.weight").mean, 1.0, 0.03);
  EXPECT_NEAR(m("transformer.h.1.ln_1.weight").std, 0.1, 0.03);
  EXPECT_NEAR(m("transformer.ln_f.weight").mean, 10.0 * s, 0.3);
}

/// Entropy (nats) of softmax(E x) for the final-norm output x = gain * z of a random
/// unit-RMS z: the distribution the model's last step produces, up to the residual
/// stream's direction, which is what the scales control.
double head_entropy(const checkpoint& ckpt, const char* embedding,
                    const char* final_gain) {
  const auto E = values(ckpt.tensors.at(embedding));
  const auto g = values(ckpt.tensors.at(final_gain));
  const std::size_t D = g.size(), V = E.size() / D;
  std::vector<double> x(D);
  for (std::size_t d = 0; d < D; ++d)
    x[d] = g[d] * synthetic_normal(99, "probe", d);
  std::vector<double> logits(V);
  double top = -1e300;
  for (std::size_t v = 0; v < V; ++v) {
    double dot = 0;
    for (std::size_t d = 0; d < D; ++d)
      dot += E[v * D + d] * x[d];
    logits[v] = dot;
    top = std::max(top, dot);
  }
  double z = 0;
  for (double l : logits)
    z += std::exp(l - top);
  double entropy = 0;
  for (double l : logits) {
    const double p = std::exp(l - top) / z;
    entropy -= p > 0 ? p * std::log(p) : 0;
  }
  return entropy;
}

TEST(synthetic_checkpoint, next_token_distributions_are_clearly_non_uniform) {
  for (std::int64_t hidden : {64, 256}) {
    synthetic_spec spec;
    spec.hidden = hidden;
    spec.vocab = 4096;
    const checkpoint llama = make_synthetic_checkpoint(spec);
    EXPECT_LT(head_entropy(llama, "model.embed_tokens.weight", "model.norm.weight"),
              std::log(4096.0) - 2.0)
        << "llama hidden " << hidden;
    spec.arch = architecture::gpt2;
    const checkpoint gpt2 = make_synthetic_checkpoint(spec);
    EXPECT_LT(head_entropy(gpt2, "transformer.wte.weight", "transformer.ln_f.weight"),
              std::log(4096.0) - 2.0)
        << "gpt2 hidden " << hidden;
  }
}

TEST(synthetic_checkpoint, impossible_specs_are_refused_naming_the_field) {
  struct bad {
    std::function<void(synthetic_spec&)> edit;
    std::string expected;
  };
  const std::vector<bad> cases{
      {[](synthetic_spec& s) { s.hidden = 0; }, "hidden must be positive"},
      {[](synthetic_spec& s) { s.layers = -1; }, "layers must be positive"},
      {[](synthetic_spec& s) { s.heads = 0; }, "heads must be positive"},
      {[](synthetic_spec& s) { s.vocab = 0; }, "vocab must be positive"},
      {[](synthetic_spec& s) { s.context = 0; }, "context must be positive"},
      {[](synthetic_spec& s) { s.kv_heads = -2; }, "kv_heads"},
      {[](synthetic_spec& s) { s.intermediate = -5; }, "intermediate"},
      {[](synthetic_spec& s) { s.heads = 5; }, "not divisible by heads 5"},
      {[](synthetic_spec& s) { s.kv_heads = 3; }, "kv_heads 3"},
      {[](synthetic_spec& s) {
         s.heads = 16;
         s.hidden = 48;
       },
       "odd"},
      {[](synthetic_spec& s) {
         s.arch = architecture::gpt2;
         s.kv_heads = 2;
       },
       "gpt2"},
      {[](synthetic_spec& s) {
         s.vocab = 1 << 24;
         s.hidden = 1024;
       },
       "parameters"},
      {[](synthetic_spec& s) { s.layers = 100000; }, "layers"},
      {[](synthetic_spec& s) { s.hidden = std::int64_t{1} << 40; }, "2^24"},
  };
  for (const bad& test : cases) {
    synthetic_spec spec;
    test.edit(spec);
    try {
      make_synthetic_checkpoint(spec);
      ADD_FAILURE() << "no error, expected: " << test.expected;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(test.expected), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("synthetic_spec"), std::string::npos)
          << e.what();
    }
  }
}

} // namespace
