#include <canopy/server/completion_response.hpp>

#include <canopy/backends/valid_utf8.hpp>

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
    top.emplace(token_spelling(texts, id), logprob); // the first spelling of equal ones wins
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

std::optional<std::size_t> stop_position(const token_texts& texts,
                                         const cache::token_seq& generated,
                                         const std::vector<std::string>& stop) {
  std::string text;
  for (const auto id : generated)
    text += bytes_of(texts, id);
  std::optional<std::size_t> first;
  for (const auto& s : stop) {
    const auto at = text.find(s);
    if (at != std::string::npos && (!first || at < *first))
      first = at;
  }
  return first;
}

bool ends_in_stop(const token_texts& texts, const cache::token_seq& generated,
                  const std::vector<std::string>& stop) {
  if (generated.empty())
    return false;
  std::size_t longest = 0;
  for (const auto& s : stop)
    longest = std::max(longest, s.size());
  // The last token's bytes, and before them as many as a stop string could need.
  const auto last = bytes_of(texts, generated.back()).size();
  std::string tail;
  for (auto i = generated.size(); i-- > 0 && tail.size() < last + longest;)
    tail.insert(0, bytes_of(texts, generated[i]));
  for (const auto& s : stop) {
    const auto at = tail.rfind(s);
    if (at != std::string::npos && at + s.size() > tail.size() - last)
      return true;
  }
  return false;
}

namespace {

/// One token of a choice as it reads: its spelling and scores, the bytes it adds to
/// the text (cut at a stop string), and where it starts in the text, in code points.
struct token_piece {
  std::int32_t id = 0;
  const token_score* score = nullptr; // null: the first echoed token
  std::string bytes;
  std::size_t offset = 0;
};

/// Walks a choice's tokens (echoed, then generated up to the stop), calling
/// visit(token_piece); returns the finish_reason.
template <class Visit>
const char* walk_choice(const completion_result& result, const completion_format& format,
                        const token_texts& texts, Visit visit) {
  const auto cut = stop_position(texts, result.generated, format.stop);
  std::string text; // so far, for offsets
  const auto add = [&](std::int32_t id, const token_score* score, std::size_t limit) {
    if (text.size() >= limit)
      return false;
    token_piece piece{id, score, bytes_of(texts, id), code_points(text)};
    if (text.size() + piece.bytes.size() > limit)
      piece.bytes.resize(limit - text.size());
    text += piece.bytes;
    visit(piece);
    return true;
  };
  if (format.echo)
    for (std::size_t i = 0; i < result.prompt.size(); ++i)
      add(result.prompt[i],
          i > 0 && i - 1 < result.prompt_scores.size() ? &result.prompt_scores[i - 1] : nullptr,
          std::string::npos);
  const auto limit = cut ? text.size() + *cut : std::string::npos;
  for (std::size_t i = 0; i < result.generated.size(); ++i)
    if (!add(result.generated[i],
             i < result.generated_scores.size() ? &result.generated_scores[i] : nullptr,
             limit))
      break;
  return result.stopped || cut ? "stop" : "length";
}

/// The logprobs object of `pieces`.
json logprobs_of(const std::vector<token_piece>& pieces, const token_texts& texts) {
  json tokens = json::array(), logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  for (const auto& p : pieces) {
    tokens.push_back(token_spelling(texts, p.id));
    logprobs.push_back(p.score ? json(p.score->logprob) : json(nullptr));
    tops.push_back(p.score ? top_object(texts, *p.score) : json(nullptr));
    offsets.push_back(p.offset);
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

json completion_choice(const completion_result& result, std::size_t index,
                       const completion_format& format, const token_texts& texts) {
  std::string text;
  std::vector<token_piece> pieces;
  const auto finish = walk_choice(result, format, texts, [&](token_piece& piece) {
    text += piece.bytes;
    pieces.push_back(std::move(piece));
  });
  return choice_json(std::move(text), index, format.logprobs ? logprobs_of(pieces, texts) : json(nullptr),
                     finish);
}

std::vector<json> completion_chunks(const completion_result& result, std::size_t index,
                                    const completion_format& format, const token_texts& texts) {
  std::vector<json> chunks;
  const auto finish = walk_choice(result, format, texts, [&](token_piece& piece) {
    chunks.push_back(choice_json(piece.bytes, index,
                                 format.logprobs ? logprobs_of({piece}, texts) : json(nullptr),
                                 nullptr));
  });
  chunks.push_back(choice_json("", index, nullptr, finish));
  return chunks;
}

} // namespace canopy::server
