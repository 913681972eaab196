#pragma once
// How a worker joins an engine: what it serves and what the cache may keep on it. The
// same description serves an in-process worker and a remote one that a link has
// authenticated, so that no actor past the join knows which it is.
// Thread contract: plain value.

#include <canopy/backends/backend.hpp>
#include <canopy/cache/types.hpp>
#include <canopy/messages/pass_messages.hpp>

#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace canopy::messages {

/// worker_description::slot of a worker joining for the first time.
inline constexpr cache::worker_id new_slot = std::numeric_limits<cache::worker_id>::max();

struct worker_description {
  backends::model_info model;        // as the worker describes it
  std::uint64_t kv_budget_bytes = 0; // the KV the cache may keep on it (enforced)
  std::string node;                  // "local", or the "host:port" it was reached at
  std::string device;                // "cpu", "cuda:0", ...
  cache::worker_id slot = new_slot;  // coming back after a loss: the slot it had
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_description& x) {
  return f(caf::meta::type_name("worker_description"), x.model, x.kv_budget_bytes, x.node,
           x.device, x.slot);
}

} // namespace canopy::messages
