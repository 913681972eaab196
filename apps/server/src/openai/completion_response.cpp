#include <canopy/server/openai/completion_response.hpp>

#include <canopy/backends/tokenizers/valid_utf8.hpp>

#include <algorithm>
#include <cstdio>

namespace canopy::server {

namespace {

using nlohmann::json;

/// The bytes token `id` adds to a text ("" for a control token or an id past the
/// tokenizer).
const std::string& bytes_of(const token_texts& texts, std::int32_t id) {
  static const std::string none;
  const auto i = static_cast<std::size_t>(id);
  return i < texts.bytes.size() && texts.bytes[i] ? *texts.bytes[i] : none;
}

/// Code points in s: bytes that do not continue a character.
std::size_t code_points(const std::string& s) {
  return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

json top_object(const token_texts& texts, const token_score& score) {
  json top = json::object();
  for (const auto& [id, logprob] : score.top)
    top.emplace(token_spelling(texts, id),
                logprob); // the first spelling of equal ones wins
  return top;
}

} // namespace

std::string token_spelling(const token_texts& texts, std::int32_t id) {
  const auto i = static_cast<std::size_t>(id);
  if (i < texts.bytes.size() && texts.bytes[i]) {
    const auto& bytes = *texts.bytes[i];
    if (backends::valid_utf8(bytes))
      return bytes;
    std::string spelled = "bytes:";
    for (const char c : bytes) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
      spelled += hex;
    }
    return spelled;
  }
  if (i < texts.special.size() && texts.special[i])
    return *texts.special[i];
  return "";
}

choice_pieces::choice_pieces(std::vector<std::string> stop, const token_texts& texts)
    : stop_(std::move(stop)), texts_(texts) {
  for (const auto& s : stop_)
    longest_stop_ = std::max(longest_stop_, s.size());
}

token_piece choice_pieces::piece(std::int32_t id, std::optional<token_score> score,
                                 std::string bytes) {
  token_piece p{id, std::move(score), std::move(bytes), code_points_};
  code_points_ += code_points(p.bytes);
  return p;
}

std::vector<token_piece> choice_pieces::echo(const cache::token_seq& prompt,
                                             const std::vector<token_score>& scores) {
  std::vector<token_piece> pieces;
  for (std::size_t i = 0; i < prompt.size(); ++i)
    pieces.push_back(piece(prompt[i],
                           i > 0 && i - 1 < scores.size() ? std::optional(scores[i - 1])
                                                          : std::nullopt,
                           bytes_of(texts_, prompt[i])));
  return pieces;
}

std::vector<token_piece> choice_pieces::add(std::int32_t id,
                                            std::optional<token_score> score) {
  if (cut_)
    return {};
  const auto start = generated_.size();
  generated_ += bytes_of(texts_, id);
  held_.push_back({id, std::move(score), start});
  // Earlier tokens were searched: a new stop string ends in this token's bytes, so it
  // begins at most longest_stop_ - 1 bytes before them.
  const auto from = start - std::min(start, longest_stop_ > 0 ? longest_stop_ - 1 : 0);
  for (const auto& s : stop_) {
    const auto at = generated_.find(s, from);
    if (at != std::string::npos && (!cut_ || at < *cut_))
      cut_ = at;
  }
  if (cut_)
    return release(*cut_);
  // A stop string found later begins at most longest_stop_ - 1 bytes before the end.
  const auto safe =
      generated_.size() -
      std::min(generated_.size(), longest_stop_ > 0 ? longest_stop_ - 1 : 0);
  return release(safe);
}

std::vector<token_piece> choice_pieces::flush() {
  return release(cut_ ? *cut_ : generated_.size());
}

std::vector<token_piece> choice_pieces::release(std::size_t upto) {
  std::vector<token_piece> pieces;
  std::size_t given = 0;
  for (; given < held_.size(); ++given) {
    auto& token = held_[given];
    const auto end =
        given + 1 < held_.size() ? held_[given + 1].start : generated_.size();
    if (cut_ ? token.start >= *cut_ : end > upto)
      break;
    pieces.push_back(
        piece(token.id, std::move(token.score),
              generated_.substr(token.start, std::min(end, upto) - token.start)));
  }
  held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(given));
  if (cut_)
    held_.clear(); // from the stop string on, nothing more reads
  return pieces;
}

const char* choice_pieces::finish_reason(bool stopped) const {
  return stopped || cut_ ? "stop" : "length";
}

namespace {

/// The logprobs object of `pieces`.
json logprobs_of(const std::vector<const token_piece*>& pieces,
                 const token_texts& texts) {
  json tokens = json::array(), logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  for (const auto* p : pieces) {
    tokens.push_back(token_spelling(texts, p->id));
    logprobs.push_back(p->score ? json(p->score->logprob) : json(nullptr));
    tops.push_back(p->score ? top_object(texts, *p->score) : json(nullptr));
    offsets.push_back(p->offset);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

json choice_json(std::string text, std::size_t index, json logprobs, const char* finish) {
  return {{"text", std::move(text)},
          {"index", index},
          {"logprobs", std::move(logprobs)},
          {"finish_reason", finish ? json(finish) : json(nullptr)}};
}

} // namespace

json completion_choice(const std::vector<token_piece>& pieces, std::size_t index,
                       bool logprobs, const token_texts& texts,
                       const char* finish_reason) {
  std::string text;
  std::vector<const token_piece*> all;
  for (const auto& p : pieces) {
    text += p.bytes;
    all.push_back(&p);
  }
  return choice_json(std::move(text), index,
                     logprobs ? logprobs_of(all, texts) : json(nullptr), finish_reason);
}

json chunk_choice(const token_piece& piece, std::size_t index, bool logprobs,
                  const token_texts& texts) {
  return choice_json(piece.bytes, index,
                     logprobs ? logprobs_of({&piece}, texts) : json(nullptr), nullptr);
}

json finish_chunk_choice(std::size_t index, const char* finish_reason) {
  return choice_json("", index, nullptr, finish_reason);
}

} // namespace canopy::server
