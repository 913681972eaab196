#pragma once
// GPT-2's byte-level alphabet (bytes_to_unicode() of openai/gpt-2 encoder.py): every byte
// 0..255 has a printable code point that stands for it in vocab.json and merges.txt, so
// byte-level BPE pieces are ordinary strings. Printable Latin-1 bytes stand for
// themselves; the other 68 bytes map, in order, to U+0100..U+0143 (space 0x20 -> 'Ġ'
// U+0120).
//
// Thread contract: pure functions over a constant table; safe from any thread.

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace canopy::backends {

/// byte b -> the code point standing for it.
const std::array<char32_t, 256>& byte_level_alphabet();

/// Raw bytes -> the piece spelling them (UTF-8 of the alphabet characters).
std::string byte_level_piece(std::string_view bytes);

/// A piece -> the raw bytes it spells; std::nullopt when the piece is not valid UTF-8 or
/// holds a character outside the alphabet.
std::optional<std::string> byte_level_piece_bytes(std::string_view piece);

} // namespace canopy::backends
