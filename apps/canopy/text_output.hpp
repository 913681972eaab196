#pragma once
// How the subcommands spell ids and JSON (bytes:
// canopy/backends/tokenizers/hex_bytes.hpp) on standard output, in one place so that
// every command agrees (scripts parse these forms). Thread contract: pure functions.

#include <canopy/engine.hpp>

#include <nlohmann/json.hpp>

#include <string>

namespace canopy::app {

/// "1,403,407": the form --tokens takes, so output can be fed back in. Empty for none.
std::string comma_ids(const token_seq& ids);

/// One line of compact JSON. Token bytes need not be valid UTF-8 (a multi-byte
/// character may be split between tokens), and JSON text must be: every invalid
/// sequence in a string becomes U+FFFD instead of failing the command.
std::string json_line(const nlohmann::json& doc);

} // namespace canopy::app
