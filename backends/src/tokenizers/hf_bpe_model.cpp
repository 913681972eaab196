// tokenizer.json's BPE model (see hf_bpe_model.hpp).
#include "tokenizers/hf_bpe_model.hpp"

#include "tokenizers/hf_pieces.hpp"
#include "tokenizers/utf8.hpp"

#include <canopy/backends/tokenizers/byte_level_alphabet.hpp>

#include <limits>
#include <stdexcept>

namespace canopy::backends::hf {

namespace {

using cache::token_id;

bool only_metaspace(std::string_view piece) {
  for (std::size_t at = 0; at < piece.size(); at += metaspace.size())
    if (piece.compare(at, metaspace.size(), metaspace) != 0)
      return false;
  return !piece.empty();
}

/// A merge entry: "left right", or ["left", "right"] (tokenizers 0.20 and later).
std::pair<std::string, std::string> merge_pair(const json_node& entry) {
  const auto& v = entry.value();
  if (v.is_array() && v.size() == 2 && v[0].is_string() && v[1].is_string())
    return {v[0].get<std::string>(), v[1].get<std::string>()};
  if (v.is_string()) {
    const auto text = v.get<std::string>();
    const auto space = text.find(' ');
    if (space != std::string::npos && space > 0 && space + 1 < text.size() &&
        text.find(' ', space + 1) == std::string::npos)
      return {text.substr(0, space), text.substr(space + 1)};
  }
  entry.fail("a merge is \"left right\" or [\"left\", \"right\"]");
}

} // namespace

bpe_model::bpe_model(const json_node& spec, bool byte_level) : byte_level_(byte_level) {
  if (spec.has("dropout") && spec.at("dropout").value() != 0)
    spec.at("dropout").fail("BPE dropout samples its merges; it is not supported");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!spec.string(affix, "").empty())
      spec.at(affix).fail("is not supported (only null or \"\")");
  byte_fallback_ = spec.boolean("byte_fallback", false);
  fuse_unk_ = spec.boolean("fuse_unk", false);
  ignore_merges_ = spec.boolean("ignore_merges", false);

  const auto vocab = spec.at("vocab");
  if (!vocab.value().is_object() || vocab.value().empty())
    vocab.fail("is not a non-empty object of piece -> id");
  for (const auto& [piece, value] : vocab.value().items()) {
    // Ids need not be dense, but bounded: they size tables.
    constexpr std::int64_t max_id = std::int64_t{1} << 24;
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
        value.get<std::int64_t>() >= max_id)
      vocab.fail("the id of piece \"" + piece + "\" is not in 0.." +
                 std::to_string(max_id - 1));
    const auto id = value.get<std::size_t>();
    if (id >= pieces_.size())
      pieces_.resize(id + 1);
    if (pieces_[id])
      vocab.fail("id " + std::to_string(id) + " is given to two pieces ('" +
                 *pieces_[id] + "' and '" + piece + "')");
    pieces_[id] = piece;
    ids_.emplace(piece, static_cast<token_id>(id));
    if (byte_level_)
      if (auto bytes = byte_level_piece_bytes(piece))
        byte_ids_.emplace(std::move(*bytes), static_cast<token_id>(id));
  }
  if (spec.has("unk_token")) {
    const auto unk = spec.string("unk_token");
    auto it = ids_.find(unk);
    if (it == ids_.end())
      spec.at("unk_token").fail("'" + unk + "' is not in the vocabulary");
    unk_ = it->second;
  }
  for (unsigned b = 0; b < 256; ++b) {
    if (byte_level_) {
      auto it = byte_ids_.find(std::string(1, static_cast<char>(b)));
      if (it == byte_ids_.end())
        vocab.fail("byte-level BPE needs a piece for every byte; byte " +
                   fallback_piece(b) + " has none");
      single_byte_[b] = it->second;
    } else if (byte_fallback_) {
      auto it = ids_.find(fallback_piece(b));
      single_byte_[b] = it == ids_.end() ? -1 : it->second;
    }
  }

  for (unsigned c = 0; c < 128; ++c) {
    const auto it = ids_.find(std::string(1, static_cast<char>(c)));
    ascii_ids_[c] = it == ids_.end() ? -1 : it->second;
  }

  const auto merges = spec.list("merges");
  metaspace_chunks_ = !byte_level_;
  for (const auto& entry : merges) {
    const auto [left, right] = merge_pair(entry);
    if (right.compare(0, metaspace.size(), metaspace) == 0 && !only_metaspace(left))
      metaspace_chunks_ = false;
    const auto l = ids_.find(left), r = ids_.find(right), m = ids_.find(left + right);
    if (l == ids_.end() || r == ids_.end() || m == ids_.end())
      entry.fail("merges pieces that are not in the vocabulary ('" + left + "', '" +
                 right + "' or '" + left + right + "')");
    merges_.add(l->second, r->second, m->second);
  }
}

std::optional<token_id> bpe_model::id_of(std::string_view piece) const {
  const auto it = ids_.find(std::string(piece));
  return it == ids_.end() ? std::nullopt : std::optional<token_id>(it->second);
}

void bpe_model::first_symbols(std::string_view word,
                              std::vector<token_id>& symbols) const {
  if (byte_level_) {
    for (const char c : word)
      symbols.push_back(single_byte_[static_cast<unsigned char>(c)]);
    return;
  }
  bool previous_unk = false;
  for (std::size_t at = 0; at < word.size();) {
    const auto c = static_cast<unsigned char>(word[at]);
    if (c < 0x80 && ascii_ids_[c] >= 0) { // the common case, without a string
      symbols.push_back(ascii_ids_[c]);
      previous_unk = false;
      ++at;
      continue;
    }
    const std::size_t start = at;
    if (!utf8::next(word, at))
      throw std::invalid_argument("text is not valid UTF-8 at byte " +
                                  std::to_string(start));
    const std::string character(word.substr(start, at - start));
    if (auto it = ids_.find(character); it != ids_.end()) {
      symbols.push_back(it->second);
      previous_unk = false;
      continue;
    }
    bool spelled = byte_fallback_;
    for (std::size_t i = start; spelled && i < at; ++i)
      spelled = single_byte_[static_cast<unsigned char>(word[i])] >= 0;
    if (spelled) {
      for (std::size_t i = start; i < at; ++i)
        symbols.push_back(single_byte_[static_cast<unsigned char>(word[i])]);
      previous_unk = false;
      continue;
    }
    if (!unk_)
      throw std::invalid_argument("'" + character +
                                  "' is not in the vocabulary, which has "
                                  "no unk_token");
    if (!(fuse_unk_ && previous_unk))
      symbols.push_back(*unk_);
    previous_unk = true;
  }
}

void bpe_model::encode(std::string_view word, std::vector<token_id>& out) const {
  if (word.empty())
    return;
  if (ignore_merges_) {
    const auto& table = byte_level_ ? byte_ids_ : ids_;
    if (auto it = table.find(std::string(word)); it != table.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (!metaspace_chunks_) {
    merge_word(word, out);
    return;
  }
  // Cut before every run of U+2581 (Note [metaspace chunks]).
  std::size_t begin = 0;
  for (auto next = word.find(metaspace, 1); next != std::string_view::npos;
       next = word.find(metaspace, next + metaspace.size())) {
    const bool run_starts =
        next < metaspace.size() ||
        word.compare(next - metaspace.size(), metaspace.size(), metaspace) != 0;
    if (run_starts) {
      merge_word(word.substr(begin, next - begin), out);
      begin = next;
    }
  }
  merge_word(word.substr(begin), out);
}

void bpe_model::merge_word(std::string_view word, std::vector<token_id>& out) const {
  std::vector<token_id> symbols;
  symbols.reserve(word.size());
  first_symbols(word, symbols);
  merges_.merge(std::move(symbols), out);
}

} // namespace canopy::backends::hf
