// llama2.c tokenizer (tok512.bin) against ../shared/oracle/tokenizers.json, against a
// literal transcription of run.c's encode() on random texts, and on hand-made tokenizer
// files.
#include <canopy/backends/tokenizers/llama2c_tokenizer.hpp>

#include "shared_fixtures.hpp"
#include "tokenizer_fixtures.hpp"

#include <gmock/gmock.h>

#include <cstring>
#include <random>

namespace {

using canopy::backends::llama2c_tokenizer;
using canopy::cache::token_id;
using namespace canopy::testing;
namespace fs = std::filesystem;

fs::path tok512(const fs::path& oracle_file) {
  return oracle_file.parent_path().parent_path() / "models" / "stories260K" /
         "tok512.bin";
}

TEST(llama2c_tokenizer, encodes_every_oracle_case) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const auto vectors = read_json(oracle);
  const llama2c_tokenizer tok(tok512(oracle));
  const auto& cases = vectors.at("llama2c_tok512").at("cases");
  ASSERT_EQ(cases.size(), 12u);
  for (const auto& c : cases) {
    const std::string text = from_hex(c.at("text_utf8_hex").get<std::string>());
    ASSERT_EQ(text, c.at("text").get<std::string>());
    EXPECT_EQ(tok.encode(text), ids_of(c.at("ids"))) << "text: " << text;
    // Without special tokens: the same ids after BOS (the dummy prefix is the text's).
    const auto ids = ids_of(c.at("ids"));
    EXPECT_EQ(tok.encode(text, false),
              std::vector<canopy::cache::token_id>(ids.begin() + 1, ids.end()))
        << "text: " << text;
  }
}

TEST(llama2c_tokenizer, control_tokens_are_named_without_their_newlines) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const llama2c_tokenizer tok(tok512(oracle));
  EXPECT_EQ(tok.token_text(0), "<unk>");
  EXPECT_EQ(tok.token_text(1), "<s>");
  EXPECT_EQ(tok.token_text(2), "</s>");
  EXPECT_EQ(tok.token_text(300), std::nullopt) << "an ordinary piece has bytes instead";
}

TEST(llama2c_tokenizer, decodes_every_oracle_case) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const auto vectors = read_json(oracle);
  const llama2c_tokenizer tok(tok512(oracle));
  const auto& cases = vectors.at("llama2c_tok512").at("decode_cases");
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    const std::string decoded = tok.decode(ids_of(c.at("ids")));
    EXPECT_EQ(to_hex(decoded), c.at("bytes_hex").get<std::string>());
    EXPECT_EQ(decoded, c.at("text").get<std::string>());
  }
  // Every encode case decodes back to its text (BOS, then the dummy prefix is dropped).
  for (const auto& c : vectors.at("llama2c_tok512").at("cases"))
    EXPECT_EQ(tok.decode(ids_of(c.at("ids"))), c.at("text").get<std::string>());
}

TEST(llama2c_tokenizer, decodes_the_greedy_oracle_text_like_run_c) {
  CANOPY_SHARED_PATH_OR_SKIP(greedy_file, "oracle/stories260K/greedy.json");
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const auto greedy = read_json(greedy_file);
  const llama2c_tokenizer tok(tok512(oracle));
  auto ids = ids_of(greedy.at("start_tokens"));
  const auto generated = ids_of(greedy.at("ids"));
  ids.insert(ids.end(), generated.begin(), generated.end());
  EXPECT_EQ(tok.decode(ids), greedy.at("text").get<std::string>());
}

TEST(llama2c_tokenizer, decode_rules) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const llama2c_tokenizer tok(tok512(oracle));
  EXPECT_EQ(tok.decode({403}), " Once");   // no BOS before it: the space is text
  EXPECT_EQ(tok.decode({1, 403}), "Once"); // after BOS: the dummy prefix goes
  EXPECT_EQ(tok.decode({1, 35}), " ");     // <0x20> is a byte, never stripped
  EXPECT_EQ(tok.decode({1, 198, 172}),
            "\xC3\xA9");                     // byte fallback of 'é' gives its bytes
  EXPECT_EQ(tok.decode({0, 1, 2}), "");      // control tokens write nothing
  EXPECT_EQ(tok.decode({2, 1, 410, 1}), ""); // " " right after BOS is the dummy prefix
  EXPECT_THAT(
      [&] {
        (void)tok.decode({1, 512});
      },
      ::testing::ThrowsMessage<std::invalid_argument>(::testing::HasSubstr("512")));
  EXPECT_THAT(
      [&] { (void)tok.decode({-3}); },
      ::testing::ThrowsMessage<std::invalid_argument>(::testing::HasSubstr("-3")));
}

TEST(llama2c_tokenizer, token_bytes_table) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const auto vectors = read_json(oracle);
  const llama2c_tokenizer tok(tok512(oracle));
  ASSERT_EQ(tok.byte_vocab().size(), 512u);
  EXPECT_EQ(tok.kind(), "llama2c");
  EXPECT_EQ(tok.max_token_length(), 7);
  for (const auto& entry : vectors.at("token_bytes").at("llama2c_tok512")) {
    const auto id = entry.at("id").get<std::size_t>();
    EXPECT_EQ(tok.pieces().at(id), entry.at("piece").get<std::string>()) << "id " << id;
    const auto& bytes = tok.byte_vocab().at(id);
    if (entry.at("hex").is_null()) {
      EXPECT_FALSE(bytes.has_value()) << "id " << id;
    } else {
      ASSERT_TRUE(bytes.has_value()) << "id " << id;
      EXPECT_EQ(to_hex(*bytes), entry.at("hex").get<std::string>()) << "id " << id;
    }
  }
  for (std::size_t id = 3; id < 259; ++id)
    EXPECT_EQ(tok.byte_vocab()[id], std::string(1, static_cast<char>(id - 3)));
}

// run.c's encode(text, bos=1, eos=0), transcribed literally (full rescan per merge,
// C-string lookups), as the reference for the heap-based implementation.
std::vector<token_id> run_c_encode(const llama2c_tokenizer& tok,
                                   const std::string& text) {
  const auto& vocab = tok.pieces();
  const auto str_lookup = [&](const std::string& s) -> int {
    for (std::size_t i = 0; i < vocab.size(); ++i)
      if (vocab[i] == s)
        return static_cast<int>(i);
    return -1;
  };
  std::vector<token_id> tokens{1};
  if (!text.empty())
    tokens.push_back(str_lookup(" "));
  std::string buffer;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((text[i] & 0xC0) != 0x80)
      buffer.clear();
    buffer += text[i];
    if (i + 1 < text.size() && (text[i + 1] & 0xC0) == 0x80 && buffer.size() < 4)
      continue;
    const int id = str_lookup(buffer);
    if (id != -1)
      tokens.push_back(id);
    else
      for (char c : buffer)
        tokens.push_back(static_cast<unsigned char>(c) + 3);
    buffer.clear();
  }
  while (true) {
    float best_score = -1e10f;
    int best_id = -1;
    int best_idx = -1;
    for (std::size_t i = 0; i + 1 < tokens.size(); ++i) {
      const int id = str_lookup(vocab[static_cast<std::size_t>(tokens[i])] +
                                vocab[static_cast<std::size_t>(tokens[i + 1])]);
      if (id != -1 && tok.scores()[static_cast<std::size_t>(id)] > best_score) {
        best_score = tok.scores()[static_cast<std::size_t>(id)];
        best_id = id;
        best_idx = static_cast<int>(i);
      }
    }
    if (best_idx == -1)
      break;
    tokens[static_cast<std::size_t>(best_idx)] = best_id;
    tokens.erase(tokens.begin() + best_idx + 1);
  }
  return tokens;
}

TEST(llama2c_tokenizer, matches_run_c_on_random_texts) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const llama2c_tokenizer tok(tok512(oracle));
  // Common pieces, spaces, newlines, multi-byte characters with and without pieces, and
  // stray bytes that are not UTF-8.
  const std::vector<std::string> alphabet{"a",
                                          "e",
                                          "t",
                                          "h",
                                          "o",
                                          "n",
                                          "s",
                                          " ",
                                          " ",
                                          "  ",
                                          "\n",
                                          "The",
                                          "the",
                                          "ing",
                                          ".",
                                          ",",
                                          "\"",
                                          "'",
                                          "1",
                                          "9",
                                          "\xC3\xA9",
                                          "\xE2\x80\x9C",
                                          "\xF0\x9F\x98\x8A",
                                          "\xE4\xB8\xAD",
                                          "\xFF",
                                          "\x80",
                                          "\xC3",
                                          "\t"};
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  std::uniform_int_distribution<int> length(0, 40);
  for (int round = 0; round < 300; ++round) {
    std::string text;
    for (int i = length(rng); i > 0; --i)
      text += alphabet[pick(rng)];
    ASSERT_EQ(tok.encode(text), run_c_encode(tok, text)) << "text hex: " << to_hex(text);
    // byte_vocab spells the dummy prefix and then the text, byte for byte.
    std::string spelled;
    const auto ids = tok.encode(text);
    for (std::size_t i = 1; i < ids.size(); ++i)
      spelled += tok.byte_vocab()[static_cast<std::size_t>(ids[i])].value();
    EXPECT_EQ(spelled, text.empty() ? "" : " " + text);
    EXPECT_EQ(tok.decode(ids), text);
  }
}

// A llama2.c tokenizer file: 3 control pieces, 256 byte pieces, then `extra` (piece,
// score).
std::string tokenizer_file(const std::vector<std::pair<std::string, float>>& extra,
                           std::int32_t max_token_length = 8) {
  std::string out;
  const auto put = [&](const void* p, std::size_t n) {
    out.append(static_cast<const char*>(p), n);
  };
  const auto entry = [&](const std::string& piece, float score) {
    const auto length = static_cast<std::int32_t>(piece.size());
    put(&score, 4);
    put(&length, 4);
    out += piece;
  };
  put(&max_token_length, 4);
  entry("<unk>", 0);
  entry("\n<s>\n", 0);
  entry("\n</s>\n", 0);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    entry(name, 0);
  }
  for (const auto& [piece, score] : extra)
    entry(piece, score);
  return out;
}

TEST(llama2c_tokenizer, highest_score_merges_first_leftmost_on_ties) {
  const scratch_dir dir;
  // ids: 259 " ", 260 "a", 261 "b", 262 "c", 263 "ab", 264 "bc"
  const auto ties = dir.write(
      "ties.bin",
      tokenizer_file(
          {{" ", -9}, {"a", -9}, {"b", -9}, {"c", -9}, {"ab", -1}, {"bc", -1}}));
  EXPECT_EQ(llama2c_tokenizer(ties).encode("abc"),
            (std::vector<token_id>{1, 259, 263, 262}));
  const auto right = dir.write(
      "right.bin",
      tokenizer_file(
          {{" ", -9}, {"a", -9}, {"b", -9}, {"c", -9}, {"ab", -2}, {"bc", -1}}));
  EXPECT_EQ(llama2c_tokenizer(right).encode("abc"),
            (std::vector<token_id>{1, 259, 260, 264}));
  // Scores at or below run.c's -1e10 floor never merge.
  const auto floor = dir.write(
      "floor.bin", tokenizer_file({{" ", -9}, {"a", -9}, {"b", -9}, {"ab", -1e10f}}));
  EXPECT_EQ(llama2c_tokenizer(floor).encode("ab"),
            (std::vector<token_id>{1, 259, 260, 261}));
}

TEST(llama2c_tokenizer, no_dummy_prefix_without_a_space_piece) {
  const scratch_dir dir;
  const auto file = dir.write("t.bin", tokenizer_file({{"a", -1}}));
  const llama2c_tokenizer tok(file);
  EXPECT_EQ(tok.encode("a a"), (std::vector<token_id>{1, 259, 0x20 + 3, 259}));
  EXPECT_EQ(tok.encode(""), (std::vector<token_id>{1}));
}

} // namespace
