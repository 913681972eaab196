#include <canopy/cache/eviction_policy.hpp>

namespace canopy::cache {

std::optional<eviction_policy> parse_eviction_policy(std::string_view name) {
  return value_of(eviction_policy_names, name);
}

std::string_view to_string(eviction_policy policy) {
  return name_of(eviction_policy_names, policy);
}

// Every key is (policy's own measure, access time, creation time): the middle element
// breaks ties by recency and the unique creation time makes the order total.
eviction_key make_eviction_key(eviction_policy policy, const node_stats& stats) {
  switch (policy) {
  case eviction_policy::lru:
    return {0, stats.last_access, stats.created};
  case eviction_policy::lfu:
    return {static_cast<std::int64_t>(stats.hits), stats.last_access, stats.created};
  case eviction_policy::fifo:
    return {0, 0, stats.created};
  case eviction_policy::priority:
    return {stats.priority, stats.last_access, stats.created};
  }
  return {0, 0, stats.created};
}

} // namespace canopy::cache
