// BOS and EOS ids from a model's files: config.json, generation_config.json and
// tokenizer_config.json (through the tokenizer) in transformers' order, a llama2.c .bin's
// convention, and malformed files named.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/tokenizers/hf_tokenizer.hpp>
#include <canopy/backends/tokenizers/special_tokens.hpp>

#include "tokenizer_fixtures.hpp"

#include <gtest/gtest.h>

namespace {

using canopy::backends::checkpoint_error;
using canopy::backends::hf_tokenizer;
using canopy::backends::read_special_tokens;
using canopy::cache::token_id;
using canopy::testing::scratch_dir;

TEST(special_tokens,
     generation_config_comes_first_then_config_then_the_tokenizer_config) {
  CANOPY_SHARED_PATH_OR_SKIP(tokenizer_file, "models/tokenizers/llama2/tokenizer.json");
  const hf_tokenizer tokenizer(tokenizer_file);
  scratch_dir dir;
  dir.write("config.json", R"({"bos_token_id": 1, "eos_token_id": [2, 7]})");
  dir.write("generation_config.json", R"({"eos_token_id": [9, 2], "bos_token_id": 5})");
  // "<s>" is id 1 in Llama 2's tokenizer, "<unk>" 0.
  dir.write(
      "tokenizer_config.json",
      R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "<unk>"})");
  const auto found = read_special_tokens(dir.path(), 32000, &tokenizer);
  EXPECT_EQ(found.bos, 1) << "config.json's bos_token_id wins";
  EXPECT_EQ(found.eos, (std::vector<token_id>{9, 2, 7, 0}));
}

TEST(special_tokens,
     the_tokenizer_config_alone_is_enough_and_unknown_names_are_left_out) {
  CANOPY_SHARED_PATH_OR_SKIP(tokenizer_file, "models/tokenizers/llama3/tokenizer.json");
  const hf_tokenizer tokenizer(tokenizer_file);
  scratch_dir dir;
  dir.write("config.json", R"({"eos_token_id": null})");
  dir.write("tokenizer_config.json",
            R"({"bos_token": "<|begin_of_text|>", "eos_token": "<|not a token|>"})");
  const auto found = read_special_tokens(dir.path(), 128256, &tokenizer);
  EXPECT_EQ(found.bos, 128000);
  EXPECT_TRUE(found.eos.empty());
  EXPECT_TRUE(read_special_tokens(dir.path(), 128256, nullptr).eos.empty())
      << "without a tokenizer no name can be resolved";
  EXPECT_FALSE(read_special_tokens(dir.path(), 128256, nullptr).bos);
}

TEST(special_tokens, a_llama2c_file_has_its_formats_ids_and_no_model_has_none) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  const auto found = read_special_tokens(model, 512, nullptr);
  EXPECT_EQ(found.bos, 1);
  EXPECT_EQ(found.eos, (std::vector<token_id>{2}));
  const auto none = read_special_tokens({}, 512, nullptr);
  EXPECT_FALSE(none.bos);
  EXPECT_TRUE(none.eos.empty());
}

TEST(special_tokens, malformed_files_and_ids_outside_the_vocabulary_are_named) {
  scratch_dir dir;
  const auto config = dir.write("config.json", R"({"eos_token_id": [2, 600]})");
  try {
    read_special_tokens(dir.path(), 512, nullptr);
    ADD_FAILURE() << "an EOS id past the vocabulary was accepted";
  } catch (const checkpoint_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(config.string()), std::string::npos) << message;
    EXPECT_NE(message.find("\"eos_token_id\" 600"), std::string::npos) << message;
  }
  dir.write("config.json", "{}");
  const auto generation = dir.write("generation_config.json", "{nope");
  try {
    read_special_tokens(dir.path(), 512, nullptr);
    ADD_FAILURE() << "malformed JSON was accepted";
  } catch (const checkpoint_error& e) {
    EXPECT_NE(std::string(e.what()).find(generation.string() + ": not valid JSON"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
