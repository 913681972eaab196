#pragma once
// A caller's query as it travels from a request actor to the cache and the batcher.
// Thread contract: plain value.

#include <canopy/cache/types.hpp>

#include <caf/meta/type_name.hpp>
#include <caf/timespan.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace canopy::messages {

struct query {
  cache::token_seq tokens;   // the full sequence; with the partition, the duplicate key
  std::int32_t priority = 0; // for the priority eviction policy; higher stays longer
  bool require_kv = false;   // cache_kv(): a hit also needs KV of every token on a worker
  caf::timespan timeout{0};  // 0: none; else the caller's deadline from acceptance
  std::string partition{};   // the cache partition ("": the shared one): queries share
                             // rows, KV and computations only within one (tenants,
                             // cache_salt); at most max_partition_bytes, no NUL
  std::string adapter{};     // the LoRA adapter it is computed under ("": the base
                             // model), by the name it was loaded under; past the cache,
                             // the loaded instance's key (Note [adapter scopes] in
                             // cache_actor.cpp)
};

/// The longest partition name a query may carry.
inline constexpr std::size_t max_partition_bytes = 1024;
/// The longest adapter name.
inline constexpr std::size_t max_adapter_name_bytes = 256;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, query& x) {
  return f(caf::meta::type_name("query"), x.tokens, x.priority, x.require_kv, x.timeout,
           x.partition, x.adapter);
}

} // namespace canopy::messages
