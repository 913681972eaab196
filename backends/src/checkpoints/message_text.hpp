#pragma once
// Formatting for error messages about untrusted files (private to backends/): names
// read from a file are quoted, clipped and stripped of control bytes, so a crafted
// name cannot flood or garble a log.
// Thread contract: pure functions.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::backends::detail {

/// At most `limit` bytes of `text`, control bytes as \xNN, "..." when clipped.
inline std::string clip(std::string_view text, std::size_t limit = 160) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xF];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > limit)
    out += "...";
  return out;
}

/// 'text', clipped.
inline std::string quote(std::string_view text) {
  return "'" + clip(text) + "'";
}

/// [a, b, c]
inline std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

} // namespace canopy::backends::detail
