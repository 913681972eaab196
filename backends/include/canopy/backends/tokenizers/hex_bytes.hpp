#pragma once
// Token bytes as text that survives any byte: lower-case hex, two digits each. The
// command line's vocab listing and the HTTP API's /v1/vocab and /v1/detokenize spell
// token bytes this way, and must agree.
// Thread contract: pure function.

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

} // namespace canopy::backends
