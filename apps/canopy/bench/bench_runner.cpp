#include "bench/bench_runner.hpp"

#include "bench/checking_client.hpp"
#include "bench/direct_client.hpp"
#include "bench/future_client.hpp"
#include "bench/process_memory.hpp"
#include "bench/socket_traffic.hpp"

#include <canopy/actors/engine_actors.hpp>
#include <canopy/backends/backend_factory.hpp>
#include <canopy/backends/checkpoints/lora_adapter.hpp>
#include <canopy/backends/mock_backend.hpp>
#include <canopy/backends/models/torch_backend.hpp>

#include <canopy/engine.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <optional>

namespace canopy::app {

std::string bench_device(const engine_config& config) {
  const auto devices = config.device_list();
  return devices.empty() ? "cpu" : devices.front();
}

backends::model_info configured_model(const engine_config& config) {
  return backends::describe_model(actors::backend_spec_for(config, "cpu"));
}

namespace {

/// The engine behind the interface the workloads drive.
class engine_client final : public query_client {
public:
  explicit engine_client(engine& lm) : lm_(lm) {}
  void ask(token_seq tokens, const std::string& adapter,
           logprobs_callback done) override {
    query_options options;
    options.adapter = adapter;
    lm_.next_token_logprobs(std::move(tokens), std::move(done), std::move(options));
  }

private:
  engine& lm_;
};

/// The files of the config's adapters, by name.
std::vector<std::pair<std::string, backends::lora_adapter_files>>
adapter_files(const engine_config& config) {
  std::vector<std::pair<std::string, backends::lora_adapter_files>> out;
  for (const auto& [name, dir] : config.adapter_list())
    out.emplace_back(name, backends::read_lora_adapter_files(dir));
  return out;
}

/// A backend of its own for `spec`, with the config's adapters loaded, so that it
/// answers what the engine answers under each.
std::unique_ptr<backends::backend_i>
make_backend_with_adapters(const engine_config& config,
                           const backends::backend_spec& spec) {
  auto backend = backends::make_backend(spec);
  for (const auto& [name, files] : adapter_files(config))
    backend->add_adapter(name, files);
  return backend;
}

engine_config variant_config(engine_config config, bench_variant variant) {
  switch (variant) {
  case bench_variant::no_cache:
    config.cache_enabled = false;
    break;
  case bench_variant::no_kv:
    config.kv_reuse = false;
    break;
  case bench_variant::no_batching:
    config.batch_size = 1;
    config.merge_duplicates = false;
    config.flush_when_idle = true;
    break;
  case bench_variant::full:
  case bench_variant::futures:
  case bench_variant::direct:
  case bench_variant::adapters:
    break;
  }
  return config;
}

/// How a variant's answers are rounded: the engine rounds a row to logprob_dtype when it
/// stores it, so only with the cache on; other rows, and the bare backend's, are exact.
std::string answer_dtype(const engine_config& config, bench_variant variant) {
  const bool stored =
      variant != bench_variant::direct && variant_config(config, variant).cache_enabled;
  return stored ? config.logprob_dtype : "float32";
}

/// How answers are checked: against the mock's exact row, bit for bit; or against the
/// model run alone on the whole sequence (a backend of its own, on bench_device), within
/// the oracle tests' tolerance.
check_rule check_rule_for(const engine_config& config, bench_variant variant) {
  check_rule rule;
  rule.dtype = answer_dtype(config, variant);
  auto spec = actors::backend_spec_for(config, bench_device(config));
  if (config.backend == "mock") {
    // The mock's rows under an adapter are those of another mock (mock_adapted).
    std::map<std::string, backends::mock_options> mocks{{"", spec.mock}};
    for (const auto& [name, files] : adapter_files(config))
      mocks[name] = backends::mock_adapted(spec.mock, files);
    rule.reference = [mocks](const token_seq& tokens, const std::string& adapter) {
      return backends::mock_logprobs(mocks.at(adapter), tokens.data(), tokens.size());
    };
    return rule;
  }
  spec.torch.kv_budget_bytes = 16u << 20; // it keeps no KV
  std::shared_ptr<backends::backend_i> model = make_backend_with_adapters(config, spec);
  rule.reference = [model](const token_seq& tokens, const std::string& adapter) {
    backends::pass_request request;
    backends::pass_item item;
    item.tokens = tokens;
    item.rows = {static_cast<std::uint32_t>(tokens.size() - 1)};
    item.keep_kv = false;
    item.adapter = adapter;
    request.items.push_back(std::move(item));
    return model->run(request).items.front().logprobs;
  };
  // A batched pass over cached KV rounds differently from one pass over the whole
  // sequence; through a deep model with large logits that reaches ~1e-4 at values
  // near -16 (a 100M-parameter synthetic Llama), a few float32 ulps per layer.
  rule.tolerance_abs = 1e-4;
  rule.tolerance_rel = 2e-5;
  // KV stored with fewer bits (kv_dtype) turns that rounding noise into differences of
  // the format's own size: a value that lands on the other side of a rounding step
  // in one run moves the next layer's every input, so two runs may part by as much as
  // storing moves either from the exact answer (stories260K, float16: 2.6e-3 at -12.3;
  // int8 under bfloat16 compute: 0.22 at -1.5). The fidelity tests bound each format
  // against the oracle (largest error about 32 u on their models); here two runs must
  // agree within 64 u, absolute and relative, which a wrong scale or a misread row
  // exceeds many times over.
  // Compute in bfloat16 or float16 rounds every activation to the dtype, and a batched
  // pass over cached KV adds in another order than one pass over the whole sequence: on a
  // 0.8B synthetic Llama in bfloat16 on a GPU the two parted by 0.051 at -19.0 (0.7 u
  // relative). The same 64 u bound covers it, of whichever rounds more.
  // Weights in blocks (weight_dtype int8, int4) round each product's activations to
  // int8 steps (1/254 of a block's largest), the same flips again.
  const auto u = std::max({backends::kv_storage_roundoff(spec.torch),
                           backends::compute_roundoff(spec.torch),
                           backends::block_roundoff(model->info())});
  rule.tolerance_abs += 64 * u;
  rule.tolerance_rel += 64 * u;
  return rule;
}

/// Runs the workload through a checking_client, filling what every variant measures
/// alike; `measure_start` resets the variant's own counters.
bench_result measure(workload_kind workload, const workload_options& options,
                     std::int64_t vocab, query_client& client,
                     const engine_config& config, bench_variant variant,
                     std::size_t check_every,
                     const std::function<void()>& measure_start) {
  checking_client checked(client, check_rule_for(config, variant), check_every);
  std::chrono::steady_clock::time_point started;
  const auto census = run_workload(workload, options, vocab, checked, [&] {
    measure_start();
    reset_peak_rss();
    started = std::chrono::steady_clock::now();
  });
  bench_result r;
  r.workload = workload;
  r.variant = variant;
  r.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  r.peak_rss_bytes = peak_rss_bytes();
  r.queries = census.queries();
  r.tokens_requested = census.tokens_requested();
  r.unique_tokens = census.unique_prefixes();
  r.repeated_queries = census.repeated_queries();
  const auto check = checked.check();
  r.rows_checked = check.checked;
  r.mismatches = check.mismatched;
  r.first_mismatch = check.first_mismatch;
  return r;
}

} // namespace

std::string_view to_string(bench_variant variant) {
  return name_of(bench_variant_names, variant);
}

bench_result run_variant(workload_kind workload, const workload_options& options,
                         const engine_config& config, bench_variant variant,
                         std::size_t check_every) {
  if (variant == bench_variant::direct) {
    direct_client client(make_backend_with_adapters(
        config, actors::backend_spec_for(config, bench_device(config))));
    auto r = measure(workload, options, client.vocab_size(), client, config, variant,
                     check_every, [&] { client.reset_measurements(); });
    r.tokens_computed = client.tokens_computed();
    r.matmul_flops = client.matmul_flops();
    r.compute_seconds = client.compute_seconds();
    r.mean_batch_size = r.queries ? 1.0 : 0.0; // one item per pass
    r.latency_p50_us = client.latency_us(0.50);
    r.latency_p99_us = client.latency_us(0.99);
    return r;
  }
  auto queries = options;
  if (variant == bench_variant::adapters)
    for (const auto& [name, dir] : config.adapter_list())
      queries.adapters.push_back(name);
  engine lm{variant_config(config, variant)};
  engine_client callbacks(lm);
  std::optional<future_client> futures;
  if (variant == bench_variant::futures)
    futures.emplace(lm);
  query_client& client = futures ? static_cast<query_client&>(*futures) : callbacks;
  std::vector<std::uint16_t> remote_ports;
  for (const auto& address : config.remote_workers)
    remote_ports.push_back(
        static_cast<std::uint16_t>(std::stoul(address.substr(address.rfind(':') + 1))));
  // Counters are taken as differences over the measured phase; the latency histograms
  // cannot be, so the hits and misses rows' percentiles include their warm-up queries.
  engine_stats before;
  std::uint64_t wire_before = 0;
  auto r = measure(workload, queries, lm.vocab_size(), client, config, variant,
                   check_every, [&] {
                     before = lm.stats();
                     wire_before = tcp_bytes_with(remote_ports);
                   });
  r.wire_bytes = tcp_bytes_with(remote_ports) - wire_before;
  const auto after = lm.stats();
  r.remote_workers = config.remote_workers.size();
  r.pass_round_trip_p50_us = after.pass_round_trip_p50_us;
  r.pass_round_trip_p99_us = after.pass_round_trip_p99_us;
  r.tokens_computed = after.tokens_computed - before.tokens_computed;
  r.matmul_flops = after.matmul_flops - before.matmul_flops;
  r.compute_seconds = after.compute_seconds - before.compute_seconds;
  const auto batches = after.batches - before.batches;
  r.mean_batch_size =
      batches ? double(after.batched_queries - before.batched_queries) / double(batches)
              : 0.0;
  r.latency_p50_us = after.latency_p50_us;
  r.latency_p99_us = after.latency_p99_us;
  r.logprob_bytes = after.logprob_bytes;
  r.kv_bytes =
      std::accumulate(after.kv_bytes.begin(), after.kv_bytes.end(), std::uint64_t{0});
  for (const auto& w : after.workers)
    r.kv_peak_bytes += w.kv_peak_bytes;
  r.kv_bytes_per_token = lm.model().kv_bytes_per_token;
  r.step_weight_bytes = lm.model().step_weight_bytes;
  r.kv_window = lm.model().kv_window;
  r.engine_stats_json = after.to_json();
  return r;
}

} // namespace canopy::app
