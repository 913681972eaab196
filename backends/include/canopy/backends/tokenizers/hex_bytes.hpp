#pragma once
// Token bytes as text that survives any byte: lower-case hex, two digits each. The
// command line's vocab listing and the HTTP API's /v1/vocab and /v1/detokenize spell
// token bytes this way, and must agree; next-byte requests give their prefixes so.
// Thread contract: pure functions.

#include <optional>
#include <string>
#include <string_view>

namespace canopy::backends {

/// "Hi" -> "4869".
inline std::string hex_bytes(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += digits[b >> 4];
    out += digits[b & 0xF];
  }
  return out;
}

/// "4869" (upper case too) -> "Hi"; nullopt for an odd length or a non-hex digit.
inline std::optional<std::string> parse_hex_bytes(std::string_view hex) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0)
    return std::nullopt;
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

} // namespace canopy::backends
