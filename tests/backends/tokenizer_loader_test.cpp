// load_tokenizer / find_tokenizer on the shared model layout, and malformed tokenizer
// files: each must give a tokenizer_error naming the file and the defect, never a crash.
#include <canopy/backends/tokenizers/byte_level_alphabet.hpp>
#include <canopy/backends/tokenizers/sentencepiece_tokenizer.hpp>
#include <canopy/backends/tokenizers/tokenizer.hpp>

#include "shared_fixtures.hpp"
#include "tokenizer_fixtures.hpp"

#include <gmock/gmock.h>

namespace {

using canopy::backends::byte_level_piece;
using canopy::backends::find_tokenizer;
using canopy::backends::load_tokenizer;
using canopy::backends::tokenizer_error;
using namespace canopy::testing;
using ::testing::AllOf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

fs::path models_dir(const fs::path& oracle_file) {
  return oracle_file.parent_path().parent_path() / "models";
}

// Expects load_tokenizer(path) to throw tokenizer_error whose message names `file` (its
// file name) and contains `what`.
void expect_rejected(const fs::path& path, const fs::path& file,
                     const std::string& what) {
  try {
    (void)load_tokenizer(path);
    ADD_FAILURE() << "accepted " << path << " (expected: " << what << ")";
  } catch (const tokenizer_error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(file.filename().string()), HasSubstr(what)));
  }
}

TEST(find_tokenizer, shared_model_layout) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const fs::path models = models_dir(oracle);
  EXPECT_EQ(find_tokenizer(models / "stories260K" / "stories260K.bin"),
            models / "stories260K" / "tok512.bin");
  EXPECT_EQ(find_tokenizer(models / "aidreams260K" / "aidreams260K.bin"),
            models / "aidreams260K" / "tok512.bin");
  EXPECT_EQ(find_tokenizer(models / "gpt2-synthetic"), models / "gpt2-synthetic");
  EXPECT_EQ(find_tokenizer(models / "stories260K" / "hf"), fs::path());
  EXPECT_EQ(find_tokenizer(models / "stories260K"),
            models / "stories260K" / "tok512.bin");
  EXPECT_EQ(find_tokenizer(models / "gpt2-synthetic" / "model.safetensors"), fs::path());
  EXPECT_EQ(find_tokenizer(models / "no-such-model"), fs::path());
}

TEST(find_tokenizer, preference_order_and_never_the_model_itself) {
  const scratch_dir dir;
  dir.write("hf/tokenizer.bin", "x");
  dir.write("hf/tokenizer.model", "x");
  EXPECT_EQ(find_tokenizer(dir.path() / "hf"), dir.path() / "hf" / "tokenizer.model");
  dir.write("hf/vocab.json", "{}");
  EXPECT_EQ(find_tokenizer(dir.path() / "hf"),
            dir.path() / "hf" / "tokenizer.model"); // no merges.txt
  dir.write("hf/merges.txt", "");
  EXPECT_EQ(find_tokenizer(dir.path() / "hf"), dir.path() / "hf");
  // A llama2.c model file that is itself named tokenizer.bin is not its own tokenizer.
  const auto model = dir.write("l/tokenizer.bin", "x");
  EXPECT_EQ(find_tokenizer(model), fs::path());
  dir.write("l/tok512.bin", "x");
  EXPECT_EQ(find_tokenizer(model), dir.path() / "l" / "tok512.bin");
}

TEST(load_tokenizer, dispatches_on_the_shared_files) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const fs::path models = models_dir(oracle);
  EXPECT_EQ(load_tokenizer(models / "gpt2-synthetic")->kind(), "gpt2-bpe");
  EXPECT_EQ(load_tokenizer(models / "gpt2-synthetic" / "vocab.json")->kind(), "gpt2-bpe");
  EXPECT_EQ(load_tokenizer(models / "stories260K" / "tok512.bin")->kind(), "llama2c");
  EXPECT_EQ(load_tokenizer(models / "stories260K")->kind(), "llama2c");
  const auto aidreams =
      load_tokenizer(find_tokenizer(models / "aidreams260K" / "aidreams260K.bin"));
  EXPECT_EQ(aidreams->byte_vocab().size(), 512u);
  EXPECT_EQ(aidreams->encode("").front(), 1);
  expect_rejected(models / "stories260K" / "hf", "hf", "no tokenizer in this directory");
}

TEST(find_tokenizer, tokenizer_json_comes_first_in_an_hf_directory) {
  CANOPY_SHARED_PATH_OR_SKIP(llama3, "models/tokenizers/llama3");
  EXPECT_EQ(find_tokenizer(llama3), llama3 / "tokenizer.json");
  EXPECT_EQ(load_tokenizer(llama3)->kind(), "tokenizer.json");
  const scratch_dir dir; // beside a GPT-2 pair too
  fs::copy_file(llama3 / "tokenizer.json", dir / "tokenizer.json");
  dir.write("vocab.json", "{}");
  dir.write("merges.txt", "");
  EXPECT_EQ(find_tokenizer(dir.path()), dir / "tokenizer.json");
}

TEST(load_tokenizer, missing_or_unknown_files) {
  const scratch_dir dir;
  expect_rejected(dir.path() / "nothing.bin", "nothing.bin", "no such tokenizer file");
  expect_rejected(dir.write("tokenizer.txt", "{}"), "tokenizer.txt",
                  "unrecognized tokenizer file");
  expect_rejected(dir.write("tokenizer.json", "{}"), "tokenizer.json",
                  "\"added_tokens\" is missing");
  expect_rejected(dir.write("tokenizer.json", "{nope"), "tokenizer.json",
                  "not valid JSON");
  expect_rejected(dir.write("only/vocab.json", "{}"), "vocab.json",
                  "needs both vocab.json and merges.txt");
}

TEST(load_tokenizer, truncated_tok512) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const std::string bytes = read_bytes(models_dir(oracle) / "stories260K" / "tok512.bin");
  ASSERT_EQ(bytes.size(), 6227u);
  const scratch_dir dir;
  expect_rejected(dir.write("empty.bin", ""), "empty.bin",
                  "too short for the int32 max_token_length");
  expect_rejected(dir.write("head.bin", bytes.substr(0, 3)), "head.bin", "truncated");
  // Cut inside an entry header, inside a piece, and one byte short of the end.
  expect_rejected(dir.write("a.bin", bytes.substr(0, 4 + 5)), "a.bin",
                  "truncated: entry of id 0");
  expect_rejected(dir.write("b.bin", bytes.substr(0, 4 + 8 + 2)), "b.bin",
                  "truncated: piece of id 0");
  expect_rejected(dir.write("c.bin", bytes.substr(0, bytes.size() - 1)), "c.bin",
                  "truncated: piece of id 511");
  // Cut exactly between entries: a vocabulary too small for byte fallback.
  expect_rejected(dir.write("d.bin", bytes.substr(0, 4 + 8 + 5)), "d.bin",
                  "only 1 pieces");
}

std::string le32(std::int32_t v) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i)
    out[static_cast<std::size_t>(i)] =
        static_cast<char>((static_cast<std::uint32_t>(v) >> (8 * i)) & 0xFF);
  return out;
}

TEST(load_tokenizer, bad_llama2c_lengths) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const std::string bytes = read_bytes(models_dir(oracle) / "stories260K" / "tok512.bin");
  const scratch_dir dir;
  std::string bad = bytes;
  bad.replace(0, 4, le32(0));
  expect_rejected(dir.write("zero_max.bin", bad), "zero_max.bin",
                  "max_token_length is 0");
  bad = bytes;
  bad.replace(4 + 4, 4, le32(-5)); // length of id 0
  expect_rejected(dir.write("negative.bin", bad), "negative.bin",
                  "id 0 has piece length -5");
  bad = bytes;
  bad.replace(4 + 4, 4, le32(1 << 30));
  expect_rejected(dir.write("huge.bin", bad), "huge.bin",
                  "id 0 has piece length 1073741824");
  bad = bytes;
  bad.replace(4 + 4, 4,
              le32(9)); // above max_token_length 7, though still inside the file
  expect_rejected(dir.write("long.bin", bad), "long.bin",
                  "outside 0..max_token_length (7)");
  // Id 3 must be <0x00> for byte fallback.
  bad = bytes;
  const std::size_t id3 = bad.find("<0x00>");
  ASSERT_NE(id3, std::string::npos);
  bad[id3 + 4] = '7';
  expect_rejected(dir.write("bytes.bin", bad), "bytes.bin",
                  "id 3 is the piece \"<0x07>\"");
}

// A well-formed byte-level vocab.json object (256 byte pieces), to break one thing at a
// time.
nlohmann::json byte_vocab_json() {
  nlohmann::json v = nlohmann::json::object();
  for (int b = 0; b < 256; ++b)
    v[byte_level_piece(std::string(1, static_cast<char>(b)))] = b;
  return v;
}

TEST(load_tokenizer, malformed_vocab_json) {
  const scratch_dir dir;
  const auto case_dir = [&](const std::string& name, const std::string& vocab,
                            const std::string& merges = "#version: 0.2\n") {
    dir.write(name + "/vocab.json", vocab);
    dir.write(name + "/merges.txt", merges);
    return dir.path() / name;
  };
  // load_tokenizer names the file: check "vocab.json" plus the directory.
  expect_rejected(case_dir("notjson", "{\"a\": 1"), "vocab.json", "not valid JSON");
  expect_rejected(case_dir("array", "[1, 2]"), "vocab.json",
                  "expected a non-empty JSON object");
  expect_rejected(case_dir("empty", "{}"), "vocab.json",
                  "expected a non-empty JSON object");
  auto v = byte_vocab_json();
  v["!"] = "zero";
  expect_rejected(case_dir("string", v.dump()), "vocab.json",
                  "the id of piece \"!\" is not an integer");
  v = byte_vocab_json();
  v["!"] = 1.5;
  expect_rejected(case_dir("float", v.dump()), "vocab.json", "is not an integer");
  v = byte_vocab_json();
  v["!"] = -1;
  expect_rejected(case_dir("negative", v.dump()), "vocab.json",
                  "the id -1 of piece \"!\" is outside 0..255");
  v = byte_vocab_json();
  v["!"] = 1000;
  expect_rejected(case_dir("sparse", v.dump()), "vocab.json", "is outside 0..255");
  v = byte_vocab_json();
  v["hello"] = 5; // 257 pieces, id 5 twice
  expect_rejected(case_dir("duplicate", v.dump()), "vocab.json", "duplicate id 5");
  v = byte_vocab_json();
  v.erase(byte_level_piece("\n"));
  v["x1"] = 10;
  expect_rejected(case_dir("nobyte", v.dump()), "vocab.json", "no piece for byte 0x0A");
}

TEST(load_tokenizer, malformed_merges_txt) {
  const scratch_dir dir;
  auto v = byte_vocab_json();
  v["ab"] = 256;
  const auto case_dir = [&](const std::string& name, const std::string& merges) {
    dir.write(name + "/vocab.json", v.dump());
    dir.write(name + "/merges.txt", merges);
    return dir.path() / name;
  };
  EXPECT_EQ(load_tokenizer(case_dir("good", "#version: 0.2\na b\n"))->encode("ab"),
            std::vector<canopy::cache::token_id>{256});
  EXPECT_EQ(load_tokenizer(case_dir("crlf", "a b\r\n\r\n"))->encode("ab"),
            std::vector<canopy::cache::token_id>{256});
  expect_rejected(case_dir("one", "#version: 0.2\nab\n"), "merges.txt",
                  "line 2: expected two pieces");
  expect_rejected(case_dir("three", "a b c\n"), "merges.txt",
                  "line 1: expected two pieces");
  expect_rejected(case_dir("unknown", "a b\nzz b\n"), "merges.txt",
                  "line 2: left piece \"zz\" is not in vocab.json");
  expect_rejected(case_dir("result", "a c\n"), "merges.txt",
                  "line 1: merged piece \"ac\" is not in vocab.json");
}

TEST(load_tokenizer, sentence_piece_model_files) {
  const scratch_dir dir;
  const auto garbage =
      dir.write("tokenizer.model", "this is not a protobuf \x01\x02\xff");
  if (canopy::backends::sentencepiece_supported())
    expect_rejected(garbage, "tokenizer.model", "not a SentencePiece model");
  else // not built, or built but its plugin cannot be loaded here
    expect_rejected(garbage, "tokenizer.model", "SentencePiece .model support");
  expect_rejected(dir.path(), "tokenizer.model",
                  ""); // the directory rule finds the same file
}

} // namespace
