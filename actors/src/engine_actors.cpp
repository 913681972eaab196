#include <canopy/actors/engine_actors.hpp>

#include "exception_text.hpp"

#include <canopy/actors/batcher_actor.hpp>
#include <canopy/actors/cache_actor.hpp>
#include <canopy/actors/request_actor.hpp>
#include <canopy/actors/worker_actor.hpp>
#include <canopy/actors/worker_pool.hpp>
#include <canopy/backends/backend_factory.hpp>
#include <canopy/error.hpp>

#include <caf/send.hpp>

#include <algorithm>
#include <chrono>
#include <thread>

namespace canopy::actors {

using namespace messages;

caf::timespan from_ms(double ms) {
  return std::chrono::duration_cast<caf::timespan>(
      std::chrono::duration<double, std::milli>(ms));
}

backends::backend_spec backend_spec_for(const engine_config& config,
                                        const std::string& device) {
  auto micros = [](double us) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double, std::micro>(us));
  };
  backends::backend_spec spec;
  spec.kind = config.backend;
  spec.device = device;
  spec.model = config.model;
  spec.mock.vocab_size = config.vocab_size;
  spec.mock.context_length = config.context_length;
  spec.mock.kv_bytes_per_token = config.mock_kv_bytes_per_token;
  spec.mock.kv_window = config.mock_kv_window;
  spec.mock.seed = config.mock_seed;
  spec.mock.cost_per_pass = micros(config.mock_cost_per_pass_us);
  spec.mock.cost_per_token = micros(config.mock_cost_per_token_us);
  spec.torch.dtype = config.dtype;
  spec.torch.weight_dtype = config.weight_dtype;
  spec.torch.kv_dtype = config.kv_dtype;
  spec.torch.kv_residual_tokens = config.kv_residual_tokens;
  spec.torch.kv_host_budget_bytes = config.kv_host_budget_bytes;
  spec.torch.kv_host_dtype = config.kv_host_dtype;
  spec.torch.kv_budget_bytes = config.kv_budget_bytes;
  spec.torch.max_context_length = config.max_context_length;
  spec.torch.direct_forward = config.direct_forward;
  spec.torch.decode_graphs = config.decode_graphs;
  spec.torch.adapter_budget_bytes = config.adapter_budget_bytes;
  // Note [intra-op threads]: by default each worker runs ATen's element-wise work
  // on its own thread, while matmuls use every core through OpenBLAS's pool. Two
  // OpenMP threads per worker beside that pool made passes ~5x slower on 2 cores
  // (OpenMP's spinning threads and OpenBLAS's yielding ones fought for the cores;
  // `canopy bench --workload smc --variants direct --threads_per_worker 2`).
  spec.torch.threads =
      static_cast<int>(config.threads_per_worker != 0 ? config.threads_per_worker : 1);
  return spec;
}

std::uint64_t enforced_kv_budget(std::uint64_t configured,
                                 const backends::model_info& model) {
  return model.kv_keep_bytes != 0 ? std::min(configured, model.kv_keep_bytes)
                                  : configured;
}

std::vector<std::unique_ptr<backends::backend_i>>
make_backends(const engine_config& config) {
  std::vector<std::unique_ptr<backends::backend_i>> out;
  auto devices = config.device_list();
  for (std::uint32_t i = 0; i < devices.size(); ++i) {
    try {
      out.push_back(config.backend_factory
                        ? config.backend_factory(i, devices[i])
                        : backends::make_backend(backend_spec_for(config, devices[i])));
    } catch (const canopy::error&) {
      throw;
    } catch (const std::exception& e) {
      throw canopy::error(errc::invalid_config,
                          "device " + devices[i] + ": " + exception_text(e));
    }
    if (!out.back())
      throw canopy::error(errc::invalid_config, "backend_factory returned no backend");
  }
  return out;
}

backends::model_info
served_model(const engine_config& config,
             const std::vector<std::unique_ptr<backends::backend_i>>& backends) {
  if (!backends.empty())
    return backends.front()->info();
  try {
    return backends::describe_model(backend_spec_for(config, "cpu"));
  } catch (const std::exception& e) {
    throw canopy::error(errc::invalid_config, std::string("model: ") + e.what());
  }
}

std::vector<worker_binding>
spawn_local_workers(caf::actor_system& sys, const engine_config& config,
                    std::vector<std::unique_ptr<backends::backend_i>> backends,
                    worker_threads threads) {
  const auto devices = config.device_list();
  std::vector<worker_binding> out;
  for (std::size_t i = 0; i < backends.size(); ++i) {
    worker_binding binding;
    binding.description.model = backends[i]->info();
    binding.description.kv_budget_bytes =
        enforced_kv_budget(config.kv_budget_bytes, binding.description.model);
    binding.description.node = "local";
    binding.description.device = i < devices.size() ? devices[i] : "cpu";
    auto holder =
        std::make_shared<std::unique_ptr<backends::backend_i>>(std::move(backends[i]));
    binding.handle = threads == worker_threads::detached
                         ? sys.spawn<caf::detached>(worker, holder)
                         : sys.spawn(worker, holder);
    out.push_back(std::move(binding));
  }
  return out;
}

engine_actors
spawn_engine_actors(caf::actor_system& sys, const engine_config& config,
                    backends::model_info model, std::vector<worker_binding> workers,
                    std::shared_ptr<const backends::byte_order> byte_order) {
  for (const auto& w : workers)
    if (auto problem = admission_problem(model, w.description); !problem.empty())
      throw canopy::error(errc::invalid_config, problem);
  engine_actors out;
  out.model = std::move(model);
  if (out.model.fingerprint.empty() && !workers.empty())
    out.model.fingerprint = workers.front().description.model.fingerprint;
  out.metrics = std::make_shared<engine_metrics>(config.remote_workers);

  cache_options cache_opts;
  cache_opts.enabled = config.cache_enabled;
  cache_opts.trie.logprob_budget_bytes = config.logprob_budget_bytes;
  cache_opts.trie.logprob_max_entries = config.logprob_max_entries;
  cache_opts.trie.policy = *cache::parse_eviction_policy(config.eviction_policy);
  cache_opts.trie.kv_window = static_cast<std::uint32_t>(out.model.kv_window);
  out.cache = sys.spawn(cache, cache_opts, out.metrics);

  batcher_options batch_opts;
  batch_opts.served = out.model;
  batch_opts.passes_in_flight = config.worker_passes_in_flight;
  // Rows come back in the dtype they are stored in; uncached ones stay exact.
  batch_opts.rows = config.cache_enabled ? *cache::parse_row_dtype(config.logprob_dtype)
                                         : cache::row_dtype::float32;
  batch_opts.batch_size = config.batch_size_in_effect();
  batch_opts.batch_timeout = from_ms(config.batch_timeout_ms);
  batch_opts.flush_when_idle = config.flush_when_idle;
  batch_opts.merge_duplicates = config.merge_duplicates;
  // Rows nobody will store are not worth computing.
  batch_opts.plan.rows_at_every_position =
      config.rows_at_every_position && config.cache_enabled;
  batch_opts.plan.kv_reuse = config.cache_enabled && config.kv_reuse;
  batch_opts.pass_timeout = from_ms(config.pass_timeout_ms);
  batch_opts.adapter_budget_bytes = config.adapter_budget_bytes;
  // A lost node that comes back within the timeout takes the queries that waited.
  if (!config.remote_workers.empty())
    batch_opts.rejoin_patience = from_ms(config.worker_timeout_ms);
  out.batcher = sys.spawn(batcher, batch_opts, out.cache, out.metrics);
  // Before any front exists, so the wiring and the workers precede every lookup.
  caf::anon_send(out.cache, connect_atom::value, out.batcher);
  for (auto& w : workers) {
    out.workers.push_back(w.handle);
    caf::anon_send(out.batcher, join_atom::value, std::move(w.handle),
                   std::move(w.description));
  }

  request_options request_opts;
  request_opts.query_timeout = from_ms(config.query_timeout_ms);
  request_opts.byte_order = std::move(byte_order);
  // On 2 cores one front answered cache hits ~30% faster than two; more cores want more.
  const auto fronts = config.request_actors != 0
                          ? config.request_actors
                          : std::max(1u, std::thread::hardware_concurrency() / 2);
  for (std::uint32_t i = 0; i < fronts; ++i)
    out.fronts.push_back(sys.spawn(request_actor, request_opts, out.model, out.cache,
                                   out.batcher, out.metrics));
  return out;
}

void engine_actors::stop() const {
  for (const auto& f : fronts)
    caf::anon_send_exit(f, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(batcher, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(cache, caf::exit_reason::user_shutdown);
  for (const auto& w : workers)
    caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
  for (const auto& l : links)
    caf::anon_send_exit(l, caf::exit_reason::user_shutdown);
  if (middleman)
    caf::anon_send_exit(middleman, caf::exit_reason::kill); // it ignores the others
}

} // namespace canopy::actors
