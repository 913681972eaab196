#include "bench/pass_breakdown.hpp"

#include "bench/bench_report.hpp"
#include "bench/bench_runner.hpp"
#include "quantile.hpp"

#include <canopy/actors/engine_actors.hpp>
#include <canopy/backends/backend_factory.hpp>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <random>

namespace canopy::app {

namespace {

constexpr double lone_query_goal_us = 200;

struct backend_decode {
  backends::pass_profile profile;
  std::vector<double> pass_us; // wall time of each profiled pass
};

/// The decode's passes on the bare backend: the prompt, then one token a pass over the
/// cached prefix, each extended by its most likely token; every pass after the prompt's
/// is profiled.
backend_decode decode_on_backend(const engine_config& config, const workload_options& o) {
  auto backend =
      backends::make_backend(actors::backend_spec_for(config, bench_device(config)));
  const auto vocab = backend->info().vocab_size;
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<std::int32_t> pick(0,
                                                   static_cast<std::int32_t>(vocab - 1));
  backends::pass_item item;
  for (std::size_t i = 0; i < o.prompt_length; ++i)
    item.tokens.push_back(pick(rng));
  backend_decode out;
  std::uint32_t length = 0;
  for (std::size_t step = 0; step < o.steps; ++step) {
    item.rows = {static_cast<std::uint32_t>(item.tokens.size() - 1)};
    backends::pass_request request{{item}};
    const auto started = std::chrono::steady_clock::now();
    const auto result = backend->run(request);
    if (step > 0)
      out.pass_us.push_back(std::chrono::duration<double, std::micro>(
                                std::chrono::steady_clock::now() - started)
                                .count());
    else
      backend->attach_profile(&out.profile);
    const auto& answer = result.items[0];
    length += static_cast<std::uint32_t>(item.tokens.size());
    item.prefix = answer.kv.back();
    item.prefix_length = length;
    const auto top = std::max_element(answer.logprobs.begin(), answer.logprobs.end());
    item.tokens = {static_cast<backends::token_id>(top - answer.logprobs.begin())};
  }
  backend->attach_profile(nullptr);
  return out;
}

void line(std::ostream& out, const std::string& label, double us,
          const std::string& note = "") {
  out << "  " << std::left << std::setw(58) << label << std::right << std::setw(9)
      << fixed(us, 1) << " us" << (note.empty() ? "" : "  " + note) << '\n';
}

} // namespace

void run_pass_breakdown(const engine_config& config, const workload_options& options,
                        std::ostream& out) {
  const auto model =
      backends::describe_model(actors::backend_spec_for(config, bench_device(config)));
  const auto engine = run_variant(workload_kind::decode, options, config,
                                  bench_variant::full, answer_check_period);
  auto mock = config;
  mock.backend = "mock";
  // The mock runs on the CPU only: as many CPU workers as the model had devices.
  if (!mock.devices.empty())
    mock.devices.assign(mock.devices.size(), "cpu");
  mock.vocab_size = model.vocab_size;
  mock.context_length = model.context_length;
  mock.mock_cost_per_pass_us = mock.mock_cost_per_token_us = 0;
  const auto actors_alone = run_variant(workload_kind::decode, options, mock,
                                        bench_variant::full, answer_check_period);
  auto bare = decode_on_backend(config, options);

  const auto passes = static_cast<double>(engine.queries); // one pass per decode query
  const auto compute_us = engine.compute_seconds * 1e6 / passes;
  out << "profile: " << model.name << ", " << options.steps << " greedy steps from a "
      << options.prompt_length << "-token prompt, one query in flight\n\n"
      << "a lone uncached one-token query through the engine:\n";
  line(out, "latency from ask to answer, p50", engine.latency_p50_us,
       engine.latency_p50_us <= lone_query_goal_us ? "(goal <= 200: PASS)"
                                                   : "(goal <= 200: BELOW)");
  line(out, "  pass round trip, batcher to worker and back, p50",
       engine.pass_round_trip_p50_us);
  line(out, "    of which the backend's pass, mean", compute_us);
  line(out, "  the rest: request actor, batcher, cache (trie), answer",
       engine.latency_p50_us - engine.pass_round_trip_p50_us);
  line(out, "the same queries through the actors on the zero-cost mock, p50",
       actors_alone.latency_p50_us);
  out << "\nthe backend's pass alone (" << bare.pass_us.size()
      << " one-token passes after the prompt's), mean per pass:\n";
  line(out, "whole pass (wall), p50", quantile(bare.pass_us, 0.5));
  if (bare.profile.parts.empty())
    out << "  (this backend names no parts of its passes)\n";
  const auto per_pass = [&](std::uint64_t ns) {
    return bare.profile.passes ? double(ns) * 1e-3 / double(bare.profile.passes) : 0.0;
  };
  // Layer parts are summed over the layers first, then listed per layer.
  std::vector<std::pair<std::string, std::uint64_t>> by_kind, by_layer;
  const auto add = [](auto& list, const std::string& key, std::uint64_t ns) {
    for (auto& [k, v] : list)
      if (k == key) {
        v += ns;
        return;
      }
    list.emplace_back(key, ns);
  };
  for (const auto& part : bare.profile.parts) {
    const auto colon = part.name.find(": ");
    if (part.name.rfind("layer ", 0) == 0 && colon != std::string::npos) {
      add(by_kind, "all layers: " + part.name.substr(colon + 2), part.ns);
      add(by_layer, part.name.substr(0, colon), part.ns);
    } else {
      add(by_kind, part.name, part.ns);
    }
  }
  for (const auto& [name, ns] : by_kind)
    line(out, name, per_pass(ns));
  for (const auto& [name, ns] : by_layer)
    line(out, name + " (all its parts)", per_pass(ns));
}

} // namespace canopy::app
