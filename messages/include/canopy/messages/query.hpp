#pragma once
// A caller's query as it travels from a request actor to the cache and the batcher.
// Thread contract: plain value.

#include <canopy/cache/types.hpp>

#include <caf/meta/type_name.hpp>
#include <caf/timespan.hpp>

#include <cstdint>

namespace canopy::messages {

struct query {
  cache::token_seq tokens;    // the full sequence; the duplicate key
  std::int32_t priority = 0;  // for the priority eviction policy; higher stays longer
  bool require_kv = false;    // cache_kv(): a hit also needs KV of every token on a worker
  caf::timespan timeout{0};   // 0: none; else the caller's deadline from acceptance
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, query& x) {
  return f(caf::meta::type_name("query"), x.tokens, x.priority, x.require_kv, x.timeout);
}

} // namespace canopy::messages
