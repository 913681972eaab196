#include "api/json_fields.hpp"

#include <canopy/server/api/cache_partition.hpp>

#include <cmath>
#include <limits>
#include <type_traits>

namespace canopy::server::detail {

using nlohmann::json;

namespace {

constexpr std::string_view invalid_request = "invalid_request";

/// Client text quoted in a message, cut short: a message must not grow with the body.
std::string clip(std::string_view text, std::size_t limit = 64) {
  if (text.size() <= limit)
    return std::string(text);
  return std::string(text.substr(0, limit)) + "...";
}

/// The byte at which nesting first exceeds `limit`, or npos. Tracks strings exactly as
/// a JSON lexer does, so up to the first syntax error it sees the parser's depth.
std::size_t deeper_than(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i; // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit)
        return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

/// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string reason(const json::exception& e) {
  std::string_view what = e.what();
  const std::size_t end = what.find("] ");
  if (end != std::string_view::npos)
    what.remove_prefix(end + 2);
  return clip(what, 200);
}

enum class integer_fit { fits, below, above, not_integer };

template <class T> integer_fit fit_integer(const json& value, T& out) {
  using limits = std::numeric_limits<T>;
  constexpr auto max = static_cast<std::uint64_t>(limits::max());
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    if (u > max)
      return integer_fit::above;
    out = static_cast<T>(u);
    return integer_fit::fits;
  }
  if (value.is_number_integer()) {
    const auto i = value.get<std::int64_t>();
    if (i >= 0 && static_cast<std::uint64_t>(i) > max)
      return integer_fit::above;
    if (i < 0 && (!std::is_signed_v<T> || i < static_cast<std::int64_t>(limits::min())))
      return integer_fit::below;
    out = static_cast<T>(i);
    return integer_fit::fits;
  }
  if (value.is_number_float()) {
    // nlohmann stores integers beyond 64 bits as doubles (every double this large is
    // integral): out of range rather than "not an integer".
    const double d = value.get<double>();
    if (d >= 0x1p64)
      return integer_fit::above;
    if (d <= -0x1p63)
      return integer_fit::below;
  }
  return integer_fit::not_integer;
}

/// `value` as a T; `field()` builds the field's name only when refusing, so a long
/// token list does not format a name per element.
template <class T, class Field>
T read_integer(const json& value, const Field& field, std::string_view range_code) {
  T out{};
  const integer_fit fit = fit_integer(value, out);
  if (fit == integer_fit::not_integer)
    refuse(invalid_request, field() + " is not an integer");
  if (fit != integer_fit::fits)
    refuse(range_code, field() + " is outside the " +
                           (std::is_signed_v<T> ? "int" : "uint") +
                           std::to_string(8 * sizeof(T)) + " range");
  return out;
}

} // namespace

void refuse(std::string_view code, std::string message) {
  throw refusal{api_error{400, std::string(code), std::move(message)}};
}

json parse_object(std::string_view body, bool empty_is_object) {
  if (empty_is_object && body.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return json::object();
  if (const std::size_t at = deeper_than(body, max_body_depth);
      at != std::string_view::npos)
    refuse(invalid_request, "the body nests deeper than " +
                                std::to_string(max_body_depth) + " levels (at byte " +
                                std::to_string(at) + ")");
  json value;
  try {
    value = json::parse(body.begin(), body.end());
  } catch (const json::parse_error& e) {
    // Includes bytes that are not UTF-8 inside strings; the message has the position.
    refuse("malformed_json", reason(e));
  } catch (const json::exception& e) {
    // A number too large for a double ("1e999"): well-formed, but no value we accept.
    refuse(invalid_request, reason(e));
  }
  if (!value.is_object())
    refuse(invalid_request,
           std::string("the body is a JSON ") + value.type_name() + ", not an object");
  return value;
}

void allow_only(const json& object, std::initializer_list<std::string_view> known) {
  for (const auto& [name, value] : object.items()) {
    bool found = false;
    for (std::string_view k : known)
      found = found || k == name;
    if (!found)
      refuse(invalid_request, "unknown field '" + clip(name) + "'");
  }
}

const json* member(const json& object, const char* name) {
  const auto it = object.find(name);
  return it == object.end() ? nullptr : &*it;
}

const json& required(const json& object, const char* name) {
  const json* value = member(object, name);
  if (value == nullptr)
    refuse(invalid_request, std::string(name) + " is required");
  return *value;
}

bool read_bool(const json& value, const std::string& field) {
  if (!value.is_boolean())
    refuse(invalid_request, field + " is not a boolean");
  return value.get<bool>();
}

std::string read_string(const json& value, const std::string& field) {
  if (!value.is_string())
    refuse(invalid_request, field + " is not a string");
  return value.get<std::string>();
}

std::string read_cache_salt(const json& object) {
  const json* value = member(object, "cache_salt");
  if (value == nullptr)
    return {};
  auto salt = read_string(*value, "cache_salt");
  if (salt.empty())
    refuse(invalid_request, "cache_salt is empty (leave it out for none)");
  if (salt.size() > max_cache_salt_bytes)
    refuse(invalid_request, "cache_salt has " + std::to_string(salt.size()) +
                                " bytes, more than the limit of " +
                                std::to_string(max_cache_salt_bytes));
  if (salt.find('\0') != std::string::npos)
    refuse(invalid_request, "cache_salt holds a NUL byte");
  return salt;
}

std::string read_adapter(const json& object) {
  const json* value = member(object, "adapter");
  if (value == nullptr)
    return {};
  auto name = read_string(*value, "adapter");
  if (name.empty())
    refuse(invalid_request, "adapter is empty (leave it out for the base model)");
  return name; // the engine refuses a name no adapter has
}

double read_number(const json& value, const std::string& field) {
  if (!value.is_number())
    refuse(invalid_request, field + " is not a number");
  const double d = value.get<double>();
  if (!std::isfinite(d))
    refuse(invalid_request, field + " is not a finite number");
  return d;
}

std::int32_t read_int32(const json& value, const std::string& field,
                        std::string_view range_code) {
  return read_integer<std::int32_t>(
      value, [&] { return field; }, range_code);
}

std::uint64_t read_uint64(const json& value, const std::string& field) {
  return read_integer<std::uint64_t>(
      value, [&] { return field; }, invalid_request);
}

std::uint64_t read_count(const json& value, const std::string& field, std::uint64_t lo,
                         std::uint64_t hi) {
  std::uint64_t out = 0;
  const integer_fit fit = fit_integer(value, out);
  if (fit == integer_fit::not_integer)
    refuse(invalid_request, field + " is not an integer");
  if (fit == integer_fit::below || (fit == integer_fit::fits && out < lo))
    refuse(invalid_request, field + " must be at least " + std::to_string(lo));
  if (fit == integer_fit::above || out > hi)
    refuse(invalid_request, field + " must be at most " + std::to_string(hi));
  return out;
}

cache::token_seq read_tokens(const json& value, const std::string& field,
                             bool allow_empty) {
  if (!value.is_array())
    refuse(invalid_request, field + " is not a list of token ids");
  if (value.empty() && !allow_empty)
    refuse("empty_sequence", field + " is empty");
  cache::token_seq tokens;
  tokens.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i)
    tokens.push_back(read_integer<std::int32_t>(
        value[i], [&] { return field + "[" + std::to_string(i) + "]"; },
        "token_out_of_range"));
  return tokens;
}

sequence_input read_sequence(const json& value, const std::string& field) {
  if (value.is_array())
    return {read_tokens(value, field, false), std::nullopt};
  if (value.is_string())
    return {std::nullopt, value.get<std::string>()};
  refuse(invalid_request, field + " is neither a list of token ids nor a text");
}

} // namespace canopy::server::detail
