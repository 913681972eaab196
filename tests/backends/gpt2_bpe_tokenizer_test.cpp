// GPT-2 byte-level BPE against ../shared/oracle/tokenizers.json (encoder.py's own
// results) and against small hand-made vocabularies that pin down the merge order.
#include <canopy/backends/tokenizers/byte_level_alphabet.hpp>
#include <canopy/backends/tokenizers/gpt2_bpe_tokenizer.hpp>

#include "shared_fixtures.hpp"
#include "tokenizer_fixtures.hpp"

#include <gmock/gmock.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <thread>

namespace {

using canopy::backends::byte_level_alphabet;
using canopy::backends::byte_level_piece;
using canopy::backends::byte_level_piece_bytes;
using canopy::backends::gpt2_bpe_tokenizer;
using canopy::backends::merge_rule;
using canopy::backends::tokenizer_i;
using canopy::cache::token_id;
using namespace canopy::testing;
namespace fs = std::filesystem;

gpt2_bpe_tokenizer load_gpt2(const fs::path& oracle_file) {
  const fs::path models =
      oracle_file.parent_path().parent_path() / "models" / "gpt2-synthetic";
  return gpt2_bpe_tokenizer(models / "vocab.json", models / "merges.txt");
}

TEST(gpt2_bpe_tokenizer, encodes_every_oracle_case) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const auto vectors = read_json(oracle);
  const auto tok = load_gpt2(oracle);
  const auto& cases = vectors.at("gpt2_bpe").at("cases");
  ASSERT_EQ(cases.size(), 21u);
  for (const auto& c : cases) {
    const std::string text = from_hex(c.at("text_utf8_hex").get<std::string>());
    ASSERT_EQ(text, c.at("text").get<std::string>());
    EXPECT_EQ(tok.encode(text), ids_of(c.at("ids"))) << "text: " << text;
  }
}

TEST(gpt2_bpe_tokenizer, round_trips_every_oracle_case) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const auto vectors = read_json(oracle);
  const auto tok = load_gpt2(oracle);
  for (const auto& c : vectors.at("gpt2_bpe").at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    EXPECT_EQ(tok.decode(ids_of(c.at("ids"))), text);
    EXPECT_EQ(tok.decode(tok.encode(text)), text);
    // byte_vocab spells the same bytes as decode for text tokens.
    std::string spelled;
    for (token_id id : tok.encode(text))
      spelled += tok.byte_vocab().at(static_cast<std::size_t>(id)).value();
    EXPECT_EQ(spelled, text);
  }
}

TEST(gpt2_bpe_tokenizer, token_bytes_table) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const auto vectors = read_json(oracle);
  const auto tok = load_gpt2(oracle);
  ASSERT_EQ(tok.byte_vocab().size(), 50257u);
  EXPECT_EQ(tok.kind(), "gpt2-bpe");
  for (const auto& entry : vectors.at("token_bytes").at("gpt2")) {
    const auto id = entry.at("id").get<token_id>();
    const std::string bytes = from_hex(entry.at("hex").get<std::string>());
    EXPECT_EQ(tok.piece_id(entry.at("piece").get<std::string>()), id);
    EXPECT_EQ(tok.decode({id}), bytes) << "id " << id;
    const auto& vocab_bytes = tok.byte_vocab().at(static_cast<std::size_t>(id));
    if (entry.value("special", false)) {
      // <|endoftext|> is a control token: encode never produces it from text.
      EXPECT_FALSE(vocab_bytes.has_value()) << "id " << id;
    } else {
      ASSERT_TRUE(vocab_bytes.has_value()) << "id " << id;
      EXPECT_EQ(to_hex(*vocab_bytes), entry.at("hex").get<std::string>()) << "id " << id;
    }
  }
  // Every other token has bytes.
  std::size_t controls = 0;
  for (const auto& bytes : tok.byte_vocab())
    controls += bytes.has_value() ? 0 : 1;
  EXPECT_EQ(controls, 1u);
}

TEST(gpt2_bpe_tokenizer, byte_alphabet_matches_oracle) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const auto chars =
      read_json(oracle).at("token_bytes").at("gpt2_byte_alphabet").at("chars");
  ASSERT_EQ(chars.size(), 256u);
  for (unsigned b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    const std::string expected = chars[b].get<std::string>();
    EXPECT_EQ(byte_level_piece(byte), expected) << "byte " << b;
    EXPECT_EQ(byte_level_piece_bytes(expected), byte) << "byte " << b;
  }
}

TEST(byte_level_alphabet, is_a_bijection_onto_printable_code_points) {
  const auto& table = byte_level_alphabet();
  EXPECT_EQ(table[0x20], U'\u0120'); // 'Ġ'
  EXPECT_EQ(table['A'], U'A');
  EXPECT_EQ(table[0xAD], U'\u0143'); // soft hyphen, the last remapped byte
  std::string all;
  for (unsigned b = 0; b < 256; ++b)
    all += static_cast<char>(b);
  EXPECT_EQ(byte_level_piece_bytes(byte_level_piece(all)), all);
  EXPECT_EQ(byte_level_piece_bytes(" "), std::nullopt); // a space is not in the alphabet
  EXPECT_EQ(byte_level_piece_bytes("\xC4"), std::nullopt); // truncated UTF-8
  EXPECT_EQ(byte_level_piece_bytes("\xE2\x80\x9C"), std::nullopt);
}

TEST(gpt2_bpe_tokenizer, invalid_utf8_bytes_are_kept_as_their_own_words) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const auto tok = load_gpt2(oracle);
  const std::string text = "a\xff"
                           "b \x80\xc3 ok\xe2\x82";
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
  const auto ids = tok.encode("a\xff"
                              "b");
  const std::vector<token_id> expected{*tok.piece_id("a"),
                                       *tok.piece_id("\xC3\xBF"), // 'ÿ'
                                       *tok.piece_id("b")};
  EXPECT_EQ(ids, expected);
}

TEST(gpt2_bpe_tokenizer, decode_rejects_out_of_range_ids) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const auto tok = load_gpt2(oracle);
  EXPECT_THAT(
      [&] {
        (void)tok.decode({15496, 50257});
      },
      ::testing::ThrowsMessage<std::invalid_argument>(::testing::HasSubstr("50257")));
  EXPECT_THAT(
      [&] { (void)tok.decode({-1}); },
      ::testing::ThrowsMessage<std::invalid_argument>(::testing::HasSubstr("-1")));
}

TEST(gpt2_bpe_tokenizer, const_methods_are_safe_from_many_threads) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const auto vectors = read_json(oracle);
  const auto tok = load_gpt2(oracle);
  const auto& cases = vectors.at("gpt2_bpe").at("cases");
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round)
        for (const auto& c : cases)
          if (tok.encode(c.at("text").get<std::string>()) != ids_of(c.at("ids")))
            ++failures[static_cast<std::size_t>(t)];
    });
  for (auto& thread : threads)
    thread.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
}

using merge_list = std::vector<std::pair<std::string, std::string>>;

// A vocabulary of the 256 byte pieces plus the given merges, in rank order.
struct tiny_bpe {
  scratch_dir dir;
  fs::path vocab;
  fs::path merges;
  explicit tiny_bpe(const merge_list& merges_in_rank_order,
                    const std::vector<std::string>& extra = {}) {
    nlohmann::json v = nlohmann::json::object();
    int next = 0;
    for (unsigned b = 0; b < 256; ++b)
      v[byte_level_piece(std::string(1, static_cast<char>(b)))] = next++;
    std::string m = "#version: 0.2\n";
    for (const auto& [l, r] : merges_in_rank_order) {
      if (!v.contains(l + r))
        v[l + r] = next++;
      m += l + " " + r + "\n";
    }
    for (const auto& piece : extra)
      v[piece] = next++;
    vocab = dir.write("vocab.json", v.dump());
    merges = dir.write("merges.txt", m);
  }
  std::vector<std::string> pieces(const std::string& text) const {
    gpt2_bpe_tokenizer tok(vocab, merges);
    std::vector<std::string> out;
    for (token_id id : tok.encode(text))
      out.push_back(*tok.byte_vocab().at(static_cast<std::size_t>(id)));
    return out;
  }
};

TEST(gpt2_bpe_tokenizer, lowest_rank_merges_first_across_the_word) {
  // "b c" outranks "a b": "abc" must become a|bc although "ab" comes first in the text.
  const tiny_bpe bpe(merge_list{{"b", "c"}, {"a", "b"}});
  EXPECT_EQ(bpe.pieces("abc"), (std::vector<std::string>{"a", "bc"}));
  const tiny_bpe reversed(merge_list{{"a", "b"}, {"b", "c"}});
  EXPECT_EQ(reversed.pieces("abc"), (std::vector<std::string>{"ab", "c"}));
}

TEST(gpt2_bpe_tokenizer, merges_every_occurrence_left_to_right) {
  // encoder.py merges all non-overlapping occurrences of the chosen pair, left to right,
  // before it looks at the pairs that creates. Here "aa a" outranks "a a": merging one
  // pair at a time would turn "aaaa" into aa|a|a and then aaa|a.
  const tiny_bpe bpe(merge_list{{"aa", "a"}, {"a", "a"}});
  EXPECT_EQ(bpe.pieces("aaaa"), (std::vector<std::string>{"aa", "aa"}));
  EXPECT_EQ(bpe.pieces("aaa"), (std::vector<std::string>{"aaa"}));
  EXPECT_EQ(bpe.pieces("aaaaa"), (std::vector<std::string>{"aa", "aaa"}));
  // The same for words long enough to take the heap path.
  EXPECT_EQ(bpe.pieces(std::string(40, 'a')), std::vector<std::string>(20, "aa"));
  std::vector<std::string> odd(20, "aa");
  odd.back() = "aaa";
  EXPECT_EQ(bpe.pieces(std::string(41, 'a')), odd);
}

TEST(gpt2_bpe_tokenizer, merge_rules_list_the_merges_first_applied_first) {
  // "a b" is listed twice: its later line is its rank, in encoding and in the listing.
  const tiny_bpe bpe(merge_list{{"a", "b"}, {"b", "c"}, {"a", "b"}});
  const gpt2_bpe_tokenizer tok(bpe.vocab, bpe.merges);
  const auto id = [&](const std::string& piece) {
    return tok.token_id_of(piece).value();
  };
  EXPECT_EQ(tok.merge_rules(), (std::vector<merge_rule>{{id("b"), id("c"), id("bc")},
                                                        {id("a"), id("b"), id("ab")}}));
  EXPECT_EQ(bpe.pieces("abc"), (std::vector<std::string>{"a", "bc"}));
}

TEST(gpt2_bpe_tokenizer, merge_rules_of_gpt2_are_its_merges_file) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const auto tok = load_gpt2(oracle);
  const auto rules = tok.merge_rules();
  ASSERT_EQ(rules.size(), 50000u); // merges.txt: 50,000 lines after "#version"
  const auto id = [&](const std::string& piece) {
    return tok.token_id_of(piece).value();
  };
  EXPECT_EQ(rules.front(),
            (merge_rule{id("\xC4\xA0"), id("t"), id("\xC4\xA0t")})); // "Ġ t"
  for (const auto& rule : rules) // a merge's piece spells its two sides' bytes
    ASSERT_EQ(*tok.byte_vocab().at(static_cast<std::size_t>(rule.result)),
              *tok.byte_vocab().at(static_cast<std::size_t>(rule.left)) +
                  *tok.byte_vocab().at(static_cast<std::size_t>(rule.right)));
}

TEST(gpt2_bpe_tokenizer, merges_never_cross_pre_tokenizer_words) {
  // The space belongs to the next word (" world"), never to the end of "hello".
  const tiny_bpe bpe(merge_list{{"o", "\xC4\xA0"}, {"\xC4\xA0", "w"}}); // "oĠ", "Ġw"
  EXPECT_EQ(bpe.pieces("o w"), (std::vector<std::string>{"o", " w"}));
}

// openai/gpt-2 encoder.py's bpe(), transcribed on piece strings, as the reference.
std::vector<std::string>
encoder_py_bpe(const std::string& word,
               const std::map<std::pair<std::string, std::string>, int>& ranks) {
  std::vector<std::string> parts;
  for (char c : word)
    parts.emplace_back(1, c);
  while (parts.size() > 1) {
    const std::pair<std::string, std::string>* bigram = nullptr;
    int best = 0;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = ranks.find({parts[i], parts[i + 1]});
      if (it != ranks.end() && (bigram == nullptr || it->second < best)) {
        bigram = &it->first;
        best = it->second;
      }
    }
    if (bigram == nullptr)
      break;
    std::vector<std::string> merged;
    for (std::size_t i = 0; i < parts.size();) {
      if (i + 1 < parts.size() && parts[i] == bigram->first &&
          parts[i + 1] == bigram->second) {
        merged.push_back(parts[i] + parts[i + 1]);
        i += 2;
      } else {
        merged.push_back(parts[i++]);
      }
    }
    parts.swap(merged);
  }
  return parts;
}

TEST(gpt2_bpe_tokenizer, matches_encoder_py_on_random_merge_tables) {
  // Random merge tables over "abcd" and random words of 1..120 letters (one pre-token
  // each), so both the short-word loop and the heap for long words are checked against
  // encoder.py.
  std::mt19937 rng(11);
  for (int table = 0; table < 20; ++table) {
    std::vector<std::string> pieces{"a", "b", "c", "d"};
    merge_list merges;
    std::set<std::pair<std::string, std::string>> seen;
    while (merges.size() < 40) {
      const auto& l = pieces[rng() % pieces.size()];
      const auto& r = pieces[rng() % pieces.size()];
      if (l.size() + r.size() > 8 || !seen.insert({l, r}).second)
        continue;
      merges.emplace_back(l, r);
      pieces.push_back(l + r);
    }
    // Half the tables in shuffled rank order: a merge may then outrank the merges that
    // make its pieces, which encoder.py handles (it finishes a round before it looks at
    // new pairs).
    if (table % 2 == 1)
      std::shuffle(merges.begin(), merges.end(), rng);
    std::map<std::pair<std::string, std::string>, int> ranks;
    for (std::size_t i = 0; i < merges.size(); ++i)
      ranks.emplace(merges[i], static_cast<int>(i));
    const tiny_bpe bpe(merges);
    for (int w = 0; w < 40; ++w) {
      std::string word;
      for (auto n = 1 + rng() % 120; n > 0; --n)
        word += static_cast<char>('a' + rng() % 4);
      ASSERT_EQ(bpe.pieces(word), encoder_py_bpe(word, ranks))
          << "table " << table << " word " << word;
    }
  }
}

TEST(gpt2_bpe_tokenizer, matches_encoder_py_on_long_words_with_the_real_merges) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/tokenizers.json");
  const auto tok = load_gpt2(oracle);
  std::map<std::pair<std::string, std::string>, int> ranks;
  std::ifstream merges(oracle.parent_path().parent_path() / "models" / "gpt2-synthetic" /
                       "merges.txt");
  std::string line;
  std::getline(merges, line); // #version
  for (int rank = 0; std::getline(merges, line);) {
    const auto space = line.find(' ');
    if (space != std::string::npos)
      ranks.emplace(std::make_pair(line.substr(0, space), line.substr(space + 1)),
                    rank++);
  }
  ASSERT_EQ(ranks.size(), 50000u);
  std::mt19937 rng(5);
  for (int w = 0; w < 50; ++w) {
    std::string word;
    for (auto n = 20 + rng() % 200; n > 0; --n)
      word += static_cast<char>((rng() % 2 ? 'a' : 'A') + rng() % 26);
    std::vector<token_id> expected;
    for (const auto& piece : encoder_py_bpe(word, ranks))
      expected.push_back(tok.piece_id(piece).value());
    ASSERT_EQ(tok.encode(word), expected) << word;
  }
}

TEST(gpt2_bpe_tokenizer, control_pieces_have_no_bytes_but_decode_to_their_text) {
  const tiny_bpe bpe(merge_list{}, {"<|endoftext|>"});
  gpt2_bpe_tokenizer tok(bpe.vocab, bpe.merges);
  ASSERT_EQ(tok.byte_vocab().size(), 257u);
  EXPECT_FALSE(tok.byte_vocab()[256].has_value());
  EXPECT_EQ(tok.decode({256}), "<|endoftext|>");
  EXPECT_EQ(tok.encode("<|endoftext|>").size(), 13u); // never parsed as the special token
}

} // namespace
