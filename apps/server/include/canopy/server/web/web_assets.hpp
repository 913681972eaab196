#pragma once
// The page's files (apps/server/web, and uPlot from its npm lockfile), embedded in the
// binary at build time by cmake/embed_web_assets.cmake: the server reads nothing from
// disk and fetches nothing to serve its page.
// Thread contract: immutable data, read from any thread.

#include <string_view>
#include <vector>

namespace canopy::server {

struct web_asset {
  std::string_view path; // as requested: "/" or "/web/page.js"
  std::string_view content_type;
  std::string_view body;
};

const std::vector<web_asset>& web_assets();

} // namespace canopy::server
