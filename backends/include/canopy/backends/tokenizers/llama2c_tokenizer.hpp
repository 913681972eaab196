#pragma once
// llama2.c's tokenizer file (tokenizer.bin, tok512.bin) and run.c's encode/decode rules.
//
// File: little-endian int32 max_token_length, then for every id a float32 score, an int32
// byte length and the piece's bytes (SentencePiece's U+2581 already replaced by a space).
// The vocabulary size is the number of entries. Ids 0/1/2 are <unk>, BOS, EOS (control
// tokens); ids 3..258 are the byte-fallback pieces <0x00>..<0xFF>.
//
// encode(text) is run.c's encode(text, bos=1, eos=0): [BOS], the id of the piece " " as
// dummy prefix when the text is non-empty, each UTF-8 code point's piece id or else one
// id per byte (byte + 3), then repeatedly the adjacent pair whose concatenated piece has
// the highest score is merged (leftmost on ties). A heap finds that pair instead of
// run.c's full rescan; the result is the same, since the order (score, then position) is
// the same. decode(ids) is run.c's decode over consecutive pairs: a piece following BOS
// loses its leading space, <0xHH> is the raw byte HH, control tokens write nothing.
//
// Thread contract: immutable after construction; const methods are safe from many
// threads.

#include <canopy/backends/tokenizers/tokenizer.hpp>

#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

namespace canopy::backends {

class llama2c_tokenizer final : public tokenizer_i {
public:
  static constexpr cache::token_id unk_id = 0;
  static constexpr cache::token_id bos_id = 1;
  static constexpr cache::token_id eos_id = 2;

  /// Reads the file; throws tokenizer_error naming it and the defect (truncated header or
  /// entry, negative length or one above max_token_length, fewer than 259 entries,
  /// ids 3..258 not the byte pieces <0x00>..<0xFF>).
  explicit llama2c_tokenizer(const std::filesystem::path& file);
  /// The same vocabulary given whole (a GGUF file's SentencePiece tokens, U+2581
  /// already read as a space); `source` names it in errors, which are the file's.
  llama2c_tokenizer(std::vector<std::string> pieces, std::vector<float> scores,
                    const std::filesystem::path& source);

  using tokenizer_i::encode;
  std::vector<cache::token_id> encode(std::string_view text,
                                      bool add_special_tokens) const override;
  /// A control piece without the newlines around it: "<s>", "</s>", "<unk>".
  std::optional<std::string> token_text(cache::token_id id) const override;
  std::string decode(const std::vector<cache::token_id>& ids) const override;
  const std::vector<std::optional<std::string>>& byte_vocab() const override {
    return byte_vocab_;
  }
  std::string_view kind() const override { return "llama2c"; }

  /// The pieces as stored in the file (e.g. "<0x0A>", " the", "\n<s>\n"), and their
  /// scores.
  const std::vector<std::string>& pieces() const { return pieces_; }
  const std::vector<float>& scores() const { return scores_; }
  int max_token_length() const { return max_token_length_; }

private:
  /// Checks the pieces (ids 3..258 the byte pieces) and builds the lookups.
  void index(const std::filesystem::path& file);
  std::optional<cache::token_id> lookup(const std::string& piece) const;

  int max_token_length_ = 0;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int> byte_of_; // the byte a <0xHH> piece stands for; -1 for other pieces
  std::unordered_map<std::string, cache::token_id> piece_ids_; // first id of each piece
  std::optional<cache::token_id> space_id_;                    // the dummy prefix " "
  std::vector<std::optional<std::string>> byte_vocab_;
};

} // namespace canopy::backends
