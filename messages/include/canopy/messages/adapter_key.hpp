#pragma once
// Adapter names, and the key of one loading of a LoRA adapter: what the cache, the
// batcher and the workers know it by (Note [adapter scopes] in cache_actor.cpp). Each
// loading of a name gets a new serial, so a key is never reused in an engine's life.
// Thread contract: pure functions.

#include <canopy/messages/query.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace canopy::messages {

/// What is wrong with an adapter's name, or "": it takes 1 to max_adapter_name_bytes
/// bytes, none of them a control character (names travel in JSON, URLs and logs).
inline std::string adapter_name_problem(std::string_view name) {
  if (name.empty())
    return "an adapter needs a name";
  if (name.size() > max_adapter_name_bytes)
    return "the adapter name has " + std::to_string(name.size()) +
           " bytes, more than the limit of " + std::to_string(max_adapter_name_bytes);
  for (const char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F)
      return "the adapter name holds a control character";
  return "";
}

inline std::string adapter_key(std::string_view name, std::uint64_t serial) {
  return std::string(name) + "#" + std::to_string(serial);
}

/// The name a key was made from (the serial follows the last '#').
inline std::string_view adapter_name_of(std::string_view key) {
  return key.substr(0, key.rfind('#'));
}

} // namespace canopy::messages
