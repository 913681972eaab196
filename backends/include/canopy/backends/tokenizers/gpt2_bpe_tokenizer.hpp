#pragma once
// GPT-2 byte-level BPE (vocab.json + merges.txt), exactly as openai/gpt-2 encoder.py:
// the text is split by the GPT-2 pre-tokenizer regex, each word's bytes are spelled in
// the byte-level alphabet and merged pair by pair, lowest merge rank first (every
// occurrence of the chosen pair at once, left to right). No BOS/EOS is added and
// special-token text such as
// "<|endoftext|>" is ordinary text. Decode concatenates the tokens' bytes.
//
// Control tokens are the pieces of the form <|name|> (GPT-2: <|endoftext|>), and any
// piece not spelled in the byte-level alphabet: byte_vocab() holds std::nullopt for them,
// because encode() never produces them from text; decode() writes the piece's own text,
// as encoder.py's decode does for <|endoftext|>.
//
// Thread contract: immutable after construction; encode/decode/byte_vocab may be called
// from many threads at once. There is deliberately no per-word cache (encoder.py has
// one): it would need a lock on every word, and encoding is already ~15 MB/s without it.

#include <canopy/backends/tokenizers/tokenizer.hpp>

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <unordered_map>

namespace canopy::backends {

class bpe_merges;
class gpt2_pretokenizer;

class gpt2_bpe_tokenizer final : public tokenizer_i {
public:
  /// Reads both files; throws tokenizer_error naming the file and the defect (not a JSON
  /// object of string -> id, duplicate or negative ids, a byte without its piece, merge
  /// lines that are not two pieces, merges naming unknown pieces or producing one not in
  /// vocab).
  gpt2_bpe_tokenizer(const std::filesystem::path& vocab_json,
                     const std::filesystem::path& merges_txt);
  ~gpt2_bpe_tokenizer() override;

  using tokenizer_i::encode;
  /// GPT-2 adds nothing around the text either way.
  std::vector<cache::token_id> encode(std::string_view text,
                                      bool add_special_tokens) const override;
  std::optional<std::string> token_text(cache::token_id id) const override;
  std::string decode(const std::vector<cache::token_id>& ids) const override;
  const std::vector<std::optional<std::string>>& byte_vocab() const override {
    return byte_vocab_;
  }
  std::string_view kind() const override { return "gpt2-bpe"; }
  std::vector<merge_rule> merge_rules() const override;

  /// The id of a vocab.json piece (alphabet spelling, e.g. "Ġworld"); std::nullopt if
  /// absent.
  std::optional<cache::token_id> piece_id(std::string_view piece) const;
  std::optional<cache::token_id> token_id_of(std::string_view token) const override {
    return piece_id(token);
  }

private:
  void bpe(std::string_view word, std::vector<cache::token_id>& out) const;

  std::unique_ptr<const gpt2_pretokenizer> pretokenizer_;
  std::unordered_map<std::string, cache::token_id> piece_ids_;
  std::vector<std::optional<std::string>> byte_vocab_;
  std::vector<std::string> decoded_;            // what decode writes per id
  std::array<cache::token_id, 256> byte_ids_{}; // single-byte piece of each byte
  std::unique_ptr<bpe_merges> merges_;          // built once, then only read
};

} // namespace canopy::backends
