#pragma once
// The API's paths: the router serves exactly these (api_router.cpp checks its table
// against them at compile time), and /metrics labels requests by them, the page's as
// "/web" and every other path as "other", so that the label set is fixed.
// Thread contract: constants.

#include <array>
#include <string_view>

namespace canopy::server {

inline constexpr std::array<std::string_view, 18> api_paths = {
    "/v1/logprobs",
    "/v1/next_byte",
    "/v1/sample",
    "/v1/tokenize",
    "/v1/detokenize",
    "/v1/vocab",
    "/v1/model",
    "/v1/cache/kv",
    "/v1/cache/clear",
    "/v1/cache/tree",
    "/healthz",
    "/metrics",
    "/v1/completions",
    "/v1/models",
    "/v1/tokenizer/merges",
    "/v1/tokenizer/chat_templates",
    "/v1/adapters",
    "/v1/adapters/remove"};

/// Whether `path` is the page's (web_page.hpp): "/" or under "/web/".
constexpr bool is_page_path(std::string_view path) {
  return path == "/" || path.substr(0, 5) == "/web/";
}

/// Whether `path` is one of `api_paths`.
constexpr bool is_api_path(std::string_view path) {
  for (const auto known : api_paths)
    if (known == path)
      return true;
  return false;
}

} // namespace canopy::server
