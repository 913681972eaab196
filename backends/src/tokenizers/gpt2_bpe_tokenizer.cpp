// GPT-2 byte-level BPE (see gpt2_bpe_tokenizer.hpp).
#include <canopy/backends/tokenizers/gpt2_bpe_tokenizer.hpp>

#include <canopy/backends/tokenizers/byte_level_alphabet.hpp>

#include "tokenizers/bpe_merges.hpp"
#include "tokenizers/gpt2_pretokenizer.hpp"
#include "tokenizers/tokenizer_files.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>

namespace canopy::backends {

namespace {

using cache::token_id;

bool is_control_piece(std::string_view piece) {
  return piece.size() > 4 && piece.substr(0, 2) == "<|" &&
         piece.substr(piece.size() - 2) == "|>";
}

std::string hex_byte(unsigned b) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "0x%02X", b);
  return buffer;
}

} // namespace

gpt2_bpe_tokenizer::gpt2_bpe_tokenizer(const std::filesystem::path& vocab_json,
                                       const std::filesystem::path& merges_txt)
    : pretokenizer_(std::make_unique<gpt2_pretokenizer>()),
      merges_(std::make_unique<bpe_merges>()) {
  // vocab.json: a JSON object piece -> id, ids exactly 0..N-1 (dense, so every id in
  // range has a piece and decode needs no "hole" case).
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(tokenizer_detail::read_file(vocab_json));
  } catch (const nlohmann::json::exception& e) {
    tokenizer_detail::fail(vocab_json, std::string("not valid JSON: ") + e.what());
  }
  if (!vocab.is_object() || vocab.empty())
    tokenizer_detail::fail(
        vocab_json,
        "expected a non-empty JSON object mapping piece strings to token ids");
  const std::size_t n = vocab.size();
  if (n > static_cast<std::size_t>(std::numeric_limits<token_id>::max()))
    tokenizer_detail::fail(vocab_json, "too many pieces");
  std::vector<const std::string*> pieces(n, nullptr);
  piece_ids_.reserve(n);
  for (const auto& [piece, value] : vocab.items()) {
    if (!value.is_number_integer())
      tokenizer_detail::fail(vocab_json,
                             "the id of piece \"" + piece + "\" is not an integer");
    // Unsigned values beyond int64 are clamped so they report as out of range, not
    // negative.
    const std::int64_t id =
        value.is_number_unsigned()
            ? static_cast<std::int64_t>(std::min<std::uint64_t>(
                  value.get<std::uint64_t>(), std::numeric_limits<std::int64_t>::max()))
            : value.get<std::int64_t>();
    if (id < 0 || static_cast<std::uint64_t>(id) >= n)
      tokenizer_detail::fail(vocab_json, "the id " + std::to_string(id) + " of piece \"" +
                                             piece + "\" is outside 0.." +
                                             std::to_string(n - 1) +
                                             " (ids must be 0..N-1 for N pieces)");
    auto& slot = pieces[static_cast<std::size_t>(id)];
    if (slot != nullptr)
      tokenizer_detail::fail(vocab_json, "duplicate id " + std::to_string(id) +
                                             " (pieces \"" + *slot + "\" and \"" + piece +
                                             "\")");
    slot = &piece_ids_.emplace(piece, static_cast<token_id>(id)).first->first;
  }

  byte_vocab_.resize(n);
  decoded_.resize(n);
  for (std::size_t id = 0; id < n; ++id) {
    const std::string& piece = *pieces[id];
    auto bytes = byte_level_piece_bytes(piece);
    if (bytes && !is_control_piece(piece)) {
      decoded_[id] = *bytes;
      byte_vocab_[id] = std::move(bytes);
    } else {
      // Control tokens (<|endoftext|>) and added tokens spelled outside the byte
      // alphabet: encode never produces them from text, so they have no bytes; decode
      // writes the piece's own text.
      decoded_[id] = piece;
    }
  }

  for (unsigned b = 0; b < 256; ++b) {
    const std::string piece = byte_level_piece(std::string(1, static_cast<char>(b)));
    auto it = piece_ids_.find(piece);
    if (it == piece_ids_.end())
      tokenizer_detail::fail(vocab_json, "no piece for byte " + hex_byte(b) + " (\"" +
                                             piece + "\"); byte-level BPE needs all 256");
    byte_ids_[b] = it->second;
  }

  // merges.txt: an optional "#version" line, then one "left right" pair per line, in rank
  // order. A pair listed twice keeps its later rank, as encoder.py's dict does.
  const std::string text = tokenizer_detail::read_file(merges_txt);
  std::size_t line_start = 0;
  std::size_t line_number = 0;
  while (line_start < text.size()) {
    std::size_t line_end = text.find('\n', line_start);
    if (line_end == std::string::npos)
      line_end = text.size();
    std::string_view line(text.data() + line_start, line_end - line_start);
    line_start = line_end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.empty() || (line_number == 1 && line.substr(0, 8) == "#version"))
      continue;
    const auto where = "line " + std::to_string(line_number) + ": ";
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      tokenizer_detail::fail(
          merges_txt, where + "expected two pieces separated by one space, got \"" +
                          std::string(line) + "\"");
    const std::string left(line.substr(0, space));
    const std::string right(line.substr(space + 1));
    const auto find = [&](const std::string& piece, const char* role) {
      auto it = piece_ids_.find(piece);
      if (it == piece_ids_.end())
        tokenizer_detail::fail(merges_txt, where + role + " piece \"" + piece +
                                               "\" is not in " +
                                               vocab_json.filename().string());
      return it->second;
    };
    const token_id l = find(left, "left");
    const token_id r = find(right, "right");
    const token_id result = find(left + right, "merged");
    merges_->add(l, r, result);
  }
}

gpt2_bpe_tokenizer::~gpt2_bpe_tokenizer() = default;

std::vector<merge_rule> gpt2_bpe_tokenizer::merge_rules() const {
  return merges_->rules();
}

std::optional<cache::token_id>
gpt2_bpe_tokenizer::piece_id(std::string_view piece) const {
  auto it = piece_ids_.find(std::string(piece));
  if (it == piece_ids_.end())
    return std::nullopt;
  return it->second;
}

void gpt2_bpe_tokenizer::bpe(std::string_view word, std::vector<token_id>& out) const {
  std::vector<token_id> symbols(word.size());
  for (std::size_t i = 0; i < word.size(); ++i)
    symbols[i] = byte_ids_[static_cast<unsigned char>(word[i])];
  merges_->merge(std::move(symbols), out);
}

std::optional<std::string> gpt2_bpe_tokenizer::token_text(token_id id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= decoded_.size() ||
      byte_vocab_[static_cast<std::size_t>(id)])
    return std::nullopt;
  return decoded_[static_cast<std::size_t>(id)];
}

std::vector<cache::token_id>
gpt2_bpe_tokenizer::encode(std::string_view text, bool /*add_special_tokens*/) const {
  std::vector<token_id> ids;
  ids.reserve(text.size() / 3 + 1);
  for (std::string_view word : pretokenizer_->split(text))
    bpe(word, ids);
  return ids;
}

std::string gpt2_bpe_tokenizer::decode(const std::vector<cache::token_id>& ids) const {
  std::string out;
  for (token_id id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= decoded_.size())
      throw std::invalid_argument(
          "token id " + std::to_string(id) + " is out of range [0, " +
          std::to_string(decoded_.size()) + ") of the GPT-2 vocabulary");
    out += decoded_[static_cast<std::size_t>(id)];
  }
  return out;
}

} // namespace canopy::backends
