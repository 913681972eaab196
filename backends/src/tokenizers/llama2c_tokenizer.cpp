// llama2.c tokenizer.bin and run.c's encode/decode (see llama2c_tokenizer.hpp).
#include <canopy/backends/tokenizers/llama2c_tokenizer.hpp>

#include "tokenizers/hf_pieces.hpp"
#include "tokenizers/symbol_chain.hpp"
#include "tokenizers/tokenizer_files.hpp"

#include <cstdint>
#include <cstring>
#include <queue>

namespace canopy::backends {

namespace {

using cache::token_id;

// Reads little-endian values byte by byte, so the host's byte order does not matter.
std::uint32_t read_u32(const std::string& bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]);
  return v;
}

std::int32_t read_i32(const std::string& bytes, std::size_t at) {
  const std::uint32_t u = read_u32(bytes, at);
  std::int32_t v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

float read_f32(const std::string& bytes, std::size_t at) {
  const std::uint32_t u = read_u32(bytes, at);
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// run.c only merges a pair whose score beats its initial best_score of -1e10.
constexpr float merge_floor = -1e10f;

} // namespace

llama2c_tokenizer::llama2c_tokenizer(const std::filesystem::path& file) {
  const std::string bytes = tokenizer_detail::read_file(file);
  if (bytes.size() < 4)
    tokenizer_detail::fail(file,
                           "truncated: " + std::to_string(bytes.size()) +
                               " bytes, too short for the int32 max_token_length header");
  max_token_length_ = read_i32(bytes, 0);
  if (max_token_length_ <= 0)
    tokenizer_detail::fail(
        file, "max_token_length is " + std::to_string(max_token_length_) +
                  ", expected a positive length (not a llama2.c tokenizer file?)");
  std::size_t at = 4;
  while (at < bytes.size()) {
    const std::string id = std::to_string(pieces_.size());
    if (bytes.size() - at < 8)
      tokenizer_detail::fail(file, "truncated: entry of id " + id + " at offset " +
                                       std::to_string(at) +
                                       " needs 8 bytes (float32 score, int32 length), " +
                                       std::to_string(bytes.size() - at) + " left");
    const float score = read_f32(bytes, at);
    const std::int32_t length = read_i32(bytes, at + 4);
    at += 8;
    // run.c sizes its merge buffer from max_token_length; a longer piece is a corrupt
    // file.
    if (length < 0 || length > max_token_length_)
      tokenizer_detail::fail(file, "id " + id + " has piece length " +
                                       std::to_string(length) +
                                       ", outside 0..max_token_length (" +
                                       std::to_string(max_token_length_) + ")");
    if (bytes.size() - at < static_cast<std::size_t>(length))
      tokenizer_detail::fail(file, "truncated: piece of id " + id + " needs " +
                                       std::to_string(length) + " bytes at offset " +
                                       std::to_string(at) + ", " +
                                       std::to_string(bytes.size() - at) + " left");
    pieces_.emplace_back(bytes, at, static_cast<std::size_t>(length));
    scores_.push_back(score);
    at += static_cast<std::size_t>(length);
  }
  index(file);
}

llama2c_tokenizer::llama2c_tokenizer(std::vector<std::string> pieces,
                                     std::vector<float> scores,
                                     const std::filesystem::path& source)
    : pieces_(std::move(pieces)), scores_(std::move(scores)) {
  if (scores_.size() != pieces_.size())
    tokenizer_detail::fail(source, std::to_string(pieces_.size()) + " pieces but " +
                                       std::to_string(scores_.size()) + " scores");
  for (const auto& piece : pieces_)
    max_token_length_ = std::max(max_token_length_, static_cast<int>(piece.size()));
  index(source);
}

void llama2c_tokenizer::index(const std::filesystem::path& file) {
  // Byte fallback writes byte + 3, so those ids must be the byte pieces.
  if (pieces_.size() < 259)
    tokenizer_detail::fail(file, "only " + std::to_string(pieces_.size()) +
                                     " pieces; a llama2.c tokenizer has at least 259 (3 "
                                     "control, 256 byte pieces)");
  byte_of_.resize(pieces_.size());
  byte_vocab_.resize(pieces_.size());
  for (std::size_t id = 0; id < pieces_.size(); ++id) {
    const std::string& piece = pieces_[id];
    // run.c's sscanf "<0x%02hhX>" reads either case of hex digits, as fallback_byte does.
    const auto byte = hf::fallback_byte(piece);
    byte_of_[id] = byte ? *byte : -1;
    if (id >= 3 && id < 259 && byte_of_[id] != static_cast<int>(id) - 3)
      tokenizer_detail::fail(file, "id " + std::to_string(id) + " is the piece \"" +
                                       piece + "\", but byte fallback needs <0x" +
                                       "0123456789ABCDEF"[(id - 3) / 16] +
                                       "0123456789ABCDEF"[(id - 3) % 16] + "> there");
    piece_ids_.emplace(piece,
                       static_cast<token_id>(id)); // a repeated piece keeps its first id
    if (id == unk_id || id == bos_id || id == eos_id)
      continue; // control tokens stand for no bytes
    byte_vocab_[id] =
        byte_of_[id] >= 0 ? std::string(1, static_cast<char>(byte_of_[id])) : piece;
  }
  space_id_ = lookup(" ");
}

std::optional<cache::token_id> llama2c_tokenizer::lookup(const std::string& piece) const {
  auto it = piece_ids_.find(piece);
  if (it == piece_ids_.end())
    return std::nullopt;
  return it->second;
}

std::optional<std::string> llama2c_tokenizer::token_text(token_id id) const {
  if (id != unk_id && id != bos_id && id != eos_id)
    return std::nullopt;
  const std::string& piece = pieces_[static_cast<std::size_t>(id)];
  const auto first = piece.find_first_not_of("\n");
  const auto last = piece.find_last_not_of("\n");
  return first == std::string::npos ? piece : piece.substr(first, last - first + 1);
}

std::vector<cache::token_id> llama2c_tokenizer::encode(std::string_view text,
                                                       bool add_special_tokens) const {
  std::vector<token_id> symbols;
  if (add_special_tokens)
    symbols.push_back(bos_id);
  // run.c pushes str_lookup(" ") unchecked; a vocabulary without " " gets no dummy prefix
  // instead of run.c's invalid id -1.
  if (!text.empty() && space_id_)
    symbols.push_back(*space_id_);

  // Code points -> pieces, exactly as run.c's byte loop: a lead byte starts a new buffer,
  // continuation bytes join it (at most 4 bytes); the buffer is then looked up whole, or
  // spelled with byte-fallback ids. Invalid UTF-8 falls out as byte fallback the same
  // way.
  std::string buffer;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80)
      buffer.clear();
    buffer += static_cast<char>(c);
    const bool continuation_follows =
        i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80;
    if (continuation_follows && buffer.size() < 4)
      continue;
    if (auto id = lookup(buffer)) {
      symbols.push_back(*id);
    } else {
      for (char b : buffer)
        symbols.push_back(static_cast<token_id>(static_cast<unsigned char>(b)) + 3);
    }
    buffer.clear();
  }

  // Greedy merges over a linked list of symbols. Candidates are ordered by score, then by
  // position (lower first): the pair run.c's rescan would pick. Stale candidates (a side
  // merged since) are skipped when popped.
  struct candidate {
    float score;
    std::size_t left;
    std::size_t right;
    token_id left_id;
    token_id right_id;
    token_id result;
  };
  const auto lower_priority = [](const candidate& a, const candidate& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<candidate, std::vector<candidate>, decltype(lower_priority)> heap(
      lower_priority);
  const std::size_t n = symbols.size();
  symbol_chain chain(std::move(symbols));
  std::string pair;
  const auto consider = [&](std::size_t left, std::size_t right) {
    if (left == symbol_chain::none || right == symbol_chain::none)
      return;
    pair = pieces_[static_cast<std::size_t>(chain.at(left))];
    pair += pieces_[static_cast<std::size_t>(chain.at(right))];
    auto id = lookup(pair);
    if (!id)
      return;
    const float score = scores_[static_cast<std::size_t>(*id)];
    if (score > merge_floor) // also false for NaN, as in run.c
      heap.push(candidate{score, left, right, chain.at(left), chain.at(right), *id});
  };
  for (std::size_t i = 0; i + 1 < n; ++i)
    consider(i, i + 1);
  while (!heap.empty()) {
    const candidate c = heap.top();
    heap.pop();
    if (!chain.stands(c.left, c.right, c.left_id, c.right_id))
      continue;
    chain.merge(c.left, c.right, c.result);
    consider(chain.prev(c.left), c.left);
    consider(c.left, chain.next(c.left));
  }

  std::vector<token_id> ids;
  ids.reserve(n);
  chain.append_to(ids);
  return ids;
}

std::string llama2c_tokenizer::decode(const std::vector<cache::token_id>& ids) const {
  std::string out;
  token_id prev = -1;
  for (token_id id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= pieces_.size())
      throw std::invalid_argument(
          "token id " + std::to_string(id) + " is out of range [0, " +
          std::to_string(pieces_.size()) + ") of the llama2.c vocabulary");
    const auto index = static_cast<std::size_t>(id);
    if (byte_of_[index] >= 0) {
      out += static_cast<char>(byte_of_[index]);
    } else if (id != unk_id && id != bos_id && id != eos_id) {
      std::string_view piece = pieces_[index];
      if (prev == bos_id && !piece.empty() && piece.front() == ' ')
        piece.remove_prefix(1); // run.c: the dummy prefix after BOS is not text
      out += piece;
    }
    prev = id;
  }
  return out;
}

} // namespace canopy::backends
