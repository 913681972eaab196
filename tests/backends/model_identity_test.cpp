// What a worker announces about its model, and what a front that loads no weights
// knows of it: fingerprints follow the weights and the config (one changed byte, one
// changed constant, another model: another fingerprint; the same files: the same one),
// and describe_model agrees with the backend make_backend builds, reading no weights.

#include "scratch_files.hpp"
#include "shared_fixtures.hpp"

#include <canopy/backends/backend_factory.hpp>
#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/synthetic_checkpoint.hpp>
#include <canopy/backends/model_fingerprint.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include <cstring>
#include <memory>
#include <vector>

namespace {

using namespace canopy::backends;

synthetic_spec tiny() {
  synthetic_spec spec;
  spec.hidden = 16;
  spec.layers = 1;
  spec.heads = 2;
  spec.vocab = 32;
  spec.context = 16;
  return spec;
}

/// A copy of `ckpt` whose tensors live in memory of its own, so a test may change them.
checkpoint owned_copy(const checkpoint& ckpt) {
  auto storage = std::make_shared<std::vector<std::vector<std::byte>>>();
  checkpoint out = ckpt;
  for (auto& [name, view] : out.tensors) {
    storage->emplace_back(view.data, view.data + byte_size(view));
    view.data = storage->back().data();
  }
  out.storage = storage;
  return out;
}

TEST(model_identity, a_fingerprint_follows_every_weight_byte_and_the_config) {
  const checkpoint base = make_synthetic_checkpoint(tiny());
  const std::string fingerprint = checkpoint_fingerprint(base);
  EXPECT_EQ(fingerprint.size(), 32u);
  EXPECT_EQ(checkpoint_fingerprint(make_synthetic_checkpoint(tiny())), fingerprint)
      << "the same weights, the same fingerprint";
  checkpoint flipped = owned_copy(base);
  auto& last = flipped.tensors.rbegin()->second;
  auto* bytes = const_cast<std::byte*>(last.data);
  bytes[byte_size(last) - 1] ^= std::byte{1};
  EXPECT_NE(checkpoint_fingerprint(flipped), fingerprint) << "one bit of one weight";
  checkpoint theta = owned_copy(base);
  theta.config.rope_theta *= 2;
  EXPECT_NE(checkpoint_fingerprint(theta), fingerprint) << "a constant of the arithmetic";
  // Each feature that changes the arithmetic without changing a weight.
  const std::vector<std::function<void(model_config&)>> features{
      [](model_config& c) { c.scaling.type = rope_scaling::kind::linear; },
      [](model_config& c) { c.sliding_window = 16; },
      [](model_config& c) { c.arch = architecture::mistral; },
  };
  for (std::size_t i = 0; i < features.size(); ++i) {
    checkpoint changed = owned_copy(base);
    features[i](changed.config);
    EXPECT_NE(checkpoint_fingerprint(changed), fingerprint) << "feature " << i;
  }
  auto other = tiny();
  other.seed = 2;
  EXPECT_NE(checkpoint_fingerprint(make_synthetic_checkpoint(other)), fingerprint);
}

TEST(model_identity, the_mock_fingerprint_follows_what_its_rows_depend_on) {
  mock_options a;
  mock_options b = a;
  b.cost_per_token = std::chrono::microseconds(200);
  b.kv_bytes_per_token = 1;
  EXPECT_EQ(mock_fingerprint(a), mock_fingerprint(b)) << "costs do not change an answer";
  b.seed = a.seed + 1;
  EXPECT_NE(mock_fingerprint(a), mock_fingerprint(b));
  b = a;
  b.vocab_size = a.vocab_size + 1;
  EXPECT_NE(mock_fingerprint(a), mock_fingerprint(b));
}

/// describe_model agrees with the backend itself on everything a front validates with.
void expect_described_as_built(const backend_spec& spec) {
  const model_info described = describe_model(spec);
  const model_info built = make_backend(spec)->info();
  EXPECT_EQ(described.name, built.name);
  EXPECT_EQ(described.architecture, built.architecture);
  EXPECT_EQ(described.vocab_size, built.vocab_size);
  EXPECT_EQ(described.context_length, built.context_length);
  EXPECT_EQ(described.dtype, built.dtype);
  EXPECT_EQ(described.weight_kernels, built.weight_kernels);
  EXPECT_FALSE(built.fingerprint.empty());
  if (spec.kind == "mock") {
    EXPECT_EQ(described.fingerprint, built.fingerprint);
  } else {
    EXPECT_TRUE(described.fingerprint.empty()) << "known only from the weights";
  }
}

TEST(model_identity,
     describe_model_agrees_with_the_backend_for_the_mock_and_the_builtin) {
  backend_spec mock;
  expect_described_as_built(mock);
  backend_spec builtin;
  builtin.kind = "torch";
  builtin.torch.kv_budget_bytes = 1 << 20;
  expect_described_as_built(builtin);
  builtin.torch.weight_dtype = "int4"; // names the kernels its products run on
  expect_described_as_built(builtin);
  EXPECT_FALSE(describe_model(builtin).weight_kernels.empty());
  builtin.torch.weight_dtype = "";
  builtin.torch.dtype = "bfloat16";
  EXPECT_EQ(describe_model(builtin).dtype, "bfloat16");
  EXPECT_EQ(describe_model(builtin).weight_kernels, "") << "dense weights";
}

TEST(model_identity,
     describe_model_agrees_with_the_backend_for_both_forms_of_stories260_k) {
  CANOPY_SHARED_PATH_OR_SKIP(bin, "models/stories260K/stories260K.bin");
  CANOPY_SHARED_PATH_OR_SKIP(hf, "models/stories260K/hf");
  for (const auto& path : {bin, hf}) {
    backend_spec spec;
    spec.kind = "torch";
    spec.model = path.string();
    spec.torch.kv_budget_bytes = 1 << 20;
    expect_described_as_built(spec);
  }
}

TEST(model_identity, an_hf_config_is_read_without_the_weights) {
  CANOPY_SHARED_PATH_OR_SKIP(hf, "models/stories260K/hf");
  canopy::testing::scratch_dir dir;
  canopy::testing::write_bytes(dir.path() / "config.json",
                               canopy::testing::read_bytes(hf / "config.json"));
  const model_config config = load_model_config(dir.path());
  EXPECT_EQ(config.vocab_size, 512);
  EXPECT_EQ(config.context_length, load_model_config(hf).context_length);
  EXPECT_THROW(load_checkpoint(dir.path()), checkpoint_error) << "no weights there";
  EXPECT_THROW(load_model_config(dir.path() / "absent"), checkpoint_error);
}

} // namespace
