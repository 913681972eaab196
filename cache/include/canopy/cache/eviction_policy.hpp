#pragma once
// Eviction policies as priority functions over node statistics.
// Thread contract: plain values and pure functions.

#include <canopy/cache/enum_names.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>

namespace canopy::cache {

enum class eviction_policy : std::uint8_t { lru = 0, lfu = 1, fifo = 2, priority = 3 };

inline constexpr std::array<enum_name<eviction_policy>, 4> eviction_policy_names{{
    {eviction_policy::lru, "lru"},
    {eviction_policy::lfu, "lfu"},
    {eviction_policy::fifo, "fifo"},
    {eviction_policy::priority, "priority"},
}};

/// "lru" | "lfu" | "fifo" | "priority"; nullopt for anything else.
std::optional<eviction_policy> parse_eviction_policy(std::string_view name);
std::string_view to_string(eviction_policy policy);

/// What a policy may look at. All counters come from the trie's logical clock,
/// so that eviction order is deterministic and testable.
struct node_stats {
  std::uint64_t last_access =
      0;                     // logical time of the latest match/insert touching the node
  std::uint64_t hits = 0;    // number of matches that passed through the node
  std::uint64_t created = 0; // logical time of creation (unique per node)
  std::int32_t priority = 0; // highest caller priority that touched the node
};

/// Ordering key: the candidate with the smallest key is evicted first.
/// The last element is the unique creation time, so keys never tie.
using eviction_key = std::tuple<std::int64_t, std::uint64_t, std::uint64_t>;

/// LRU: oldest access first. LFU: fewest hits first, ties by LRU. FIFO: oldest
/// creation first. priority: lowest caller priority first, ties by LRU.
eviction_key make_eviction_key(eviction_policy policy, const node_stats& stats);

} // namespace canopy::cache
