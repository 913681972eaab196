// HF tokenizer.json against the HF tokenizers library itself: every vector of
// ../shared/oracle/tokenizer_json.json (Llama 2, Llama 3 and Qwen3's real files: ids,
// ids with special tokens, decoded text) and of hf_tokenizer_vectors/ (small files using
// what those three do not: Metaspace, every Split behaviour, unk, NFKC, lstrip/rstrip
// and normalized added tokens, Strip), the byte vocabulary spelling each encoding's
// text, and the refusal of every component this reader does not implement.

#include <canopy/backends/tokenizers/byte_level_alphabet.hpp>
#include <canopy/backends/tokenizers/hf_tokenizer.hpp>

#include "tokenizer_fixtures.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>

namespace {

using canopy::backends::hf_tokenizer;
using canopy::backends::tokenizer_error;
using canopy::cache::token_id;
using canopy::testing::ids_of;
using json = nlohmann::json;

class hf_tokenizer_oracle : public ::testing::TestWithParam<const char*> {};

TEST_P(hf_tokenizer_oracle, every_vector_matches_the_hf_library) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle_file, "oracle/tokenizer_json.json");
  const auto oracle = canopy::testing::read_json(oracle_file).at("models").at(GetParam());
  // Paths in the oracle start at the repository root: "shared/models/...".
  CANOPY_SHARED_PATH_OR_SKIP(path, oracle.at("tokenizer").get<std::string>().substr(7));
  const hf_tokenizer tok(path);
  for (const auto& c : oracle.at("cases")) {
    const auto text = c.at("text").get<std::string>();
    EXPECT_EQ(tok.encode(text, false), ids_of(c.at("ids"))) << json(text).dump();
    EXPECT_EQ(tok.encode(text, true), ids_of(c.at("ids_with_special")))
        << json(text).dump();
    EXPECT_EQ(tok.encode(text), ids_of(c.at("ids_with_special")))
        << "the model's convention";
    EXPECT_EQ(tok.decode(ids_of(c.at("ids"))), c.at("decoded").get<std::string>())
        << json(text).dump();
  }
}

TEST_P(hf_tokenizer_oracle, the_byte_vocabulary_spells_every_encoding_of_plain_text) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle_file, "oracle/tokenizer_json.json");
  const auto oracle = canopy::testing::read_json(oracle_file).at("models").at(GetParam());
  CANOPY_SHARED_PATH_OR_SKIP(path, oracle.at("tokenizer").get<std::string>().substr(7));
  const hf_tokenizer tok(path);
  const auto& vocab = tok.byte_vocab();
  // Llama 2's normalizer puts a space (U+2581) before the text; the others keep it as is
  // (these texts are already NFC, Qwen3's normal form).
  const bool prepends_space = std::string(GetParam()) == "llama2";
  int checked = 0;
  for (const auto& c : oracle.at("cases")) {
    const auto text = c.at("text").get<std::string>();
    std::string spelled;
    bool plain = true; // no special token in the encoding
    for (const auto id : ids_of(c.at("ids"))) {
      ASSERT_LT(static_cast<std::size_t>(id), vocab.size());
      const auto& bytes = vocab[static_cast<std::size_t>(id)];
      plain = plain && bytes.has_value();
      if (bytes)
        spelled += *bytes;
    }
    if (!plain)
      continue;
    const auto expected = prepends_space && !text.empty() ? " " + text : text;
    EXPECT_EQ(spelled, expected) << json(text).dump();
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

INSTANTIATE_TEST_SUITE_P(shared_tokenizers, hf_tokenizer_oracle,
                         ::testing::Values("llama2", "llama3", "qwen3"),
                         [](const auto& info) { return std::string(info.param); });

TEST(hf_tokenizer, every_vector_of_the_small_files_matches_the_hf_library) {
  const std::filesystem::path dir = CANOPY_HF_VECTORS_DIR;
  const auto vectors = canopy::testing::read_json(dir / "vectors.json").at("tokenizers");
  ASSERT_EQ(vectors.size(), 5u);
  for (const auto& [name, entry] : vectors.items()) {
    const hf_tokenizer tok(dir / entry.at("tokenizer").get<std::string>());
    for (const auto& c : entry.at("cases")) {
      const auto text = c.at("text").get<std::string>();
      EXPECT_EQ(tok.encode(text, false), ids_of(c.at("ids")))
          << name << " " << json(text).dump();
      EXPECT_EQ(tok.encode(text, true), ids_of(c.at("ids_with_special")))
          << name << " " << json(text).dump();
      EXPECT_EQ(tok.decode(ids_of(c.at("ids"))), c.at("decoded").get<std::string>())
          << name << " " << json(text).dump();
    }
  }
}

TEST(hf_tokenizer, special_tokens_have_no_bytes_and_the_rest_all_have_theirs) {
  CANOPY_SHARED_PATH_OR_SKIP(path, "models/tokenizers/llama3/tokenizer.json");
  const hf_tokenizer tok(path);
  const auto& vocab = tok.byte_vocab();
  ASSERT_EQ(vocab.size(), 128256u);
  std::size_t without = 0;
  for (const auto& bytes : vocab)
    without += bytes ? 0 : 1;
  EXPECT_EQ(without, 256u) << "the 256 added special tokens, and nothing else";
  EXPECT_FALSE(vocab[128000]) << "<|begin_of_text|>";
  EXPECT_EQ(vocab[*tok.token_id_of("\xC4\xA0world")], " world");
  EXPECT_EQ(tok.token_id_of("<|end_of_text|>"), 128001);
  EXPECT_EQ(tok.token_text(128001), "<|end_of_text|>");
  EXPECT_EQ(tok.token_text(9906), std::nullopt) << "\"Hello\" has bytes";
}

// --- refusals -------------------------------------------------------------------------

/// A small byte-level tokenizer.json, edited by a test.
json minimal_tokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b)
    vocab[canopy::backends::byte_level_piece(std::string(1, static_cast<char>(b)))] = b;
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
}

TEST(hf_tokenizer, a_minimal_byte_level_file_encodes_each_byte_as_itself) {
  canopy::testing::scratch_dir dir;
  const hf_tokenizer tok(dir.write("tokenizer.json", minimal_tokenizer().dump()));
  EXPECT_EQ(tok.encode("ab ", false), (std::vector<token_id>{'a', 'b', ' '}));
  EXPECT_EQ(tok.decode({0xC3, 0xA9, 'x'}), "\xC3\xA9x");
  EXPECT_EQ(tok.decode({0xC3, 'x'}), "\xEF\xBF\xBDx") << "invalid UTF-8 becomes U+FFFD";
}

// Llama 3's split regex backtracks over a whole whitespace run (`\s*[\r\n]+` fails at
// its end before `\s+(?!\S)` takes it): past PCRE2's default 10 million steps a 12 MB
// run of spaces, a client's text, failed with "match limit exceeded".
TEST(hf_tokenizer, a_12_mb_run_of_spaces_is_one_piece_not_a_match_limit_error) {
  canopy::testing::scratch_dir dir;
  auto doc = minimal_tokenizer();
  const json split = {{"type", "Split"},
                      {"pattern", {{"Regex", "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
                      {"behavior", "Isolated"}};
  doc["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers", json::array({split, doc["pre_tokenizer"]})}};
  const hf_tokenizer tok(dir.write("tokenizer.json", doc.dump()));
  const std::string spaces(12u << 20, ' ');
  const auto ids = tok.encode(spaces + "x", false);
  ASSERT_EQ(ids.size(), spaces.size() + 1);
  EXPECT_EQ(ids.front(), ' ');
  EXPECT_EQ(ids.back(), 'x');
}

TEST(hf_tokenizer, every_unimplemented_component_is_refused_by_name) {
  struct refusal {
    std::function<void(json&)> edit;
    std::vector<std::string> expected;
  };
  const std::vector<refusal> cases{
      {[](json& t) {
         t["normalizer"] = {{"type", "Lowercase"}};
       },
       {"normalizer", "'Lowercase'", "not supported"}},
      {[](json& t) {
         t["pre_tokenizer"] = {{"type", "Digits"}};
       },
       {"pre_tokenizer", "'Digits'"}},
      {[](json& t) {
         const json byte_level = {{"type", "ByteLevel"}};
         const json split = {
             {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Isolated"}};
         t["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", json::array({byte_level, split})}};
       },
       {"after ByteLevel"}},
      {[](json& t) { t["model"]["type"] = "Unigram"; }, {"model", "'Unigram'"}},
      {[](json& t) { t["model"]["dropout"] = 0.1; }, {"dropout"}},
      {[](json& t) { t["model"]["continuing_subword_prefix"] = "##"; },
       {"continuing_subword_prefix"}},
      {[](json& t) {
         t["decoder"] = {{"type", "WordPiece"}};
       },
       {"decoder", "'WordPiece'"}},
      {[](json& t) {
         t["post_processor"] = {{"type", "RobertaProcessing"}};
       },
       {"post_processor", "'RobertaProcessing'"}},
      {[](json& t) {
         t["truncation"] = {{"max_length", 8}};
       },
       {"truncation"}},
      {[](json& t) {
         t["added_tokens"] = {{{"id", 3}, {"content", "<x>"}, {"single_word", true}}};
       },
       {"single_word"}},
      {[](json& t) {
         t["pre_tokenizer"] = {{"type", "Split"},
                               {"pattern", {{"Regex", "(unclosed"}}},
                               {"behavior", "Isolated"}};
       },
       {"pre_tokenizer.pattern", "PCRE2"}},
      {[](json& t) { t["model"]["merges"] = {"a"}; }, {"model.merges[0]", "left right"}},
      {[](json& t) {
         auto& vocab = t["model"]["vocab"];
         vocab["not a byte"] = vocab["a"];
         vocab.erase("a");
       },
       {"byte <0x61>", "has none"}},
      {[](json& t) { t["model"]["vocab"]["x1"] = 0; }, {"id 0 is given to two pieces"}},
      {[](json& t) {
         t["post_processor"] = {
             {"type", "TemplateProcessing"},
             {"single",
              {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
               {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
             {"special_tokens",
              {{"<s>", {{"id", "<s>"}, {"ids", {99999}}, {"tokens", {"<s>"}}}}}}};
       },
       {"post_processor", "special token id 99999", "outside the vocabulary of 256 ids"}},
  };
  for (const auto& c : cases) {
    canopy::testing::scratch_dir dir;
    auto spec = minimal_tokenizer();
    c.edit(spec);
    const auto file = dir.write("tokenizer.json", spec.dump());
    try {
      hf_tokenizer tok(file);
      ADD_FAILURE() << "accepted " << spec.dump().substr(0, 200);
    } catch (const tokenizer_error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(file.string()), std::string::npos) << message;
      for (const auto& part : c.expected)
        EXPECT_NE(message.find(part), std::string::npos) << part << " in " << message;
    }
  }
}

} // namespace
