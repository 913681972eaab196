// llama2.c .bin files built from synthetic weights: they load to the same canonical
// tensors (interleaved RoPE rows untouched), and every malformed header or size is a
// checkpoint_error naming the file and what is wrong.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/llama2c_checkpoint.hpp>

#include "checkpoint_test_support.hpp"

#include <gtest/gtest.h>

namespace {

using namespace canopy::backends;
using canopy::testing::encode_llama2c;
using canopy::testing::le32;
using canopy::testing::read_bytes;
using canopy::testing::scratch_dir;
using canopy::testing::small_checkpoint;
using canopy::testing::view_bytes;
using canopy::testing::write_bytes;

void expect_same_tensors(const checkpoint& a, const checkpoint& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, view] : a.tensors) {
    ASSERT_EQ(b.tensors.count(name), 1u) << name;
    EXPECT_EQ(view.shape, b.tensors.at(name).shape) << name;
    EXPECT_EQ(view_bytes(view), view_bytes(b.tensors.at(name))) << name;
  }
}

TEST(llama2c_checkpoint, tied_file_loads_to_canonical_tensors) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  write_bytes(dir / "m.bin", encode_llama2c(original));
  const checkpoint loaded = load_checkpoint(dir / "m.bin");
  EXPECT_EQ(loaded.source, (dir / "m.bin").string());
  const model_config& c = loaded.config;
  EXPECT_EQ(c.arch, architecture::llama);
  EXPECT_EQ(c.hidden_size, 16);
  EXPECT_EQ(c.intermediate_size, 24);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.vocab_size, 40);
  EXPECT_EQ(c.context_length, 12);
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope, rope_pairs::interleaved);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  expect_same_tensors(loaded, original);
}

TEST(llama2c_checkpoint, negative_vocab_means_an_untied_classifier_at_the_end) {
  checkpoint original = small_checkpoint(architecture::llama);
  original.config.tied_embeddings = false;
  // A different matrix, so a loader reading the embedding for the head would fail.
  const checkpoint other = small_checkpoint(architecture::llama, 99);
  original.tensors["lm_head.weight"] = other.tensors.at("model.embed_tokens.weight");
  scratch_dir dir;
  const std::string bytes = encode_llama2c(original);
  write_bytes(dir / "m.bin", bytes);
  const checkpoint loaded = load_checkpoint(dir / "m.bin");
  EXPECT_FALSE(loaded.config.tied_embeddings);
  EXPECT_EQ(loaded.config.vocab_size, 40);
  const std::string head = view_bytes(loaded.tensors.at("lm_head.weight"));
  EXPECT_EQ(head, bytes.substr(bytes.size() - head.size()));
  expect_same_tensors(loaded, original);
}

TEST(llama2c_checkpoint, truncated_file_is_named) {
  scratch_dir dir;
  std::string bytes = encode_llama2c(small_checkpoint(architecture::llama));
  bytes.resize(bytes.size() - 4);
  write_bytes(dir / "m.bin", bytes);
  EXPECT_CHECKPOINT_ERROR(
      load_checkpoint(dir / "m.bin"),
      {(dir / "m.bin").string(), "truncated", std::to_string(bytes.size()) + " bytes"});
}

TEST(llama2c_checkpoint, trailing_bytes_are_named) {
  scratch_dir dir;
  write_bytes(dir / "m.bin",
              encode_llama2c(small_checkpoint(architecture::llama)) + "xxxx");
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir / "m.bin"),
                          {(dir / "m.bin").string(), "trailing bytes"});
}

TEST(llama2c_checkpoint, file_shorter_than_the_header_is_named) {
  scratch_dir dir;
  write_bytes(dir / "m.bin", le32(64) + le32(172));
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(dir / "m.bin"),
                          {(dir / "m.bin").string(), "28-byte"});
}

/// The header fields: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab, seq_len.
std::string header(std::initializer_list<std::int32_t> fields) {
  std::string out;
  for (std::int32_t v : fields)
    out += le32(v);
  return out + std::string(64, '\0');
}

TEST(llama2c_checkpoint, bad_header_values_are_named) {
  struct bad {
    std::string bytes;
    std::vector<std::string> expected;
  };
  const std::vector<bad> cases{
      {header({0, 24, 2, 4, 2, 40, 12}), {"dim = 0", "positive"}},
      {header({16, -24, 2, 4, 2, 40, 12}), {"hidden_dim = -24"}},
      {header({16, 24, 0, 4, 2, 40, 12}), {"n_layers = 0"}},
      {header({16, 24, 2, 4, 0, 40, 12}), {"n_kv_heads = 0"}},
      {header({16, 24, 2, 4, 2, 0, 12}), {"vocab_size = 0"}},
      {header({16, 24, 2, 4, 2, 40, -1}), {"seq_len = -1"}},
      {header({16, 24, 2, 5, 5, 40, 12}), {"dim 16", "n_heads 5"}},
      {header({16, 24, 2, 4, 3, 40, 12}), {"n_heads 4", "n_kv_heads 3"}},
      {header({16, 24, 2, 4, 8, 40, 12}), {"n_heads 4", "n_kv_heads 8"}},
      {header({12, 24, 2, 4, 4, 40, 12}), {"head size", "odd"}},
      {header({0x616b3432, 2, 0, 0, 0, 0, 0}), {"version 2", "version-0"}},
      {"PK\x03\x04" + header({1, 1, 1, 1, 1, 1}), {"zip"}},
      // Values as large as int32 allows: the size arithmetic overflows, checked.
      {header({1 << 30, 1 << 30, 65536, 1 << 29, 1 << 29, -(1 << 30), 1 << 30}),
       {"overflow"}},
      {header({1 << 14, 1 << 14, 8, 1 << 4, 1 << 4, 1 << 14, 1 << 14}),
       {"implies", "truncated"}},
  };
  for (const bad& test : cases) {
    scratch_dir dir;
    write_bytes(dir / "m.bin", test.bytes);
    std::vector<std::string> expected = test.expected;
    expected.push_back((dir / "m.bin").string());
    try {
      load_llama2c_checkpoint(dir / "m.bin");
      ADD_FAILURE() << "no error for case " << test.expected.front();
    } catch (const checkpoint_error& e) {
      for (const std::string& part : expected)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
            << "message lacks \"" << part << "\": " << e.what();
    }
  }
}

TEST(llama2c_checkpoint, directory_or_unreadable_path_is_named) {
  scratch_dir dir;
  EXPECT_CHECKPOINT_ERROR(load_llama2c_checkpoint(dir.path()),
                          {dir.path().string(), "not a regular file"});
}

} // namespace
