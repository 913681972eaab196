// The tokenizer commands of `canopy` (tokenize, detokenize, vocab) and its refusals of
// bad input, run as a script runs them, against ../shared models and
// oracle/tokenizers.json.

#include "cli_runner.hpp"
#include "oracle.hpp"
#include "shared_fixtures.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using canopy::testing::describe;
using canopy::testing::run_canopy;

/// id -> hex column of `canopy vocab`, checking the line form on the way.
std::map<long, std::string> parse_vocab(const std::string& out, std::size_t& lines) {
  std::map<long, std::string> hex;
  std::istringstream in(out);
  std::string line;
  lines = 0;
  while (std::getline(in, line)) {
    const auto tab = line.find('\t');
    EXPECT_NE(tab, std::string::npos) << "line " << lines << ": " << line;
    EXPECT_EQ(std::stol(line.substr(0, tab)), static_cast<long>(lines));
    hex[static_cast<long>(lines)] = line.substr(tab + 1);
    ++lines;
  }
  return hex;
}

/// Every entry of tokenizers.json token_bytes[table]: control tokens print "-".
void expect_known_bytes(const std::map<long, std::string>& got, const char* table) {
  CANOPY_SHARED_PATH_OR_SKIP(file, "oracle/tokenizers.json");
  const auto doc = canopy::testing::read_json(file);
  for (const auto& entry : doc.at("token_bytes").at(table)) {
    const long id = entry.at("id").get<long>();
    const bool control = entry.value("special", false);
    const std::string want = control ? "-" : entry.at("hex").get<std::string>();
    ASSERT_TRUE(got.count(id)) << table << " id " << id;
    EXPECT_EQ(got.at(id), want) << table << " id " << id;
  }
}

/// `canopy ARGS...` exits 0 having printed exactly `out`.
void expect_prints(const std::vector<std::string>& args, const std::string& out) {
  const auto r = run_canopy(args);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, out);
}

/// `canopy ARGS...` (a vocab command) lists `size` ids, with tokenizers.json's bytes.
void expect_vocab(const std::vector<std::string>& args, std::size_t size,
                  const char* table) {
  const auto r = run_canopy(args);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  std::size_t lines = 0;
  const auto hex = parse_vocab(r.out, lines);
  EXPECT_EQ(lines, size);
  expect_known_bytes(hex, table);
}

TEST(cli_tokenizer, tokenize_stories_text_and_json) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  auto r = run_canopy({"tokenize", "--model", model, "--text", "Once upon a time"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, "1,403,407,261,378\n");
  r = run_canopy(
      {"tokenize", "--model", model, "--text", "Hello\nworld", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(nlohmann::json::parse(r.out),
            nlohmann::json::parse(R"({"ids": [1, 346, 306, 414, 13, 424, 304, 341]})"));
}

TEST(cli_tokenizer, tokenize_gpt2) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/gpt2-synthetic");
  const auto r = run_canopy({"tokenize", "--model", model, "--text", " Hello world"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, "18435,995\n");
}

TEST(cli_tokenizer, a_tokenizer_alone_needs_no_model) {
  CANOPY_SHARED_PATH_OR_SKIP(gpt2, "models/gpt2-synthetic");
  CANOPY_SHARED_PATH_OR_SKIP(tok512, "models/stories260K/tok512.bin");
  expect_prints({"tokenize", "--tokenizer", gpt2, "--text", " Hello world"},
                "18435,995\n");
  expect_prints({"tokenize", "--tokenizer", tok512, "--text", "Once upon a time"},
                "1,403,407,261,378\n");
}

TEST(cli_tokenizer, the_mock_with_a_tokenizer_has_its_vocabulary) {
  // As genlm's MockAsyncLM(tokenizer): rows of the tokenizer's size, every id's bytes.
  CANOPY_SHARED_PATH_OR_SKIP(gpt2, "models/gpt2-synthetic");
  expect_vocab({"vocab", "--backend", "mock", "--tokenizer", gpt2}, 50257, "gpt2");
  expect_prints(
      {"detokenize", "--backend", "mock", "--tokenizer", gpt2, "--tokens", "15496,995"},
      "Hello world");
}

TEST(cli_tokenizer, detokenize_writes_exact_bytes_without_newline) {
  CANOPY_SHARED_PATH_OR_SKIP(stories, "models/stories260K/stories260K.bin");
  CANOPY_SHARED_PATH_OR_SKIP(gpt2, "models/gpt2-synthetic");
  // "café 😊 naïve" (an oracle decode case): BOS, the dropped space after it,
  // multi-byte characters and byte fallback. (CliSample checks plain text too.)
  expect_prints({"detokenize", "--model", stories, "--tokens",
                 "1,280,412,431,485,410,243,162,155,141,297,412,198,178,360"},
                "caf\xc3\xa9 \xf0\x9f\x98\x8a na\xc3\xafve");
  expect_prints({"detokenize", "--model", gpt2, "--tokens", "15496,995"}, "Hello world");
}

TEST(cli_tokenizer, vocab_stories_lists_every_id_with_its_bytes) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  expect_vocab({"vocab", "--model", model}, 512, "llama2c_tok512");
}

TEST(cli_tokenizer, vocab_gpt2_lists_every_id_with_its_bytes) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/gpt2-synthetic");
  expect_vocab({"vocab", "--model", model}, 50257, "gpt2");
}

// -- bad input: exit 2 and a message naming the problem -------------------------------

void expect_usage_error(const std::vector<std::string>& args, const std::string& names) {
  const auto r = run_canopy(args);
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_NE(r.err.find(names), std::string::npos)
      << "stderr should name '" << names << "': " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(cli_errors, unknown_flag) {
  expect_usage_error({"logprobs", "--tokens", "1", "--bogus", "3"},
                     "unknown flag --bogus");
  // make-model builds no engine, so engine settings are unknown flags there.
  expect_usage_error({"make-model", "--arch", "llama", "--vocab_size", "3"},
                     "unknown flag --vocab_size");
}

TEST(cli_errors, both_tokens_and_text) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  expect_usage_error({"logprobs", "--model", model, "--tokens", "1", "--text", "Once"},
                     "--tokens or --text, not both");
  expect_usage_error({"sample", "--model", model, "--max-tokens", "2"},
                     "--tokens IDS or --text TEXT");
}

TEST(cli_errors, token_id_out_of_range) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  expect_usage_error({"logprobs", "--model", model, "--tokens", "1,512"},
                     "token_out_of_range: token id 512");
  expect_usage_error({"detokenize", "--model", model, "--tokens", "1,600"},
                     "token_out_of_range: token id 600");
}

TEST(cli_errors, text_on_model_without_tokenizer) {
  canopy::testing::scratch_dir dir;
  const auto made = run_canopy({"make-model", "--arch", "llama", "--hidden", "16",
                                "--layers", "1", "--heads", "2", "--vocab", "32",
                                "--context", "16", "--out", dir.path().string()});
  ASSERT_EQ(made.exit_code, 0) << describe(made);
  expect_usage_error({"logprobs", "--model", dir.path().string(), "--text", "Once"},
                     "no_tokenizer");
  expect_usage_error(
      {"sample", "--model", dir.path().string(), "--text", "Once", "--max-tokens", "2"},
      "has no tokenizer");
}

TEST(cli_errors, make_model_refuses_an_impossible_shape) {
  canopy::testing::scratch_dir dir;
  expect_usage_error({"make-model", "--arch", "llama", "--hidden", "30", "--layers", "1",
                      "--heads", "4", "--out", dir.path().string()},
                     "hidden");
  expect_usage_error({"make-model", "--arch", "mamba", "--hidden", "32", "--layers", "1",
                      "--heads", "4", "--out", dir.path().string()},
                     "--arch: unknown 'mamba'");
}

} // namespace
