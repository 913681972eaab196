#pragma once
// Tokenizers: text <-> token ids, and the exact bytes of every token (the byte
// vocabulary). One interface over the formats the engine's models come with: GPT-2
// byte-level BPE (vocab.json + merges.txt), llama2.c's tokenizer.bin / tok512.bin, and
// SentencePiece .model files. Plain C++ (no torch, no CAF), so the CLI and tests can
// tokenize without a model.
//
// Thread contract: a loaded tokenizer_i is immutable; its const methods may be called
// from many threads at once (each implementation states why this holds). load_tokenizer
// and find_tokenizer are free functions that only read the file system.

#include <canopy/cache/types.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::backends {

/// One byte-pair merge: the adjacent pieces `left` then `right` become `result`.
struct merge_rule {
  cache::token_id left;
  cache::token_id right;
  cache::token_id result;
  bool operator==(const merge_rule& other) const {
    return left == other.left && right == other.right && result == other.result;
  }
};

class tokenizer_i {
public:
  virtual ~tokenizer_i() = default;

  /// The model's own convention: llama2.c adds BOS and the dummy-prefix space (run.c
  /// encode(text, bos=1, eos=0)); GPT-2 adds nothing and never parses special-token text;
  /// tokenizer.json adds its post-processor's special tokens (transformers' default).
  std::vector<cache::token_id> encode(std::string_view text) const {
    return encode(text, true);
  }

  /// With add_special_tokens false, without what the convention adds around the text
  /// (BOS, the post-processor's tokens); the text's own pieces stay as they are
  /// (llama2.c's dummy-prefix space is part of the text's encoding).
  virtual std::vector<cache::token_id> encode(std::string_view text,
                                              bool add_special_tokens) const = 0;

  /// Exact bytes of the ids (llama2.c: run.c's decode rules, true bytes for <0xHH>).
  /// Throws std::invalid_argument naming an out-of-range id.
  virtual std::string decode(const std::vector<cache::token_id>& ids) const = 0;

  /// For every id, the exact bytes it stands for; std::nullopt for control tokens.
  /// Its size is the tokenizer's vocabulary size.
  virtual const std::vector<std::optional<std::string>>& byte_vocab() const = 0;

  /// "gpt2-bpe", "llama2c", "sentencepiece" or "tokenizer.json".
  virtual std::string_view kind() const = 0;

  /// The id whose token is spelled `token` in the tokenizer's own files (an added
  /// token's content, a vocabulary piece: "<|end_of_text|>", "</s>"); std::nullopt when
  /// there is none or the format does not name its tokens so.
  virtual std::optional<cache::token_id> token_id_of(std::string_view token) const {
    (void)token;
    return std::nullopt;
  }

  /// How the tokenizer's files spell a control token (byte_vocab() has no bytes for it):
  /// "<|end_of_text|>", "</s>"; std::nullopt for other ids, or when the format has no
  /// name for it.
  virtual std::optional<std::string> token_text(cache::token_id id) const {
    (void)id;
    return std::nullopt;
  }
  /// A byte-pair encoding's merges, first applied first (genlm-control's canonical
  /// tokenization reads them); empty for formats that merge otherwise (llama2.c's and
  /// SentencePiece's scores).
  virtual std::vector<merge_rule> merge_rules() const { return {}; }
};

/// A tokenizer file that cannot be read or is malformed; the message names the file and
/// what is wrong with it.
class tokenizer_error : public std::runtime_error {
public:
  using runtime_error::runtime_error;
};

/// A tokenizer file or directory: vocab.json + merges.txt (directory, or either file of
/// the pair), tokenizer.bin / tok512.bin / any other .bin (llama2.c format), *.model
/// (SentencePiece), a GGUF model file (its metadata's tokenizer: gguf_tokenizer.hpp). A
/// directory is searched in the order of find_tokenizer. Throws tokenizer_error.
std::unique_ptr<tokenizer_i> load_tokenizer(const std::filesystem::path& path);

/// The tokenizer that belongs to a model path: for an HF directory, vocab.json+merges.txt
/// (returns the directory), tokenizer.model, tokenizer.bin or tok512.bin inside it; for a
/// llama2.c .bin file, tokenizer.bin or tok512.bin beside it; for a GGUF file, the file
/// itself when its metadata holds a tokenizer. Empty path when there is
/// none (a model without a tokenizer still works with token ids). Never throws for a
/// missing path.
std::filesystem::path find_tokenizer(const std::filesystem::path& model_path);

} // namespace canopy::backends
