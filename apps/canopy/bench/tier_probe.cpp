#include "bench/tier_probe.hpp"

#include "bench/bench_report.hpp"
#include "bench/bench_runner.hpp"
#include "quantile.hpp"

#include <canopy/actors/engine_actors.hpp>
#include <canopy/backends/backend_factory.hpp>

#include <chrono>
#include <random>
#include <stdexcept>

namespace canopy::app {

namespace {

constexpr std::size_t rounds = 16;

double seconds_of(const std::function<void()>& f) {
  const auto started = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
      .count();
}

struct round_times {
  double compute = 0; // the prompt from scratch
  double demote = 0;
  double promote = 0; // the one-token pass that moves the prompt back, less that pass
};

} // namespace

void run_tier_probe(engine_config config, const workload_options& options,
                    std::ostream& out) {
  if (config.kv_host_budget_bytes == 0)
    config.kv_host_budget_bytes = config.kv_budget_bytes;
  auto backend =
      backends::make_backend(actors::backend_spec_for(config, bench_device(config)));
  const auto info = backend->info();
  const auto n = options.prompt_length;
  if (info.kv_host_keep_bytes < n * info.kv_bytes_per_token)
    throw std::invalid_argument(
        "the host tier does not hold a " + std::to_string(n) +
        "-token prompt (a sliding window, or kv_host_budget_bytes "
        "too small)");
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<backends::token_id> pick(
      0, static_cast<backends::token_id>(info.vocab_size - 1));
  std::vector<double> compute, demote, promote;
  for (std::size_t r = 0; r <= rounds; ++r) { // round 0 warms up
    backends::pass_item prompt;
    for (std::size_t i = 0; i < n; ++i)
      prompt.tokens.push_back(pick(rng));
    prompt.rows = {static_cast<std::uint32_t>(n - 1)};
    std::vector<backends::kv_handle> kv;
    round_times t;
    t.compute = seconds_of([&] { kv = backend->run({{prompt}}).items.at(0).kv; });
    if (kv.size() != n || kv.back() == backends::no_kv)
      throw std::runtime_error("the device KV budget does not hold the prompt");
    std::size_t moved = 0;
    t.demote = seconds_of([&] { moved = backend->demote_kv(kv); });
    if (moved != n)
      throw std::runtime_error("only " + std::to_string(moved) + " of the prompt's " +
                               std::to_string(n) + " tokens moved to the host tier");
    backends::pass_item next;
    next.prefix = kv.back();
    next.prefix_length = static_cast<std::uint32_t>(n);
    next.tokens = {pick(rng)};
    next.rows = {0};
    next.keep_kv = false;
    const auto with_move = seconds_of([&] { backend->run({{next}}); });
    const auto without = seconds_of([&] { backend->run({{next}}); });
    t.promote = std::max(0.0, with_move - without);
    backend->release_kv(kv);
    if (r == 0)
      continue;
    compute.push_back(t.compute / double(n));
    demote.push_back(t.demote / double(n));
    promote.push_back(t.promote / double(n));
  }
  const double recompute_s = quantile(compute, 0.5);
  const double move_s = quantile(demote, 0.5) + quantile(promote, 0.5);
  const double bytes = double(info.kv_bytes_per_token);
  const auto us = [](double s) { return fixed(s * 1e6, 3) + " us"; };
  const auto rate = [](double bytes_per_second) {
    return fixed(bytes_per_second / 1e9, 3) + " GB/s";
  };
  out << "tier probe: " << info.name << ", KV " << info.kv_dtype << " (host tier "
      << (config.kv_host_dtype.empty() ? info.kv_dtype : config.kv_host_dtype) << "), "
      << n << "-token prompts, median of " << rounds << " rounds, per token:\n"
      << "  KV bytes (device format)          " << fixed(bytes, 0) << '\n'
      << "  recompute (prompt pass / tokens)  " << us(recompute_s) << '\n'
      << "  demote                            " << us(quantile(demote, 0.5)) << '\n'
      << "  promote (in the next pass)        " << us(quantile(promote, 0.5)) << '\n'
      << "  move (demote + promote)           " << us(move_s) << ", "
      << rate(move_s > 0 ? 2 * bytes / move_s : 0) << " both ways\n"
      << "  moving is " << fixed(move_s > 0 ? recompute_s / move_s : 0, 1)
      << "x faster than recomputing; it pays while the tier moves more than "
      << rate(recompute_s > 0 ? 2 * bytes / recompute_s : 0)
      << " (both ways: the break-even)\n";
}

} // namespace canopy::app
