#pragma once
// Minimal UTF-8 helpers for the tokenizers (internal to canopy_backends).
// Strict decoding: no overlong forms, no surrogates, nothing above U+10FFFF, so a byte
// sequence has at most one meaning.
// Thread contract: pure functions.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace canopy::backends::utf8 {

/// Appends the UTF-8 encoding of `cp` (which must be a valid scalar value).
inline void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// Decodes the code point starting at s[pos] and advances pos past it; std::nullopt (pos
/// unchanged) when the bytes there are not a valid UTF-8 sequence.
inline std::optional<char32_t> next(std::string_view s, std::size_t& pos) {
  if (pos >= s.size())
    return std::nullopt;
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(pos);
  std::size_t len = 0;
  char32_t cp = 0;
  char32_t min = 0;
  if (b0 < 0x80) {
    ++pos;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
    min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
    min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
    min = 0x10000;
  } else {
    return std::nullopt;
  }
  if (pos + len > s.size())
    return std::nullopt;
  for (std::size_t i = 1; i < len; ++i) {
    const unsigned char b = byte(pos + i);
    if ((b & 0xC0) != 0x80)
      return std::nullopt;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return std::nullopt;
  pos += len;
  return cp;
}

} // namespace canopy::backends::utf8
