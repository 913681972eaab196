#include <canopy/server/web/web_page.hpp>

#include <canopy/server/api_error.hpp>
#include <canopy/server/api_paths.hpp>
#include <canopy/server/web/web_assets.hpp>

namespace canopy::server {

void web_page::handle(request_id id, http_request request, respond_fn respond) {
  const auto path = std::string_view(request.target).substr(0, request.target.find('?'));
  if (!is_page_path(path))
    return api_.handle(id, std::move(request), std::move(respond));
  if (request.method != "GET" && request.method != "HEAD") {
    auto refusal = to_response({405, "method_not_allowed",
                                request.method + " " + std::string(path) +
                                    ": the page's files answer GET only"});
    refusal.headers.emplace_back("Allow", "GET, HEAD");
    return respond(std::move(refusal));
  }
  for (const auto& asset : web_assets())
    if (asset.path == path) {
      http_response response;
      response.content_type = std::string(asset.content_type);
      if (request.method == "GET")
        response.body = std::string(asset.body);
      // A new binary's page replaces the old one's at the next load; the page runs
      // only its own files and talks only to this server.
      response.headers = {{"Cache-Control", "no-cache"},
                          {"X-Content-Type-Options", "nosniff"},
                          {"Content-Security-Policy",
                           "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                           "frame-ancestors 'none'"}};
      return respond(std::move(response));
    }
  respond(to_response(
      {404, "not_found", "no page file " + std::string(path) + " (the page is at /)"}));
}

} // namespace canopy::server
