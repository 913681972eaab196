#include "http_load/http_load_json_scanner.hpp"

#include <charconv>

namespace canopy::app {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

} // namespace

void json_scanner::skip_whitespace() {
  while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t'))
    ++p_;
}

bool json_scanner::at_end() {
  skip_whitespace();
  return p_ == end_;
}

bool json_scanner::eat(char c) {
  if (!peek(c))
    return false;
  ++p_;
  return true;
}

bool json_scanner::peek(char c) {
  skip_whitespace();
  return p_ < end_ && *p_ == c;
}

bool json_scanner::string(std::string_view& out) {
  if (!eat('"'))
    return false;
  const char* start = p_;
  for (; p_ < end_ && *p_ != '"'; ++p_) {
    if (static_cast<unsigned char>(*p_) < 0x20)
      return false;
    if (*p_ != '\\')
      continue;
    if (++p_ == end_)
      return false;
    if (*p_ == 'u') {
      for (int i = 0; i < 4; ++i)
        if (++p_ == end_ || !is_hex(*p_))
          return false;
    } else if (std::string_view("\"\\/bfnrt").find(*p_) == std::string_view::npos) {
      return false;
    }
  }
  if (p_ == end_)
    return false;
  out = std::string_view(start, static_cast<std::size_t>(p_ - start));
  ++p_;
  return true;
}

bool json_scanner::digits() {
  const char* start = p_;
  while (p_ < end_ && is_digit(*p_))
    ++p_;
  return p_ != start;
}

bool json_scanner::number(bool& is_integer, std::int64_t& integer) {
  skip_whitespace();
  const char* start = p_;
  if (p_ < end_ && *p_ == '-')
    ++p_;
  if (p_ < end_ && *p_ == '0')
    ++p_;
  else if (!digits())
    return false;
  is_integer = true;
  if (p_ < end_ && *p_ == '.') {
    ++p_;
    is_integer = false;
    if (!digits())
      return false;
  }
  if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
    ++p_;
    is_integer = false;
    if (p_ < end_ && (*p_ == '+' || *p_ == '-'))
      ++p_;
    if (!digits())
      return false;
  }
  if (is_integer)
    is_integer = std::from_chars(start, p_, integer).ec == std::errc{};
  return true;
}

bool json_scanner::literal(std::string_view word) {
  skip_whitespace();
  if (std::string_view(p_, static_cast<std::size_t>(end_ - p_)).substr(0, word.size()) !=
      word)
    return false;
  p_ += word.size();
  return true;
}

bool json_scanner::skip_value(int depth) {
  if (depth == 0)
    return false;
  std::string_view ignored;
  bool is_integer = false;
  std::int64_t integer = 0;
  if (peek('"'))
    return string(ignored);
  if (eat('[')) {
    if (eat(']'))
      return true;
    do
      if (!skip_value(depth - 1))
        return false;
    while (eat(','));
    return eat(']');
  }
  if (eat('{')) {
    if (eat('}'))
      return true;
    do
      if (!string(ignored) || !eat(':') || !skip_value(depth - 1))
        return false;
    while (eat(','));
    return eat('}');
  }
  return literal("null") || literal("true") || literal("false") ||
         number(is_integer, integer);
}

} // namespace canopy::app
