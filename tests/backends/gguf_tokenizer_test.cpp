// Tokenizers from GGUF metadata against the HF tokenizers library: Llama 3's and
// Qwen3's real tokenizer.json files written as llama.cpp's converter writes a
// byte-level BPE vocabulary (tokens by id, token types, merges, the pre-tokenizer's
// name), and Llama 2's as a SentencePiece vocabulary (each piece scored by the rank of
// the merge that makes it), must encode every vector of
// ../shared/oracle/tokenizer_json.json as the library does. A GGUF model's tokenizer
// is found in the file itself, and what is not served is refused by name.

#include <canopy/backends/checkpoints/gguf_file.hpp>
#include <canopy/backends/tokenizers/gguf_tokenizer.hpp>
#include <canopy/backends/tokenizers/tokenizer.hpp>

#include "gguf_writer.hpp"
#include "scratch_files.hpp"
#include "shared_fixtures.hpp"
#include "tokenizer_fixtures.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace {

using namespace canopy::backends;
using canopy::testing::gguf_writer;
using canopy::testing::ids_of;
using canopy::testing::scratch_dir;
using json = nlohmann::json;

/// Tokens by id, and each one's llama.cpp token type, of a tokenizer.json.
std::pair<std::vector<std::string>, std::vector<std::int32_t>>
tokens_of(const json& doc) {
  std::map<std::int64_t, std::pair<std::string, std::int32_t>> by_id;
  for (const auto& [piece, id] : doc.at("model").at("vocab").items())
    by_id[id.get<std::int64_t>()] = {piece, 1};
  for (const auto& t : doc.at("added_tokens"))
    by_id[t.at("id").get<std::int64_t>()] = {t.at("content").get<std::string>(),
                                             t.at("special").get<bool>() ? 3 : 4};
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  for (const auto& [id, token] : by_id) {
    EXPECT_EQ(id, static_cast<std::int64_t>(tokens.size())) << "ids without a gap";
    tokens.push_back(token.first);
    types.push_back(token.second);
  }
  return {tokens, types};
}

/// A GGUF file holding only the tokenizer `doc` describes, as llama.cpp's converter
/// writes it: "gpt2" with `pre`, or "llama" (SentencePiece) when `pre` is empty.
std::string gguf_tokenizer_file(const json& doc, const std::string& pre) {
  gguf_writer w;
  w.add("general.architecture", std::string("llama"));
  const auto [tokens, types] = tokens_of(doc);
  w.add("tokenizer.ggml.tokens", tokens);
  w.add("tokenizer.ggml.token_type", types);
  std::vector<std::string> merges;
  for (const auto& m : doc.at("model").at("merges"))
    merges.push_back(m.is_string()
                         ? m.get<std::string>()
                         : m[0].get<std::string>() + " " + m[1].get<std::string>());
  if (pre.empty()) {
    // SentencePiece merges the pair whose piece scores highest; the file's merges are
    // ranked: a piece scores minus the rank of the first merge that makes it.
    std::map<std::string, float> score;
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
      auto piece = merges[rank];
      piece.erase(piece.find(' '), 1);
      score.emplace(piece, -static_cast<float>(rank));
    }
    std::vector<float> scores;
    for (const auto& token : tokens) {
      const auto found = score.find(token);
      scores.push_back(found == score.end() ? -1e9f : found->second);
    }
    w.add("tokenizer.ggml.model", std::string("llama"));
    w.add("tokenizer.ggml.scores", scores);
    w.add("tokenizer.ggml.bos_token_id", std::uint32_t{1});
    w.add("tokenizer.ggml.eos_token_id", std::uint32_t{2});
    return w.bytes();
  }
  w.add("tokenizer.ggml.model", std::string("gpt2"));
  w.add("tokenizer.ggml.pre", pre);
  w.add("tokenizer.ggml.merges", merges);
  return w.bytes();
}

struct oracle_tokenizer {
  const char* name;
  const char* pre; // "" for SentencePiece
};

class gguf_tokenizer_oracle : public ::testing::TestWithParam<oracle_tokenizer> {};

TEST_P(gguf_tokenizer_oracle, every_vector_matches_the_hf_library) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle_file, "oracle/tokenizer_json.json");
  const auto oracle =
      canopy::testing::read_json(oracle_file).at("models").at(GetParam().name);
  CANOPY_SHARED_PATH_OR_SKIP(path, oracle.at("tokenizer").get<std::string>().substr(7));
  scratch_dir dir;
  canopy::testing::write_bytes(
      dir / "t.gguf",
      gguf_tokenizer_file(canopy::testing::read_json(path), GetParam().pre));
  EXPECT_EQ(find_tokenizer(dir / "t.gguf"), dir / "t.gguf");
  const auto tok = load_tokenizer(dir / "t.gguf");
  const bool sentencepiece = std::string(GetParam().pre).empty();
  int checked = 0;
  for (const auto& c : oracle.at("cases")) {
    const auto text = c.at("text").get<std::string>();
    // run.c's SentencePiece encoding does not cut control tokens out of the text.
    if (sentencepiece && text.find("<s>") != std::string::npos)
      continue;
    ++checked;
    EXPECT_EQ(tok->encode(text, false), ids_of(c.at("ids"))) << json(text).dump();
    EXPECT_EQ(tok->encode(text, true), ids_of(c.at("ids_with_special")))
        << json(text).dump();
    if (!sentencepiece) { // run.c keeps the leading space a piece spells
      EXPECT_EQ(tok->decode(ids_of(c.at("ids"))), c.at("decoded").get<std::string>())
          << json(text).dump();
    }
  }
  EXPECT_GT(checked, 20);
}

INSTANTIATE_TEST_SUITE_P(shared_tokenizers, gguf_tokenizer_oracle,
                         ::testing::Values(oracle_tokenizer{"llama2", ""},
                                           oracle_tokenizer{"llama3", "llama-bpe"},
                                           oracle_tokenizer{"qwen3", "qwen2"}),
                         [](const auto& info) { return std::string(info.param.name); });

// GPT-2's own vocabulary as a GGUF, under both names llama.cpp gives its pre-tokenizer
// ("gpt2", and "default" when the key is absent), against encoder.py's vectors.
TEST(gguf_tokenizer, gpt2s_vocabulary_matches_encoder_py_under_either_name) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle_file, "oracle/tokenizers.json");
  const auto models =
      oracle_file.parent_path().parent_path() / "models" / "gpt2-synthetic";
  json doc = {{"model",
               {{"vocab", canopy::testing::read_json(models / "vocab.json")},
                {"merges", json::array()}}},
              {"added_tokens", json::array()}};
  std::ifstream merges(models / "merges.txt");
  for (std::string line; std::getline(merges, line);)
    if (!line.empty() && line[0] != '#')
      doc["model"]["merges"].push_back(line);
  const auto cases = canopy::testing::read_json(oracle_file).at("gpt2_bpe").at("cases");
  for (const std::string pre : {"gpt2", "default"}) {
    scratch_dir dir;
    canopy::testing::write_bytes(dir / "t.gguf", gguf_tokenizer_file(doc, pre));
    const auto tok = load_tokenizer(dir / "t.gguf");
    for (const auto& c : cases) {
      const auto text =
          canopy::testing::from_hex(c.at("text_utf8_hex").get<std::string>());
      EXPECT_EQ(tok->encode(text, false), ids_of(c.at("ids")))
          << pre << " " << json(text).dump();
      EXPECT_EQ(tok->decode(ids_of(c.at("ids"))), text)
          << pre << " " << json(text).dump();
    }
  }
}

TEST(gguf_tokenizer, a_file_without_one_has_none) {
  scratch_dir dir;
  gguf_writer w;
  w.add("general.architecture", std::string("llama"));
  w.add("tokenizer.ggml.model", std::string("no_vocab"));
  canopy::testing::write_bytes(dir / "m.gguf", w.bytes());
  EXPECT_EQ(find_tokenizer(dir / "m.gguf"), std::filesystem::path());
  EXPECT_EQ(load_gguf_tokenizer(gguf_file(dir / "m.gguf")), nullptr);
  try {
    load_tokenizer(dir / "m.gguf");
    ADD_FAILURE() << "expected tokenizer_error";
  } catch (const tokenizer_error& e) {
    EXPECT_NE(std::string(e.what()).find("holds no tokenizer"), std::string::npos)
        << e.what();
  }
}

TEST(gguf_tokenizer, what_is_not_served_is_named) {
  scratch_dir dir;
  auto message = [&](const std::function<void(gguf_writer&)>& add) {
    gguf_writer w;
    add(w);
    canopy::testing::write_bytes(dir / "m.gguf", w.bytes());
    try {
      load_tokenizer(dir / "m.gguf");
    } catch (const tokenizer_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::vector<std::string> tokens{"a", "b", "ab"};
  EXPECT_NE(message([](gguf_writer& w) {
              w.add("tokenizer.ggml.model", std::string("t5"));
            }).find("tokenizer.ggml.model 't5' is not served"),
            std::string::npos);
  EXPECT_NE(message([&](gguf_writer& w) {
              w.add("tokenizer.ggml.model", std::string("gpt2"));
              w.add("tokenizer.ggml.tokens", tokens);
              w.add("tokenizer.ggml.merges", std::vector<std::string>{"a b"});
              w.add("tokenizer.ggml.pre", std::string("deepseek-llm"));
            }).find("tokenizer.ggml.pre 'deepseek-llm' is not served"),
            std::string::npos);
  EXPECT_NE(message([&](gguf_writer& w) {
              w.add("tokenizer.ggml.model", std::string("gpt2"));
              w.add("tokenizer.ggml.tokens", tokens);
            }).find("no tokenizer.ggml.merges"),
            std::string::npos);
  EXPECT_NE(message([&](gguf_writer& w) {
              w.add("tokenizer.ggml.model", std::string("llama"));
              w.add("tokenizer.ggml.tokens", tokens);
              w.add("tokenizer.ggml.scores", std::vector<float>{0, 0, 0});
            }).find("only 3 pieces"),
            std::string::npos);
  // A truncated file is a tokenizer_error too, naming the file and the defect.
  canopy::testing::write_bytes(dir / "cut.gguf", "GGUF\x03");
  try {
    load_tokenizer(dir / "cut.gguf");
    ADD_FAILURE() << "expected tokenizer_error";
  } catch (const tokenizer_error& e) {
    EXPECT_NE(std::string(e.what()).find("cut.gguf: truncated"), std::string::npos)
        << e.what();
  }
}

} // namespace
