// HF tokenizer.json (see hf_tokenizer.hpp).
#include <canopy/backends/tokenizers/hf_tokenizer.hpp>

#include <canopy/backends/tokenizers/byte_level_alphabet.hpp>

#include "tokenizers/hf_added_tokens.hpp"
#include "tokenizers/hf_bpe_model.hpp"
#include "tokenizers/hf_decoder.hpp"
#include "tokenizers/hf_normalizer.hpp"
#include "tokenizers/hf_pieces.hpp"
#include "tokenizers/hf_post_processor.hpp"
#include "tokenizers/hf_pre_tokenizer.hpp"
#include "tokenizers/tokenizer_files.hpp"

#include <stdexcept>

namespace canopy::backends {

namespace {

using cache::token_id;

nlohmann::json parse(const std::filesystem::path& path) {
  try {
    return nlohmann::json::parse(tokenizer_detail::read_file(path));
  } catch (const nlohmann::json::exception& e) {
    tokenizer_detail::fail(path, std::string("not valid JSON: ") + e.what());
  }
}

} // namespace

struct hf_tokenizer::parts {
  parts(nlohmann::json document, const std::string& source)
      : json(std::move(document)), root(json, source, "tokenizer.json"),
        added(root.at("added_tokens")),
        normalizer(make_normalizer(root.at("normalizer"))),
        pre_tokenizer(make_pre_tokenizer(root.at("pre_tokenizer"))),
        model(read_model(root, pre_tokenizer != nullptr && pre_tokenizer->byte_level())),
        post(root.at("post_processor")), decoder(make_decoder(root.at("decoder"))) {
    if (root.has("truncation"))
      root.at("truncation").fail("is set; truncating encodings is not supported");
    build_tokens();
    post.require_ids_below(tokens.size(), root.at("post_processor"));
  }

  static hf::bpe_model read_model(const hf::json_node& root, bool byte_level) {
    const auto spec = root.at("model");
    if (spec.string("type", "BPE") != "BPE")
      spec.unsupported("model", "BPE");
    return hf::bpe_model(spec, byte_level);
  }

  /// Every id's token string and bytes.
  void build_tokens() {
    std::size_t n = model.pieces().size();
    for (const auto& t : added.all())
      n = std::max(n, static_cast<std::size_t>(t.id) + 1);
    tokens.assign(n, std::nullopt);
    byte_vocab.assign(n, std::nullopt);
    for (std::size_t id = 0; id < model.pieces().size(); ++id) {
      if (!model.pieces()[id])
        continue;
      const auto& piece = *model.pieces()[id];
      tokens[id] = piece;
      if (model.unk() && *model.unk() == static_cast<token_id>(id))
        continue;
      if (model.byte_level()) {
        byte_vocab[id] = byte_level_piece_bytes(piece);
      } else if (auto b = hf::fallback_byte(piece); b && model.byte_fallback()) {
        byte_vocab[id] = std::string(1, static_cast<char>(*b));
      } else {
        byte_vocab[id] =
            hf::replace_matches(piece, hf::find_literal(piece, hf::metaspace), " ");
      }
    }
    for (const auto& t : added.all()) {
      tokens[static_cast<std::size_t>(t.id)] = t.content;
      byte_vocab[static_cast<std::size_t>(t.id)] =
          t.special ? std::nullopt : std::optional<std::string>(t.content);
      token_ids[t.content] = t.id;
    }
  }

  /// Normalizes, pre-tokenizes and encodes one stretch of text between added tokens.
  void encode_plain(std::string_view text, bool at_start,
                    std::vector<token_id>& ids) const {
    std::string normalized(text);
    if (normalizer)
      normalizer->apply(normalized);
    if (added.any_normalized()) {
      for (const auto& part : added.split(normalized, true)) {
        if (part.token)
          ids.push_back(*part.token);
        else
          encode_words(part.text, at_start && part.text.data() == normalized.data(), ids);
      }
      return;
    }
    encode_words(normalized, at_start, ids);
  }

  void encode_words(std::string_view text, bool at_start,
                    std::vector<token_id>& ids) const {
    std::vector<hf::word> words{{std::string(text), at_start}};
    if (pre_tokenizer)
      pre_tokenizer->split(words);
    for (const auto& w : words)
      model.encode(w.text, ids);
  }

  nlohmann::json json;
  hf::json_node root;
  hf::added_tokens added;
  std::unique_ptr<const hf::normalizer> normalizer;
  std::unique_ptr<const hf::pre_tokenizer> pre_tokenizer;
  hf::bpe_model model;
  hf::post_processor post;
  std::unique_ptr<const hf::decoder> decoder;
  std::vector<std::optional<std::string>> tokens;      // [vocab] token strings
  std::vector<std::optional<std::string>> byte_vocab;  // [vocab]
  std::unordered_map<std::string, token_id> token_ids; // added tokens' contents
};

hf_tokenizer::hf_tokenizer(const std::filesystem::path& tokenizer_json)
    : parts_(std::make_unique<parts>(parse(tokenizer_json), tokenizer_json.string())) {}

hf_tokenizer::hf_tokenizer(const std::string& tokenizer_json_text,
                           const std::string& source)
    : parts_(
          std::make_unique<parts>(nlohmann::json::parse(tokenizer_json_text), source)) {}

hf_tokenizer::~hf_tokenizer() = default;

std::vector<token_id> hf_tokenizer::encode(std::string_view text,
                                           bool add_special_tokens) const {
  std::vector<token_id> ids;
  ids.reserve(text.size() / 3 + 2);
  for (const auto& part : parts_->added.split(text, false)) {
    if (part.token)
      ids.push_back(*part.token);
    else
      parts_->encode_plain(part.text, part.text.data() == text.data(), ids);
  }
  return add_special_tokens ? parts_->post.apply(std::move(ids)) : ids;
}

std::string hf_tokenizer::decode(const std::vector<token_id>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const auto id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= parts_->tokens.size() ||
        !parts_->tokens[static_cast<std::size_t>(id)])
      throw std::invalid_argument("token id " + std::to_string(id) +
                                  " is not in the tokenizer's vocabulary");
    tokens.push_back(*parts_->tokens[static_cast<std::size_t>(id)]);
  }
  if (parts_->decoder)
    tokens = parts_->decoder->decode(std::move(tokens));
  else if (!tokens.empty()) // HF joins undecoded tokens with spaces
    for (std::size_t i = tokens.size() - 1; i > 0; --i)
      tokens[i].insert(0, " ");
  std::string out;
  for (const auto& t : tokens)
    out += t;
  return out;
}

const std::vector<std::optional<std::string>>& hf_tokenizer::byte_vocab() const {
  return parts_->byte_vocab;
}

std::optional<std::string> hf_tokenizer::token_text(token_id id) const {
  const auto& tokens = parts_->tokens;
  if (id < 0 || static_cast<std::size_t>(id) >= tokens.size() ||
      parts_->byte_vocab[static_cast<std::size_t>(id)])
    return std::nullopt;
  return tokens[static_cast<std::size_t>(id)];
}

std::vector<merge_rule> hf_tokenizer::merge_rules() const {
  return parts_->model.merge_rules();
}

std::optional<token_id> hf_tokenizer::token_id_of(std::string_view token) const {
  if (auto it = parts_->token_ids.find(std::string(token)); it != parts_->token_ids.end())
    return it->second;
  return parts_->model.id_of(token);
}

} // namespace canopy::backends
