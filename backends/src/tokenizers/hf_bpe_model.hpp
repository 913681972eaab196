#pragma once
// tokenizer.json's model of type BPE: the vocabulary, the merges (as "a b" strings or
// [a, b] pairs, in rank order), and how a word's first symbols are found:
//  - byte-level (the pre-tokenizer ends with ByteLevel): each byte of the word is the
//    piece spelling it in GPT-2's byte alphabet; every byte must have one.
//  - otherwise each UTF-8 character is its piece, or with byte_fallback the pieces
//    <0xHH> of its bytes, or else unk_token (consecutive ones fused with fuse_unk).
// ignore_merges: a word that is a piece of its own is that piece, merges unused.
// Note [metaspace chunks]: SentencePiece-style files have no pre-tokenizer, so a whole
// text is one word. When every merge whose right side starts with U+2581 has a left
// side made of U+2581 only (runs of spaces merge among themselves), a symbol ending in
// another character never merges with one starting with U+2581, so each stretch from
// the start of one run of U+2581 to the next merges alone with the same result; the
// model then merges those stretches one by one (short words, fast) instead of the
// whole text at once.
// Settings that change the result in ways not implemented (dropout, a
// continuing_subword_prefix or end_of_word_suffix) are refused by name.
// Internal to canopy_backends.
//
// Thread contract: immutable after construction; encode() from many threads.

#include "tokenizers/bpe_merges.hpp"
#include "tokenizers/hf_json.hpp"

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace canopy::backends::hf {

class bpe_model {
public:
  bpe_model(const json_node& spec, bool byte_level);

  /// Appends the ids of `word` (raw bytes when byte-level, else UTF-8 text). Throws
  /// std::invalid_argument for a character the vocabulary cannot spell.
  void encode(std::string_view word, std::vector<cache::token_id>& out) const;

  /// [largest id + 1]: every id's piece as tokenizer.json spells it; std::nullopt for an
  /// id the vocabulary skips.
  const std::vector<std::optional<std::string>>& pieces() const { return pieces_; }
  std::optional<cache::token_id> id_of(std::string_view piece) const;
  bool byte_level() const { return byte_level_; }
  bool byte_fallback() const { return byte_fallback_; }
  std::optional<cache::token_id> unk() const { return unk_; }
  std::vector<merge_rule> merge_rules() const { return merges_.rules(); }

private:
  void first_symbols(std::string_view word, std::vector<cache::token_id>& symbols) const;
  void merge_word(std::string_view word, std::vector<cache::token_id>& out) const;

  bool byte_level_;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  bool metaspace_chunks_ = false; // Note [metaspace chunks]
  std::optional<cache::token_id> unk_;
  std::vector<std::optional<std::string>> pieces_;
  std::unordered_map<std::string, cache::token_id> ids_;      // as spelled in the file
  std::unordered_map<std::string, cache::token_id> byte_ids_; // byte-level: by raw bytes
  std::array<cache::token_id, 256> single_byte_{};            // byte-level, or <0xHH>
  std::array<cache::token_id, 128> ascii_ids_{};              // chars mode: -1 if absent
  bpe_merges merges_;
};

} // namespace canopy::backends::hf
