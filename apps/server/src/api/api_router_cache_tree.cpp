// POST /v1/cache/tree: part of the caller's cache for people to read (the page's cache
// view): the node of a prefix and the nodes below it, each with what it holds. A
// tenant sees its own partition only (with its cache_salt, the salted one), as its
// queries do; the engine walks the trie once per request.

#include <canopy/server/api/api_router.hpp>

#include "api/route_helpers.hpp"

#include <canopy/server/api/cache_partition.hpp>

#include <nlohmann/json.hpp>

namespace canopy::server {

using namespace detail;
using json = nlohmann::json;

namespace {

json node_json(const cache::trie_view_node& node) {
  json kv = json::array();
  for (const auto& entry : node.kv)
    kv.push_back({{"worker", entry.worker},
                  {"tier", entry.on_host ? "host" : "device"},
                  {"bytes", entry.bytes}});
  return {{"token", node.token},   {"depth", node.depth},
          {"parent", node.parent}, {"row_bytes", node.row_bytes},
          {"kv", std::move(kv)},   {"hits", node.hits},
          {"locks", node.locks},   {"children", node.children}};
}

} // namespace

void api_router::cache_tree(request_id id, const http_request& request,
                            respond_fn respond) {
  auto result = parse_cache_tree_request(request.body);
  auto* req = parsed_or_respond(result, respond);
  if (!req)
    return;
  auto tokens = resolve(req->prefix);
  auto* prefix = parsed_or_respond(tokens, respond);
  if (!prefix)
    return;
  view_job job{
      *prefix,
      {cache_partition(request.tenant, req->cache_salt), req->adapter},
      {req->depth, req->max_children, max_tree_nodes},
      answer_with(std::move(respond), [prefix = *prefix](const gateway_reply& r) {
        json nodes = json::array();
        for (const auto& node : r.view.nodes)
          nodes.push_back(node_json(node));
        return json_response({{"tokens", prefix},
                              {"truncated", r.view.truncated},
                              {"nodes", std::move(nodes)}});
      })};
  caf::anon_send(gateway_of(id), messages::view_atom::value, std::move(job));
}

} // namespace canopy::server
