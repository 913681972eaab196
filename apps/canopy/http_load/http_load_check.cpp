#include "http_load/http_load_check.hpp"

#include "http_load/http_load_json_scanner.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>

namespace canopy::app {

namespace {

constexpr std::size_t shown_body = 200; // of an error answer, in the error's message

std::uint32_t u32_at(std::string_view body, std::size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(body.data() + offset);
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
         std::uint32_t(p[3]) << 24;
}

std::string mismatch(const char* what, std::uint64_t got, std::uint64_t expected) {
  return std::string("binary: ") + what + " " + std::to_string(got) + ", expected " +
         std::to_string(expected);
}

// Offsets of the binary format's header (docs/http-api.md: "Binary log-prob format").
constexpr std::size_t header_bytes = 32;

std::string check_binary(std::string_view body, const std::vector<std::int32_t>& tokens,
                         std::size_t vocab) {
  const std::size_t n = tokens.size();
  const std::size_t expected_size = header_bytes + 4 + 4 * n + 4 * vocab;
  if (body.size() < header_bytes)
    return mismatch("body bytes", body.size(), expected_size);
  if (body.substr(0, 4) != "CNPY")
    return "binary: magic is not CNPY";
  const unsigned version =
      static_cast<unsigned char>(body[4]) | static_cast<unsigned char>(body[5]) << 8;
  if (version != 1)
    return mismatch("version", version, 1);
  if (body[6] != 1)
    return mismatch("dtype", static_cast<unsigned char>(body[6]), 1);
  if (body[7] != 0)
    return mismatch("layout", static_cast<unsigned char>(body[7]), 0);
  const struct {
    const char* name;
    std::size_t offset;
    std::uint64_t expected;
  } fields[] = {{"sequences", 8, 1},  {"rows", 12, 1},         {"cols", 16, vocab},
                {"vocab", 20, vocab}, {"total_tokens", 24, n}, {"reserved", 28, 0}};
  for (const auto& f : fields)
    if (u32_at(body, f.offset) != f.expected)
      return mismatch(f.name, u32_at(body, f.offset), f.expected);
  if (body.size() != expected_size)
    return mismatch("body bytes", body.size(), expected_size);
  if (u32_at(body, header_bytes) != n)
    return mismatch("sequence length", u32_at(body, header_bytes), n);
  for (std::size_t i = 0; i < n; ++i)
    if (static_cast<std::int32_t>(u32_at(body, header_bytes + 4 + 4 * i)) != tokens[i])
      return "binary: echoed token " + std::to_string(i) + " differs from the one sent";
  const char* values = body.data() + header_bytes + 4 + 4 * n;
  for (std::size_t i = 0; i < vocab; ++i) {
    float v;
    std::memcpy(&v, values + 4 * i, 4);
    if (std::isnan(v))
      return "binary: value " + std::to_string(i) + " is NaN";
  }
  return {};
}

std::string malformed(const json_scanner& s) {
  return "json: malformed at byte " + std::to_string(s.offset());
}

/// The "tokens" member's array: exactly the ids sent.
std::string check_json_tokens(json_scanner& s, const std::vector<std::int32_t>& tokens) {
  if (!s.eat('['))
    return malformed(s);
  std::size_t seen = 0;
  if (!s.eat(']')) {
    do {
      bool is_integer = false;
      std::int64_t id = 0;
      if (!s.number(is_integer, id))
        return malformed(s);
      if (seen < tokens.size() && (!is_integer || id != tokens[seen]))
        return "json: echoed token " + std::to_string(seen) +
               " differs from the one sent";
      ++seen;
    } while (s.eat(','));
    if (!s.eat(']'))
      return malformed(s);
  }
  if (seen != tokens.size())
    return "json: \"tokens\" has " + std::to_string(seen) + " ids, expected " +
           std::to_string(tokens.size());
  return {};
}

/// The "logprobs" member's array: `vocab` numbers, null standing for -inf.
std::string check_json_row(json_scanner& s, std::size_t vocab) {
  if (!s.eat('['))
    return malformed(s);
  std::size_t values = 0;
  if (!s.eat(']')) {
    do {
      if (s.peek('['))
        return "json: nested rows (one row was asked for)";
      bool is_integer = false;
      std::int64_t ignored = 0;
      if (!s.literal("null") && !s.number(is_integer, ignored))
        return malformed(s);
      ++values;
    } while (s.eat(','));
    if (!s.eat(']'))
      return malformed(s);
  }
  if (values != vocab)
    return "json: \"logprobs\" has " + std::to_string(values) + " values, expected " +
           std::to_string(vocab);
  return {};
}

/// {"tokens": [the ids sent], "logprobs": [a row]}, in any order, other members
/// allowed.
std::string check_json(std::string_view body, const std::vector<std::int32_t>& tokens,
                       std::size_t vocab) {
  json_scanner s(body);
  bool has_tokens = false, has_row = false;
  if (!s.eat('{'))
    return malformed(s);
  if (!s.eat('}')) {
    do {
      std::string_view key;
      if (!s.string(key) || !s.eat(':'))
        return malformed(s);
      std::string problem;
      if (key == "tokens") {
        problem = check_json_tokens(s, tokens);
        has_tokens = true;
      } else if (key == "logprobs") {
        problem = check_json_row(s, vocab);
        has_row = true;
      } else if (!s.skip_value()) {
        problem = malformed(s);
      }
      if (!problem.empty())
        return problem;
    } while (s.eat(','));
    if (!s.eat('}'))
      return malformed(s);
  }
  if (!s.at_end())
    return malformed(s);
  if (!has_tokens || !has_row)
    return std::string("json: no \"") + (has_tokens ? "logprobs" : "tokens") +
           "\" member";
  return {};
}

/// OpenAI's completion object after the `n` prompt tokens sent: one choice, usage
/// counting n prompt tokens and, when `scored`, logprobs with n tokens, n offsets and
/// n log-probs (the first null). A few kilobytes, parsed whole: the server's work per
/// answer dwarfs it.
std::string check_completion(std::string_view body, std::size_t n, bool scored) {
  const auto doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded())
    return "completions: the body is not JSON";
  const auto at = [&](const nlohmann::json& j, const char* key) -> const nlohmann::json* {
    return j.is_object() && j.contains(key) ? &j.at(key) : nullptr;
  };
  const auto* choices = at(doc, "choices");
  if (!choices || !choices->is_array() || choices->size() != 1)
    return "completions: \"choices\" is not one choice";
  const auto* usage = at(doc, "usage");
  const auto* prompt = usage ? at(*usage, "prompt_tokens") : nullptr;
  if (!prompt || *prompt != n)
    return "completions: usage.prompt_tokens is not " + std::to_string(n);
  if (!scored)
    return {};
  const auto* logprobs = at(choices->front(), "logprobs");
  if (!logprobs)
    return "completions: no \"logprobs\" in the choice";
  for (const char* key : {"tokens", "text_offset", "token_logprobs"}) {
    const auto* list = at(*logprobs, key);
    if (!list || !list->is_array() || list->size() != n)
      return std::string("completions: \"") + key + "\" does not have " +
             std::to_string(n) + " entries";
  }
  const auto& scores = logprobs->at("token_logprobs");
  if (!scores.front().is_null())
    return "completions: the first token has a log-prob";
  for (std::size_t i = 1; i < n; ++i)
    if (!scores[i].is_number() || scores[i].get<double>() > 0)
      return "completions: token " + std::to_string(i) + " has no log-prob <= 0";
  return {};
}

} // namespace

std::string check_answer(const answer& a, http_payload payload,
                         const std::vector<std::int32_t>& tokens, std::size_t vocab) {
  if (a.status != 200)
    return "HTTP " + std::to_string(a.status) + ": " +
           std::string(a.body.substr(0, shown_body));
  const media_type expected =
      payload == http_payload::binary ? media_type::binary : media_type::json;
  if (a.type != expected)
    return std::string("Content-Type is not ") + (payload == http_payload::binary
                                                      ? "application/octet-stream"
                                                      : "application/json");
  switch (payload) {
  case http_payload::binary:
    return check_binary(a.body, tokens, vocab);
  case http_payload::json:
    return check_json(a.body, tokens, vocab);
  case http_payload::next_byte:
    return check_json(a.body, tokens, 256); // one value per byte
  case http_payload::completions:
    return check_completion(a.body, tokens.size(), true);
  case http_payload::prefill:
    break;
  }
  return check_completion(a.body, tokens.size(), false);
}

} // namespace canopy::app
