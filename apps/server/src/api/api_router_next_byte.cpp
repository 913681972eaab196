// POST /v1/next_byte: next-byte distributions after token sequences and byte prefixes,
// computed by the engine from cached rows and the masses beside them (issue 30), so a
// byte-level client gets 256 numbers per question instead of a row of the vocabulary.
#include <canopy/server/api/api_router.hpp>

#include "api/route_helpers.hpp"

#include <canopy/server/api/cache_partition.hpp>
#include <canopy/server/api/next_byte_encoding.hpp>

#include <caf/send.hpp>

namespace canopy::server {

using namespace detail;

void api_router::next_byte(request_id id, const http_request& request,
                           respond_fn respond) {
  auto result = parse_next_byte_request(request.body, limits_);
  auto* req = parsed_or_respond(result, respond);
  if (!req)
    return;
  next_byte_job job;
  job.reduce = req->reduce;
  job.priority = req->priority;
  job.deadline_ms = req->deadline_ms;
  job.scope = {cache_partition(request.tenant, req->cache_salt), req->adapter};
  std::size_t longest = 0;
  for (const auto& item : req->items)
    longest = std::max(longest, item.tokens.size());
  longest += scope_tokens(job.scope);
  const auto queries = std::min(req->items.size(), rows_in_flight_per_job);
  auto reserved = reserve_bytes(next_byte_json_bound(req->items), 0, queries, longest);
  if (auto* refusal = std::get_if<http_response>(&reserved))
    return respond(std::move(*refusal));
  // The job and the answer (which echoes them) share the items.
  auto items = std::make_shared<const std::vector<next_byte_item>>(std::move(req->items));
  job.items = items;
  job.done = answer_with(
      std::move(respond),
      [items, batch = req->batch,
       held = std::make_shared<byte_reservation>(
           std::move(std::get<byte_reservation>(reserved)))](const gateway_reply& reply) {
        http_response response;
        response.body = encode_next_byte_json(*items, reply.distributions, batch);
        response.reserved = held; // given back once the answer is written
        return response;
      });
  caf::anon_send(gateway_of(id), messages::next_byte_atom::value, id, std::move(job));
}

} // namespace canopy::server
