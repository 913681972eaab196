// A tokenizer's chat templates as transformers finds them: tokenizer_config.json's
// "chat_template" (one, or a named list), chat_template.jinja over the config's default,
// and malformed ones named with their file.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/tokenizers/chat_template.hpp>

#include "tokenizer_fixtures.hpp"

#include <gtest/gtest.h>

namespace {

using canopy::backends::chat_templates;
using canopy::backends::checkpoint_error;
using canopy::backends::read_chat_templates;
using canopy::testing::scratch_dir;

/// The message of the checkpoint_error that reading `dir` throws ("" if none).
std::string rejection(const scratch_dir& dir) {
  try {
    read_chat_templates(dir.path());
  } catch (const checkpoint_error& e) {
    return e.what();
  }
  return {};
}

TEST(chat_template, a_lone_template_is_the_default_and_a_list_keeps_its_names) {
  scratch_dir dir;
  dir.write("tokenizer_config.json", R"({"chat_template": "{{ messages[0].content }}"})");
  EXPECT_EQ(read_chat_templates(dir.path()),
            (chat_templates{{"default", "{{ messages[0].content }}"}}));
  dir.write("tokenizer_config.json", R"({"chat_template": [
    {"name": "default", "template": "A"}, {"name": "tool_use", "template": "B"}]})");
  EXPECT_EQ(read_chat_templates(dir.path()),
            (chat_templates{{"default", "A"}, {"tool_use", "B"}}));
}

TEST(chat_template, chat_template_jinja_replaces_the_configs_default) {
  scratch_dir dir;
  dir.write("tokenizer_config.json", R"({"chat_template": [
    {"name": "default", "template": "A"}, {"name": "rag", "template": "C"}]})");
  dir.write("chat_template.jinja", "{%- for m in messages %}{{ m.role }}{% endfor %}\n");
  EXPECT_EQ(
      read_chat_templates(dir.path()),
      (chat_templates{{"default", "{%- for m in messages %}{{ m.role }}{% endfor %}\n"},
                      {"rag", "C"}}));
}

TEST(chat_template, a_folder_without_one_has_none) {
  scratch_dir dir;
  EXPECT_TRUE(read_chat_templates(dir.path()).empty()) << "no files";
  dir.write("tokenizer_config.json", R"({"bos_token": "<s>", "chat_template": null})");
  EXPECT_TRUE(read_chat_templates(dir.path()).empty()) << "a null template";
  EXPECT_TRUE(read_chat_templates({}).empty()) << "no folder";
}

TEST(chat_template, the_real_llama3_and_qwen3_configs_have_one) {
  CANOPY_SHARED_PATH_OR_SKIP(llama3, "models/tokenizers/llama3/tokenizer.json");
  CANOPY_SHARED_PATH_OR_SKIP(qwen3, "models/tokenizers/qwen3/tokenizer.json");
  const auto llama = read_chat_templates(llama3.parent_path());
  ASSERT_EQ(llama.size(), 1u);
  EXPECT_NE(llama.at("default").find("<|start_header_id|>"), std::string::npos);
  const auto qwen = read_chat_templates(qwen3.parent_path());
  ASSERT_EQ(qwen.size(), 1u);
  EXPECT_NE(qwen.at("default").find("<|im_start|>"), std::string::npos);
  EXPECT_TRUE(read_chat_templates(llama3.parent_path().parent_path() / "llama2").empty())
      << "Llama 2's tokenizer_config.json has no chat template";
}

TEST(chat_template, malformed_templates_are_named_with_their_file) {
  scratch_dir dir;
  const auto config =
      dir.write("tokenizer_config.json", R"({"chat_template": 7})").string();
  auto message = rejection(dir);
  EXPECT_NE(message.find(config + ": \"chat_template\" is neither a string nor a list"),
            std::string::npos)
      << message;
  dir.write("tokenizer_config.json", R"({"chat_template": [{"name": "a"}]})");
  message = rejection(dir);
  EXPECT_NE(
      message.find("has an entry that is not {\"name\": string, \"template\": string}"),
      std::string::npos)
      << message;
  dir.write("tokenizer_config.json", R"({"chat_template": [
    {"name": "a", "template": "x"}, {"name": "a", "template": "y"}]})");
  message = rejection(dir);
  EXPECT_NE(message.find("names \"a\" twice"), std::string::npos) << message;
  dir.write("tokenizer_config.json", "[1, 2]");
  message = rejection(dir);
  EXPECT_NE(message.find(config + ": not a JSON object"), std::string::npos) << message;
}

} // namespace
