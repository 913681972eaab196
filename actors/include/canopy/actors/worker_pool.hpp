#pragma once
// The batcher's workers: one slot per worker the engine admitted, in-process or remote
// (past its join there is no difference). A slot holds the worker's handle, whether it
// takes passes, the batches it runs and the tokens it computed. Admission checks a
// joining worker against the model the engine serves; a worker that comes back after
// a loss takes its old slot, with no KV.
// Thread contract: part of the batcher's state, touched only by the batcher.

#include <canopy/actors/engine_metrics.hpp>
#include <canopy/backends/backend.hpp>
#include <canopy/messages/actor_interfaces.hpp>

#include <caf/actor_addr.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace canopy::actors {

struct worker_slot {
  messages::worker_actor handle;
  messages::worker_description description;
  worker_status state = worker_status::active;
  std::vector<std::uint64_t> batches; // running, at most passes_in_flight
  std::uint64_t load = 0;             // tokens given to it and not back yet: its running
                                      // passes' and those of entries waiting for it
};

/// Why a worker serving `worker` cannot join an engine serving `served`, naming both
/// sides, or "" when it can. An empty field of `served` (a front that loaded no
/// weights knows no fingerprint) matches anything.
std::string admission_problem(const backends::model_info& served,
                              const messages::worker_description& worker);

class worker_pool {
public:
  /// `served` is the model the engine serves; when its fingerprint is unknown, the
  /// first worker admitted sets it for every later one.
  worker_pool(backends::model_info served, std::uint32_t passes_in_flight);
  worker_pool() = default;

  /// The slot of a joining worker, or why it is refused. A worker naming the slot it
  /// had gets it back when that slot's worker is lost.
  std::variant<cache::worker_id, std::string>
  admit(messages::worker_actor handle, messages::worker_description description);
  /// The slot whose current worker has this address.
  std::optional<cache::worker_id> find(const caf::actor_addr& address) const;
  /// Active workers with room for one more pass.
  std::vector<cache::worker_id> ready() const;
  /// Active workers, whatever they run.
  std::vector<cache::worker_id> active() const;
  /// Active or draining, whatever they run: the workers still reachable.
  std::vector<cache::worker_id> alive() const;
  /// Active or draining: someone still computes.
  bool any_alive() const;
  std::vector<std::uint64_t> loads() const;

  worker_slot& operator[](cache::worker_id w) { return slots_.at(w); }
  const worker_slot& operator[](cache::worker_id w) const { return slots_.at(w); }
  std::size_t size() const { return slots_.size(); }
  const backends::model_info& served() const { return served_; }

private:
  backends::model_info served_;
  std::uint32_t passes_in_flight_ = 1;
  std::vector<worker_slot> slots_;
};

} // namespace canopy::actors
