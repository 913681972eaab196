#pragma once
// How SentencePiece-style pieces of a tokenizer.json spell what is not plain text: the
// space as U+2581 ("▁the"), and a byte as <0xHH> (byte fallback). The BPE model looks
// byte pieces up by this spelling, the ByteFallback decoder reads them back, and the
// byte vocabulary turns both into bytes. Internal to canopy_backends.
// Thread contract: pure functions over constants.

#include <canopy/backends/tokenizers/hex_bytes.hpp>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace canopy::backends::hf {

inline constexpr std::string_view metaspace = "\xE2\x96\x81"; // U+2581

/// The byte-fallback piece of byte `b`: "<0x0A>" (upper-case hex, as HF writes it).
inline std::string fallback_piece(unsigned b) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "<0x%02X>", b);
  return buffer;
}

/// The byte a "<0xHH>" piece stands for (either case of hex digits, as HF reads it).
inline std::optional<unsigned char> fallback_byte(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece.back() != '>')
    return std::nullopt;
  const auto byte = parse_hex_bytes(piece.substr(3, 2));
  if (!byte)
    return std::nullopt;
  return static_cast<unsigned char>((*byte)[0]);
}

} // namespace canopy::backends::hf
