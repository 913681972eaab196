#include <canopy/actors/engine_actors.hpp>

#include <canopy/actors/batcher_actor.hpp>
#include <canopy/actors/cache_actor.hpp>
#include <canopy/actors/request_actor.hpp>
#include <canopy/actors/worker_actor.hpp>
#include <canopy/backends/backend_factory.hpp>
#include <canopy/error.hpp>

#include <caf/send.hpp>

#include <algorithm>
#include <chrono>
#include <thread>

namespace canopy::actors {

using namespace messages;

caf::timespan from_ms(double ms) {
  return std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double, std::milli>(ms));
}

backends::backend_spec backend_spec_for(const engine_config& config, const std::string& device) {
  auto micros = [](double us) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double, std::micro>(us));
  };
  backends::backend_spec spec;
  spec.kind = config.backend;
  spec.device = device;
  spec.mock.vocab_size = config.vocab_size;
  spec.mock.context_length = config.context_length;
  spec.mock.kv_bytes_per_token = config.mock_kv_bytes_per_token;
  spec.mock.seed = config.mock_seed;
  spec.mock.cost_per_pass = micros(config.mock_cost_per_pass_us);
  spec.mock.cost_per_token = micros(config.mock_cost_per_token_us);
  spec.model = config.model;
  spec.dtype = config.dtype;
  spec.kv_budget_bytes = config.kv_budget_bytes;
  // Note [intra-op threads]: by default each worker runs ATen's element-wise work
  // on its own thread, while matmuls use every core through OpenBLAS's pool. Two
  // OpenMP threads per worker beside that pool made passes ~5x slower on 2 cores
  // (OpenMP's spinning threads and OpenBLAS's yielding ones fought for the cores;
  // `canopy bench --workload smc --variants direct --threads_per_worker 2`).
  spec.threads = static_cast<int>(config.threads_per_worker != 0 ? config.threads_per_worker : 1);
  return spec;
}

std::vector<std::unique_ptr<backends::backend_i>> make_backends(const engine_config& config) {
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
      throw canopy::error(errc::invalid_config, "device " + devices[i] + ": " + e.what());
    }
    if (!out.back())
      throw canopy::error(errc::invalid_config, "backend_factory returned no backend");
  }
  return out;
}

engine_actors spawn_engine_actors(caf::actor_system& sys, const engine_config& config,
                                  std::vector<std::unique_ptr<backends::backend_i>> backends,
                                  worker_threads threads) {
  engine_actors out;
  out.model = backends.front()->info();
  const auto worker_count = static_cast<std::uint32_t>(backends.size());
  std::vector<std::uint64_t> kv_bytes_per_token;
  std::uint64_t kv_keep_bytes = config.kv_budget_bytes;
  for (auto& b : backends) {
    if (b->info().vocab_size != out.model.vocab_size)
      throw canopy::error(errc::invalid_config, "workers disagree on the vocabulary size");
    kv_bytes_per_token.push_back(b->info().kv_bytes_per_token);
    if (b->info().kv_keep_bytes != 0)
      kv_keep_bytes = std::min(kv_keep_bytes, b->info().kv_keep_bytes);
  }
  out.metrics = std::make_shared<engine_metrics>(worker_count);
  for (auto& b : backends) {
    auto holder = std::make_shared<std::unique_ptr<backends::backend_i>>(std::move(b));
    out.workers.push_back(threads == worker_threads::detached
                            ? sys.spawn<caf::detached>(worker, holder)
                            : sys.spawn(worker, holder));
  }

  cache_options cache_opts;
  cache_opts.enabled = config.cache_enabled;
  cache_opts.trie.logprob_budget_bytes = config.logprob_budget_bytes;
  cache_opts.trie.logprob_max_entries = config.logprob_max_entries;
  // A backend may keep part of its storage free for passes in flight.
  cache_opts.trie.kv_budget_bytes = kv_keep_bytes;
  cache_opts.trie.workers = worker_count;
  cache_opts.trie.policy = *cache::parse_eviction_policy(config.eviction_policy);
  cache_opts.dtype = *cache::parse_row_dtype(config.logprob_dtype);
  cache_opts.kv_bytes_per_token = kv_bytes_per_token;
  cache_opts.workers = out.workers;
  out.cache = sys.spawn(cache, cache_opts, out.metrics);

  batcher_options batch_opts;
  batch_opts.batch_size = config.batch_size;
  batch_opts.batch_timeout = from_ms(config.batch_timeout_ms);
  batch_opts.flush_when_idle = config.flush_when_idle;
  batch_opts.merge_duplicates = config.merge_duplicates;
  // Rows nobody will store are not worth computing.
  batch_opts.plan.rows_at_every_position = config.rows_at_every_position && config.cache_enabled;
  batch_opts.plan.kv_reuse = config.cache_enabled && config.kv_reuse;
  batch_opts.pass_timeout = from_ms(config.pass_timeout_ms);
  out.batcher = sys.spawn(batcher, batch_opts, out.cache, out.workers, out.metrics);
  // Before any front exists, so the wiring precedes every lookup in the cache's mailbox.
  caf::anon_send(out.cache, connect_atom::value, out.batcher);

  request_options request_opts;
  request_opts.query_timeout = from_ms(config.query_timeout_ms);
  request_opts.pass_timeout = batch_opts.pass_timeout;
  // On 2 cores one front answered cache hits ~30% faster than two; more cores want more.
  const auto fronts = config.request_actors != 0
                        ? config.request_actors
                        : std::max(1u, std::thread::hardware_concurrency() / 2);
  for (std::uint32_t i = 0; i < fronts; ++i)
    out.fronts.push_back(sys.spawn(request_actor, request_opts, out.model, out.cache,
                                   out.batcher, out.workers, out.metrics));
  return out;
}

void engine_actors::stop() const {
  for (const auto& f : fronts)
    caf::anon_send_exit(f, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(batcher, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(cache, caf::exit_reason::user_shutdown);
  for (const auto& w : workers)
    caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
}

} // namespace canopy::actors
