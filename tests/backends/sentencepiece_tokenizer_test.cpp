// SentencePiece .model support: a tiny model (BPE, byte fallback) trained by
// SentencePiece in a helper process (canopy_spm_tool; see there why not in this one),
// checked against SentencePiece's own Encode/Decode and for byte_vocab consistency.
// Without SentencePiece in the build, loading a .model must say support was not built.
#include <canopy/backends/tokenizers/sentencepiece_tokenizer.hpp>
#include <canopy/backends/tokenizers/tokenizer.hpp>

#include "tokenizer_fixtures.hpp"

#include <gmock/gmock.h>

#include <cstdio>
#include <sstream>

namespace {

using canopy::backends::load_tokenizer;
using canopy::backends::tokenizer_error;
using canopy::cache::token_id;
using namespace canopy::testing;
namespace fs = std::filesystem;

#ifdef CANOPY_HAVE_SENTENCEPIECE

std::string quoted(const std::string& s) {
  return "'" + s + "'";
} // paths without quotes

// Runs the helper; its stdout, or a test failure.
std::string run_tool(const std::string& arguments) {
  const std::string command = quoted(CANOPY_SPM_TOOL) + " " + arguments;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " << command;
    return {};
  }
  std::string out;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    out.append(buffer, n);
  EXPECT_EQ(::pclose(pipe), 0) << command;
  return out;
}

// Trains the tiny model into dir/tokenizer.model.
fs::path train_tiny_model(const scratch_dir& dir) {
  std::string corpus;
  const char* lines[] = {"the cat sat on the mat",
                         "the dog ran to the park",
                         "a cat and a dog played in the sun",
                         "once upon a time there was a cat",
                         "she saw the dog and the cat",
                         "they went home happy"};
  for (int round = 0; round < 20; ++round)
    for (const char* line : lines)
      corpus += std::string(line) + "\n";
  const auto input = dir.write("corpus.txt", corpus);
  run_tool("train " + quoted(input.string()) + " " +
           quoted((dir.path() / "tokenizer").string()));
  return dir.path() / "tokenizer.model";
}

struct reference_encoding {
  std::vector<token_id> ids; // SentencePiece's Encode (no BOS)
  std::string decoded;       // SentencePiece's Decode of those ids
};

reference_encoding reference(const fs::path& model, const std::string& text) {
  std::istringstream out(
      run_tool("encode " + quoted(model.string()) + " " + to_hex(text)));
  std::string ids_line, hex_line;
  std::getline(out, ids_line);
  std::getline(out, hex_line);
  reference_encoding r;
  std::istringstream ids(ids_line);
  for (token_id id; ids >> id;)
    r.ids.push_back(id);
  r.decoded = from_hex(hex_line);
  return r;
}

TEST(sentence_piece_tokenizer, trained_model_encodes_decodes_and_spells_bytes) {
  ASSERT_TRUE(canopy::backends::sentencepiece_supported());
  const scratch_dir dir;
  const fs::path model = train_tiny_model(dir);
  ASSERT_TRUE(fs::exists(model));

  const auto tok = load_tokenizer(dir.path()); // the directory rule finds tokenizer.model
  EXPECT_EQ(tok->kind(), "sentencepiece");
  // SentencePiece's defaults: <unk> 0, <s> 1, </s> 2, then the byte pieces
  // <0x00>..<0xFF>.
  const auto& vocab = tok->byte_vocab();
  ASSERT_GE(vocab.size(), 259u);
  EXPECT_FALSE(vocab[0].has_value());
  EXPECT_FALSE(vocab[1].has_value());
  EXPECT_FALSE(vocab[2].has_value());
  for (std::size_t b = 0; b < 256; ++b)
    EXPECT_EQ(vocab[3 + b], std::string(1, static_cast<char>(b))) << "byte " << b;

  for (const std::string text :
       {"the cat sat on the mat", "a dog in the park", "zebra",
        "caf\xC3\xA9 \xF0\x9F\x98\x8A ok", "the\ncat", "  two  spaces"}) {
    const reference_encoding expected = reference(model, text);
    const auto ids = tok->encode(text);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), 1); // BOS first, as Llama and llama2.c do
    EXPECT_EQ(std::vector<token_id>(ids.begin() + 1, ids.end()), expected.ids) << text;
    EXPECT_EQ(tok->decode(ids), expected.decoded) << text;
    // byte_vocab spells SentencePiece's normalized text after the dummy-prefix space.
    std::string spelled;
    for (std::size_t i = 1; i < ids.size(); ++i)
      spelled += vocab.at(static_cast<std::size_t>(ids[i])).value();
    EXPECT_EQ(spelled, " " + expected.decoded) << text;
  }
  // Characters the model never saw fall back to bytes and come back exactly.
  const std::string unseen = "caf\xC3\xA9 \xF0\x9F\x98\x8A";
  EXPECT_EQ(tok->decode(tok->encode(unseen)), unseen);
  // A lone byte piece is its byte (SentencePiece's own Decode would write U+FFFD).
  EXPECT_EQ(tok->decode({1, 3 + 0xC3}), "\xC3");
  EXPECT_THAT([&] { (void)tok->decode({static_cast<token_id>(vocab.size())}); },
              ::testing::ThrowsMessage<std::invalid_argument>(
                  ::testing::HasSubstr(std::to_string(vocab.size()))));
}

#else

TEST(sentence_piece_tokenizer, model_files_need_sentence_piece_support) {
  ASSERT_FALSE(canopy::backends::sentencepiece_supported());
  const scratch_dir dir;
  const auto file = dir.write("tokenizer.model", "x");
  EXPECT_THAT(
      [&] { (void)load_tokenizer(file); },
      ::testing::ThrowsMessage<tokenizer_error>(::testing::AllOf(
          ::testing::HasSubstr("tokenizer.model"), ::testing::HasSubstr("not built"))));
}

#endif

} // namespace
