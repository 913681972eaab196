#include <canopy/backends/tokenizers/gguf_tokenizer.hpp>

#include <canopy/backends/checkpoints/gguf_file.hpp>
#include <canopy/backends/tokenizers/hf_tokenizer.hpp>
#include <canopy/backends/tokenizers/llama2c_tokenizer.hpp>

#include "tokenizers/tokenizer_files.hpp"

#include <nlohmann/json.hpp>

#include <array>

namespace canopy::backends {

namespace {

using json = nlohmann::json;

/// llama.cpp's token types (llama_token_type).
constexpr std::int64_t control_token = 3, user_defined_token = 4;

struct bpe_pre {
  std::array<const char*, 2> names; // llama.cpp's names for it; the second may be null
  const char* regex; // the Split pre-tokenizer's, as the models' tokenizer.json
  bool ignore_merges;
  bool nfc;
};

const std::array<bpe_pre, 3> bpe_pres{{
    {{"default", "gpt2"},
     "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
     false,
     false},
    {{"llama-bpe", nullptr},
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     true,
     false},
    {{"qwen2", nullptr},
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     false,
     true},
}};

[[noreturn]] void fail(const gguf_file& file, const std::string& what) {
  tokenizer_detail::fail(file.source(), what);
}

template <class T>
const std::vector<T>& required_array(const gguf_file& file, const std::string& key) {
  const auto* values = file.array<T>(key);
  if (!values)
    fail(file, "no " + key + " in the metadata");
  return *values;
}

std::unique_ptr<tokenizer_i> sentencepiece_style(const gguf_file& file) {
  const auto& tokens = required_array<std::string>(file, "tokenizer.ggml.tokens");
  const auto& scores = required_array<double>(file, "tokenizer.ggml.scores");
  const std::string space = "\xe2\x96\x81"; // U+2581
  std::vector<std::string> pieces;
  pieces.reserve(tokens.size());
  for (auto piece : tokens) {
    for (auto at = piece.find(space); at != std::string::npos; at = piece.find(space, at))
      piece.replace(at, space.size(), " ");
    pieces.push_back(std::move(piece));
  }
  for (const auto& [key, id] :
       {std::pair{"tokenizer.ggml.unknown_token_id", llama2c_tokenizer::unk_id},
        std::pair{"tokenizer.ggml.bos_token_id", llama2c_tokenizer::bos_id},
        std::pair{"tokenizer.ggml.eos_token_id", llama2c_tokenizer::eos_id}})
    if (const auto given = file.integer(key); given && *given != id)
      fail(file, std::string(key) + " is " + std::to_string(*given) +
                     "; a SentencePiece "
                     "vocabulary is served with unk, BOS and EOS at ids 0, 1 and 2");
  if (!file.integer("tokenizer.ggml.add_bos_token").value_or(1))
    fail(file, "tokenizer.ggml.add_bos_token is false; a SentencePiece vocabulary is "
               "served adding BOS");
  return std::make_unique<llama2c_tokenizer>(
      std::move(pieces), std::vector<float>(scores.begin(), scores.end()), file.source());
}

std::unique_ptr<tokenizer_i> byte_level_bpe(const gguf_file& file) {
  const auto& tokens = required_array<std::string>(file, "tokenizer.ggml.tokens");
  const auto& merges = required_array<std::string>(file, "tokenizer.ggml.merges");
  const auto* types = file.array<std::int64_t>("tokenizer.ggml.token_type");
  if (types && types->size() != tokens.size())
    fail(file, "tokenizer.ggml.token_type has " + std::to_string(types->size()) +
                   " entries for " + std::to_string(tokens.size()) + " tokens");
  const auto pre_name = file.string("tokenizer.ggml.pre").value_or("default");
  const bpe_pre* pre = nullptr;
  for (const auto& p : bpe_pres)
    for (const char* name : p.names)
      if (name && pre_name == name)
        pre = &p;
  if (!pre)
    fail(file, "tokenizer.ggml.pre '" + pre_name +
                   "' is not served (default, gpt2, llama-bpe, qwen2)");

  json vocab = json::object(), added = json::array();
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    const auto type = types ? (*types)[id] : 1;
    if (type == control_token || type == user_defined_token)
      added.push_back({{"id", id},
                       {"content", tokens[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", type == control_token}});
    else
      vocab[tokens[id]] = id;
  }
  json post = nullptr;
  if (file.integer("tokenizer.ggml.add_bos_token").value_or(0)) {
    const auto bos = file.integer("tokenizer.ggml.bos_token_id");
    if (!bos || *bos < 0 || static_cast<std::size_t>(*bos) >= tokens.size())
      fail(file,
           "tokenizer.ggml.add_bos_token is set without a BOS id in the vocabulary");
    post = {{"type", "TemplateProcessing"},
            {"single", json::array({{{"SpecialToken", {{"id", "bos"}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
            {"pair", json::array()},
            {"special_tokens",
             {{"bos", {{"id", "bos"}, {"ids", {*bos}}, {"tokens", {tokens[*bos]}}}}}}};
  }
  const json document = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", pre->nfc ? json{{"type", "NFC"}} : json(nullptr)},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", json::array({{{"type", "Split"},
                                        {"pattern", {{"Regex", pre->regex}}},
                                        {"behavior", "Isolated"},
                                        {"invert", false}},
                                       {{"type", "ByteLevel"},
                                        {"add_prefix_space", false},
                                        {"trim_offsets", false},
                                        {"use_regex", false}}})}}},
      {"post_processor", post},
      {"decoder",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"trim_offsets", false},
        {"use_regex", false}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", pre->ignore_merges},
        {"vocab", vocab},
        {"merges", merges}}}};
  return std::make_unique<hf_tokenizer>(document.dump(), file.source() + " (metadata)");
}

} // namespace

std::unique_ptr<tokenizer_i> load_gguf_tokenizer(const gguf_file& file) {
  const auto model = file.string("tokenizer.ggml.model");
  if (!model || *model == "no_vocab")
    return nullptr;
  if (*model == "llama")
    return sentencepiece_style(file);
  if (*model == "gpt2")
    return byte_level_bpe(file);
  fail(file, "tokenizer.ggml.model '" + *model + "' is not served (llama, gpt2)");
}

} // namespace canopy::backends
