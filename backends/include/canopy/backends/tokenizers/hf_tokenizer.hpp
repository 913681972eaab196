#pragma once
// HF tokenizer.json: the tokenizers that today's checkpoints ship (Llama 2 and 3,
// Mistral, Qwen2/3, ...), read and applied as the HF tokenizers library does, so that
// ids, ids with special tokens and decoded text are the library's own:
//   encode: added tokens are cut out of the text first; each stretch between them is
//   normalized (NFC, NFKC, Prepend, Replace, ...), pre-tokenized (Split with the file's
//   regex, ByteLevel, Metaspace, ...) and encoded by the BPE model (byte fallback, unk,
//   ignore_merges); with add_special_tokens the post-processor (TemplateProcessing) adds
//   its special tokens.
//   decode: each id's token string (an added token's content, else the model's piece)
//   through the decoders (ByteLevel, ByteFallback, Fuse, Strip, Replace, ...).
// A component or setting this reader does not implement is refused by name when the
// file is loaded, never approximated (e.g. "pre_tokenizer type 'Digits' is not
// supported"); the parts live in backends/src/hf_*.
//
// byte_vocab(): byte-level pieces give the bytes they spell; other pieces their text
// with U+2581 read as a space, and <0xHH> byte-fallback pieces the byte HH; added tokens
// that are not special give their content's bytes; special tokens and the unk token
// std::nullopt (text does not encode to them as bytes).
//
// Thread contract: immutable after construction; const methods may be called from many
// threads at once (nothing is cached or mutated while encoding).

#include <canopy/backends/tokenizers/tokenizer.hpp>

#include <filesystem>
#include <memory>
#include <optional>

namespace canopy::backends {

class hf_tokenizer final : public tokenizer_i {
public:
  /// Throws tokenizer_error naming the file, where in it, and what is wrong or
  /// unsupported.
  explicit hf_tokenizer(const std::filesystem::path& tokenizer_json);
  /// A tokenizer.json document given as text (one a GGUF file's metadata describes);
  /// `source` names it in errors.
  hf_tokenizer(const std::string& tokenizer_json_text, const std::string& source);
  ~hf_tokenizer() override;

  using tokenizer_i::encode;
  /// Throws std::invalid_argument for text that is not UTF-8 where a normalizer or the
  /// model must read characters.
  std::vector<cache::token_id> encode(std::string_view text,
                                      bool add_special_tokens) const override;
  /// HF's decode(ids, skip_special_tokens=false).
  std::string decode(const std::vector<cache::token_id>& ids) const override;
  const std::vector<std::optional<std::string>>& byte_vocab() const override;
  std::string_view kind() const override { return "tokenizer.json"; }

  /// An added token's content, or a model piece as the file spells it.
  std::optional<cache::token_id> token_id_of(std::string_view token) const override;
  std::optional<std::string> token_text(cache::token_id id) const override;
  std::vector<merge_rule> merge_rules() const override;

private:
  struct parts;
  std::unique_ptr<const parts> parts_;
};

} // namespace canopy::backends
