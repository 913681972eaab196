// GPT-2's bytes_to_unicode(), computed once (see byte_level_alphabet.hpp).
#include <canopy/backends/tokenizers/byte_level_alphabet.hpp>

#include "tokenizers/utf8.hpp"

namespace canopy::backends {

namespace {

// encoder.py: bytes that are printable and not whitespace keep their own code point
// ('!'..'~', '¡'..'¬', '®'..'ÿ'); the rest get 256, 257, ... in byte order, so that no
// piece contains whitespace or control characters.
std::array<char32_t, 256> make_alphabet() {
  std::array<char32_t, 256> table{};
  char32_t next = 256;
  for (unsigned b = 0; b < 256; ++b) {
    const bool keeps_own =
        (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    table[b] = keeps_own ? static_cast<char32_t>(b) : next++;
  }
  return table;
}

// Code point -> byte for the 324 code points the alphabet uses (0..0x143); -1 elsewhere.
constexpr char32_t alphabet_span = 256 + 68;

std::array<int, alphabet_span> make_inverse() {
  std::array<int, alphabet_span> inverse{};
  inverse.fill(-1);
  const auto& table = byte_level_alphabet();
  for (unsigned b = 0; b < 256; ++b)
    inverse[table[b]] = static_cast<int>(b);
  return inverse;
}

} // namespace

const std::array<char32_t, 256>& byte_level_alphabet() {
  static const std::array<char32_t, 256> table = make_alphabet();
  return table;
}

std::string byte_level_piece(std::string_view bytes) {
  const auto& table = byte_level_alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes)
    utf8::append(out, table[static_cast<unsigned char>(c)]);
  return out;
}

std::optional<std::string> byte_level_piece_bytes(std::string_view piece) {
  static const std::array<int, alphabet_span> inverse = make_inverse();
  std::string out;
  out.reserve(piece.size());
  std::size_t pos = 0;
  while (pos < piece.size()) {
    const auto cp = utf8::next(piece, pos);
    if (!cp || *cp >= alphabet_span || inverse[*cp] < 0)
      return std::nullopt;
    out += static_cast<char>(inverse[*cp]);
  }
  return out;
}

} // namespace canopy::backends
