#pragma once
// Creating workers and wiring an engine, kept apart: spawn_local_workers makes the
// in-process workers (a remote worker's link makes its own bindings), and the
// composition root spawn_engine_actors wires the cache actor, the batcher and the
// request (front) actors around a list of workers, whichever kind they are. The
// engine and the actor tests share both, so tests drive exactly the production wiring.
// Thread contract: call from any thread; the returned handles are values.

#include <canopy/actors/engine_metrics.hpp>
#include <canopy/backends/backend.hpp>
#include <canopy/backends/backend_factory.hpp>
#include <canopy/backends/tokenizers/next_byte.hpp>
#include <canopy/engine_config.hpp>
#include <canopy/messages/actor_interfaces.hpp>

#include <caf/actor_system.hpp>
#include <caf/io/middleman_actor.hpp>

#include <memory>
#include <string>
#include <vector>

namespace canopy::actors {

/// A worker ready to join: its handle (an in-process worker, or a remote worker's
/// local proxy) and what it serves, with the KV budget the cache enforces on it.
struct worker_binding {
  messages::worker_actor handle;
  messages::worker_description description;
};

struct engine_actors {
  backends::model_info model; // what the engine serves; queries are validated against it
  std::shared_ptr<engine_metrics> metrics;
  std::vector<messages::worker_actor> workers; // the workers it was wired with
  messages::cache_actor cache;
  messages::batcher_actor batcher;
  std::vector<messages::engine_actor> fronts;
  std::vector<messages::worker_link_actor> links; // to remote nodes (remote_workers.hpp)
  caf::io::middleman_actor middleman;             // the links' (cluster_middleman.hpp)

  /// Asks every actor to stop; fronts first, so they answer what they hold.
  void stop() const;
};

enum class worker_threads { detached, scheduled };

/// One in-process worker per backend, in device order. Tests pass
/// worker_threads::scheduled so a deterministic scheduler runs the workers too.
std::vector<worker_binding>
spawn_local_workers(caf::actor_system& system, const engine_config& config,
                    std::vector<std::unique_ptr<backends::backend_i>> backends,
                    worker_threads threads = worker_threads::detached);

/// The composition root. `model` is what the engine serves (a worker's description, or
/// describe_model's when it runs none). Every binding joins before any query can
/// arrive; throws canopy::error(errc::invalid_config) naming a worker that does not
/// serve `model`. Workers may join later (remote_workers' links do). `byte_order`: the
/// model's vocabulary in byte order, for next-byte queries (null: the model has no
/// tokenizer, and they are refused).
engine_actors
spawn_engine_actors(caf::actor_system& system, const engine_config& config,
                    backends::model_info model, std::vector<worker_binding> workers,
                    std::shared_ptr<const backends::byte_order> byte_order = nullptr);

/// The description of the backend `config` asks for on `device`.
backends::backend_spec backend_spec_for(const engine_config& config,
                                        const std::string& device);

/// The KV a cache may keep on a worker: its configured budget, or less when the
/// backend keeps part of its storage for passes in flight (model_info::kv_keep_bytes).
std::uint64_t enforced_kv_budget(std::uint64_t configured,
                                 const backends::model_info& model);

/// The backends `config` describes (its backend_factory, or its backend key), one per
/// local device; none for a front that runs no worker of its own. Throws
/// canopy::error(errc::invalid_config) naming the device on failure.
std::vector<std::unique_ptr<backends::backend_i>>
make_backends(const engine_config& config);

/// What an engine with these backends serves: backend 0's description, or, with
/// none, describe_model's (no weights are loaded).
backends::model_info
served_model(const engine_config& config,
             const std::vector<std::unique_ptr<backends::backend_i>>& backends);

/// A configuration's milliseconds as a CAF duration.
caf::timespan from_ms(double ms);

} // namespace canopy::actors
