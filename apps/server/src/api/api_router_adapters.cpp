// POST /v1/adapters and /v1/adapters/remove: LoRA adapters loaded and unloaded while
// the server runs. Loading reads a directory of the server's own machine, so an open
// server (no bearer tokens) refuses both: anyone who can reach it could otherwise make
// it read any path. Adapters are the engine's, shared by every tenant (queries of two
// tenants under one adapter still share no cache: their partitions differ).

#include <canopy/server/api/api_router.hpp>

#include "api/route_helpers.hpp"

namespace canopy::server {

using namespace detail;

http_response api_router::adapters(const http_request& request, bool remove) const {
  if (!authenticated_)
    return to_response({403, "forbidden",
                        "adapters are loaded and removed only on a server with bearer "
                        "tokens (--auth-token-file); this one has none"});
  auto result = parse_adapter_request(request.body, remove);
  if (auto* error = std::get_if<api_error>(&result))
    return to_response(*error);
  const auto& req = std::get<adapter_request>(result);
  try {
    if (remove)
      engine_.remove_adapter(req.name);
    else
      engine_.add_adapter(req.name, req.path);
  } catch (const canopy::error& e) {
    return to_response(engine_error(e));
  }
  return json_response({{"adapters", engine_.adapters()}});
}

} // namespace canopy::server
