// canopy bench: runs each chosen workload under each chosen variant, side by side in
// one process, and prints a table (or one JSON document) of what each costs.

#include "bench/bench_report.hpp"
#include "bench/bench_runner.hpp"
#include "bench/cpu_name.hpp"
#include "bench/device_ceilings.hpp"
#include "bench/encode_bench_command.hpp"
#include "bench/next_byte_probe.hpp"
#include "bench/pass_breakdown.hpp"
#include "bench/process_memory.hpp"
#include "bench/tier_probe.hpp"
#include "bench/worker_processes.hpp"
#include "cli_args.hpp"
#include "commands.hpp"
#include "http_load/http_load_command.hpp"
#include "option_table.hpp"

#include <canopy/backends/backend.hpp>

#include <iostream>
#include <sstream>
#include <thread>

namespace canopy::app {

namespace {

const char* const usage =
    "Usage: canopy bench [options] [engine settings]\n\n"
    "Measures the engine on workloads, each under several variants side by side (a\n"
    "fresh engine per run). The model is --model PATH, or the built-in seeded synthetic\n"
    "Llama; --backend mock measures the actors alone on the mock backend.\n"
    "  smc      particles extend a shared prompt one sampled token per step, all asking "
    "at\n"
    "           once; resampling duplicates them, so their contexts form a tree\n"
    "           (the particles' sampling is spread over the cores between steps)\n"
    "  decode   one sequence extended by its most likely token, one query at a time\n"
    "           (a lone uncached query per step: the engine's fixed cost per pass)\n"
    "  scoring  every prefix of random sequences, all asked at once\n"
    "  hits     the cache is warmed with random sequences, then asked for them again "
    "and\n"
    "           again with thousands in flight: cache-hit queries/s through the actors\n"
    "  misses   prompts are warmed (asked once, so their KV is cached), then each\n"
    "           query is a new sequence, a warmed prompt plus its own new tokens, with\n"
    "           thousands in flight: cache-miss queries/s, each computing only its new\n"
    "           tokens\n"
    "Variants: full (the config as given), no-cache (cache_enabled=false), no-kv\n"
    "(kv_reuse=false: every pass recomputes its whole sequence, as genlm-backend's HF\n"
    "path between cache_kv calls), no-batching (batch_size=1, merge_duplicates=false,\n"
    "flush_when_idle=true), direct (the backend called directly, one pass per query:\n"
    "the overhead baseline), adapters (full, the queries spread over the --adapters\n"
    "round robin: by population in smc, by sequence or prompt elsewhere; the same as\n"
    "full without adapters). Defaults: a model runs smc and scoring under full, no-kv\n"
    "and no-batching; the mock runs all four workloads under full, no-cache,\n"
    "no-batching and direct.\n"
    "Every 97th answer is checked against a reference computed without the engine (the\n"
    "mock's row bit for bit; a model run alone on the whole sequence within 1e-4 +\n"
    "2e-5 x |value|); a mismatch makes the exit code 1. After the table, a targets\n"
    "section compares the results with the engine's goals (informational: the exit\n"
    "code does not depend on it).\n"
    "With --remote_workers, the engine drives those worker nodes (with --workers 0, as "
    "a\n"
    "front only); --spawn-workers starts them itself and compares counts side by side.\n"
    "With --target http://HOST:PORT it measures a running `canopy serve` over HTTP\n"
    "instead ('canopy bench --target URL --help' lists those options); with --encode\n"
    "FILE the tokenizer's encoding speed ('canopy bench --encode FILE --help').\n";

/// The workload options, read by the table; the rest (workloads and variants, whose
/// defaults depend on the backend, --queries, which sets one count for hits and one for
/// misses, and the modes) the command reads itself.
const option_table<workload_options>& bench_options() {
  using o = workload_options;
  const o d;
  static const auto table =
      option_table<o>()
          .other({"workload", "LIST",
                  "smc, decode, scoring, hits, misses or all, comma-separated"})
          .other(
              {"variants", "LIST",
               "full, futures, no-cache, no-kv, no-batching, direct, adapters or all, "
               "comma-separated (futures: full, asked through engine futures, as hosts "
               "do, instead of callbacks)"})
          .count("particles", "N", "smc: particles of each population", &o::particles, 1)
          .count("populations", "P",
                 "smc: independent populations, each from its own random prompt, "
                 "stepped together (the adapters variant gives each its own adapter)",
                 &o::populations, 1)
          .count("steps", "T", "smc: sampled tokens per particle; decode: tokens decoded",
                 &o::steps, 1)
          .count("prompt-length", "L", "smc, decode: tokens of the random prompt",
                 &o::prompt_length, 1)
          .count("sequences", "S",
                 "scoring: random sequences; hits: warmed sequences; misses: warmed "
                 "prompts, or ceil(queries / vocab_size) if more",
                 &o::sequences, 1)
          .count("sequence-length", "L",
                 "scoring, hits: tokens per sequence; misses: per prompt",
                 &o::sequence_length, 1)
          .other({"queries", "N",
                  "hits and misses: measured queries (default " +
                      std::to_string(d.queries) + " for hits, " +
                      std::to_string(d.miss_queries) + " for misses)"})
          .count("miss-tokens", "K", "misses: new tokens per query after its prompt",
                 &o::miss_tokens, 1)
          .count("in-flight", "N", "hits and misses: queries in flight at most",
                 &o::in_flight, 2)
          .count("seed", "S", "seed of prompts, sequences and sampling", &o::seed)
          .other({"spawn-workers", "LIST",
                  "run everything on N `canopy worker` processes the bench starts on "
                  "loopback, for each N of the comma-separated list (0: the engine's own "
                  "in-process workers), with the bench's engine settings"})
          .other({"json", "", "print one JSON document instead of the table"})
          .other({"profile", "",
                  "instead of the table, where a lone query's time goes: the decode "
                  "workload through the engine, through the actors on the zero-cost "
                  "mock, and on the bare backend part by part (actor hops, trie, each "
                  "layer, LM head, row copy)"})
          .other({"tier-probe", "",
                  "instead of the table, when the KV host tier pays: a prompt's KV "
                  "(--prompt-length tokens) demoted and promoted on the bare backend, "
                  "against recomputing it; the host tier defaults to the device's "
                  "budget"})
          .other({"next-byte", "",
                  "instead of the table, next-byte distributions through the engine: "
                  "cold and cached calls/s over --sequences random sequences and "
                  "--queries calls, beside the row fetched and its masses built by the "
                  "caller, and the bytes of an answer against a row's"});
  return table;
}

workload_options workload_options_of(const parsed_args& args,
                                     const std::vector<workload_kind>& workloads,
                                     const backends::model_info& model) {
  workload_options o;
  bench_options().apply(args, o);
  o.queries = args.count("queries", o.queries, 1);
  o.miss_queries = args.count("queries", o.miss_queries, 1);
  // Checked here, so that a workload too long for the model is a usage error rather
  // than a run failing midway.
  const auto context = static_cast<std::size_t>(model.context_length);
  for (auto w : workloads) {
    const bool extends = w == workload_kind::smc || w == workload_kind::decode;
    if (extends && o.prompt_length + o.steps - 1 > context)
      throw usage_error(
          "--steps: SMC and decode contexts reach prompt-length + steps - 1 = " +
          std::to_string(o.prompt_length + o.steps - 1) +
          " tokens, more than context_length " + std::to_string(context));
    if (w == workload_kind::misses && o.sequence_length + o.miss_tokens > context)
      throw usage_error("--sequence-length, --miss-tokens: misses queries have "
                        "sequence-length + miss-tokens = " +
                        std::to_string(o.sequence_length + o.miss_tokens) +
                        " tokens, more than context_length " + std::to_string(context));
    if (!extends && o.sequence_length > context)
      throw usage_error("--sequence-length: " + std::to_string(o.sequence_length) +
                        " tokens is more than context_length " + std::to_string(context));
  }
  return o;
}

std::string describe_backend(const engine_config& c, const backends::model_info& model) {
  std::ostringstream out;
  out << "backend " << c.backend << ", ";
  if (c.backend == "torch") {
    if (c.model.empty())
      out << "the built-in seeded synthetic Llama (no --model given), ";
    out << "model " << model.name << " (vocab " << model.vocab_size << ", context "
        << model.context_length << "), dtype " << c.dtype;
    if (!c.weight_dtype.empty())
      out << ", weights " << c.weight_dtype << " (" << model.weight_kernels
          << " kernels)";
    return out.str();
  }
  if (c.mock_cost_per_pass_us == 0 && c.mock_cost_per_token_us == 0)
    out << "zero simulated cost (--mock_cost_per_token_us and --mock_cost_per_pass_us "
           "simulate a device)";
  else
    out << "simulated cost " << c.mock_cost_per_pass_us << " us per pass + "
        << c.mock_cost_per_token_us << " us per new token";
  return out.str();
}

std::string describe_workload(workload_kind w, const workload_options& o,
                              std::int64_t vocab) {
  std::ostringstream out;
  out << to_string(w) << ": ";
  switch (w) {
  case workload_kind::smc:
    if (o.populations > 1)
      out << o.populations << " populations of ";
    out << o.particles << " particles x " << o.steps << " steps from a "
        << o.prompt_length << "-token prompt, resampled when ESS < " << o.particles / 2.0;
    break;
  case workload_kind::decode:
    out << o.steps << " greedy steps from a " << o.prompt_length
        << "-token prompt, one query in flight";
    break;
  case workload_kind::scoring:
    out << "every prefix of " << o.sequences << " random " << o.sequence_length
        << "-token sequences";
    break;
  case workload_kind::hits:
    out << o.queries << " queries over " << o.sequences << " warmed " << o.sequence_length
        << "-token sequences, up to " << o.in_flight << " in flight";
    break;
  case workload_kind::misses:
    out << o.miss_queries << " new sequences, each one of " << miss_prompt_count(o, vocab)
        << " warmed " << o.sequence_length << "-token prompts plus " << o.miss_tokens
        << " token" << (o.miss_tokens == 1 ? "" : "s") << " (no two sharing one), up to "
        << o.in_flight << " in flight";
    break;
  }
  return out.str();
}

/// --spawn-workers: counts of worker processes; empty when not given.
std::vector<std::size_t> spawn_counts_of(const parsed_args& args) {
  std::vector<std::size_t> out;
  if (!args.has("spawn-workers"))
    return out;
  for (const auto& name : args.names("spawn-workers", "")) {
    if (name.empty() || name.size() > 3 ||
        name.find_first_not_of("0123456789") != std::string::npos)
      throw usage_error("--spawn-workers: '" + name + "' is not a count (e.g. 0,1,2,4)");
    out.push_back(std::stoul(name));
  }
  if (!args.config.remote_workers.empty())
    throw usage_error(
        "--spawn-workers starts its own workers: give it or --remote_workers, not both");
  return out;
}

/// The engine settings of a front driving `addresses` with no device of its own.
engine_config front_of(engine_config config, const std::vector<std::string>& addresses) {
  config.workers = 0;
  config.devices.clear();
  config.remote_workers = addresses;
  return config;
}

template <class T> std::string joined(const std::vector<T>& items) {
  using std::to_string;
  std::string out;
  for (const auto& item : items)
    out += (out.empty() ? "" : ", ") + std::string(to_string(item));
  return out;
}

nlohmann::json options_json(const workload_options& o, std::int64_t vocab) {
  return {{"particles", o.particles},
          {"populations", o.populations},
          {"steps", o.steps},
          {"prompt_length", o.prompt_length},
          {"sequences", o.sequences},
          {"sequence_length", o.sequence_length},
          {"queries", o.queries},
          {"miss_queries", o.miss_queries},
          {"miss_tokens", o.miss_tokens},
          {"miss_prompts", miss_prompt_count(o, vocab)},
          {"seed", o.seed},
          {"in_flight", o.in_flight}};
}

} // namespace

int bench_command(const std::vector<std::string>& argv) {
  if (names_http_target(argv))
    return http_load_command(argv);
  if (names_encode_bench(argv))
    return encode_bench_command(argv);
  const auto args = parse_command_line(argv, usage, bench_options().flags());
  if (args.help)
    return 0;
  const bool mock = args.config.backend == "mock";
  // A model's passes cost real time: its default is the two workloads of its targets.
  const auto workloads =
      parse_enum_list(args, "workload", workload_kind_names,
                      mock ? values_of(workload_kind_names)
                           : std::vector{workload_kind::smc, workload_kind::scoring});
  const auto variants = parse_enum_list(
      args, "variants", bench_variant_names,
      mock ? std::vector{bench_variant::full, bench_variant::no_cache,
                         bench_variant::no_batching, bench_variant::direct}
           : std::vector{bench_variant::full, bench_variant::no_kv,
                         bench_variant::no_batching});
  const auto spawn_counts = spawn_counts_of(args);
  const bool network = !spawn_counts.empty() || !args.config.remote_workers.empty();
  // The model's vocabulary and context shape the workloads.
  const auto model = configured_model(args.config);
  const auto options = workload_options_of(args, workloads, model);
  if (args.has("profile")) {
    auto profiled = options;
    if (!args.has("steps"))
      profiled.steps = std::min<std::size_t>(
          256, static_cast<std::size_t>(model.context_length) - profiled.prompt_length);
    run_pass_breakdown(args.config, profiled, std::cout);
    return 0;
  }
  if (args.has("next-byte")) {
    run_next_byte_probe(args.config, options, std::cout);
    return 0;
  }
  if (args.has("tier-probe")) {
    run_tier_probe(args.config, options, std::cout);
    return 0;
  }
  const bool json = args.has("json");
  const auto cores = std::thread::hardware_concurrency();
  // The ceilings of a model's passes, measured in this run (the machines are noisy).
  const auto ceilings =
      mock ? device_ceilings{}
           : measure_device_ceilings(bench_device(args.config), args.config.dtype);
  const bool rss_per_run = reset_peak_rss();

  if (!json) {
    std::cout << "canopy bench: " << describe_backend(args.config, model) << "; "
              << cpu_name() << " (" << cpu_kernels() << "), " << cores
              << " cores; variants " << joined(variants) << ", each on a fresh engine\n"
              << "config: " << args.config.to_json() << '\n';
    if (!mock) {
      std::cout << "matmul ceiling: " << ceilings.matmul_gflops << " GFLOP/s ("
                << ceilings.matmul_dtype << ' ' << ceilings.matmul_size << 'x'
                << ceilings.matmul_size << " products on " << ceilings.device;
      if (ceilings.copy_gbytes_per_s > 0)
        std::cout << "; copies " << ceilings.copy_gbytes_per_s
                  << " GB/s device to device";
      std::cout << ", measured now)\n";
    }
    for (auto w : workloads)
      std::cout << describe_workload(w, options, model.vocab_size) << '\n';
    if (!spawn_counts.empty())
      std::cout << "worker processes started for the runs (0: in-process): "
                << joined(spawn_counts) << "; direct runs in-process only\n";
    std::cout << "seed " << options.seed << "; every " << answer_check_period
              << (mock ? "th answer checked bit for bit against the mock's reference row"
                       : "th answer checked against the model run alone (within 1e-4 + "
                         "2e-5 x |value|)")
              << "; rss "
              << (rss_per_run ? "peak per run"
                              : "process peak so far (cannot reset it here)")
              << "\n\n";
    print_table_header(std::cout, network);
    std::cout.flush(); // rows appear as runs finish
  }
  std::vector<bench_result> results;
  auto run_all = [&](const engine_config& config, bool remote) {
    for (auto w : workloads)
      for (auto v : variants) {
        if (remote && v == bench_variant::direct)
          continue; // the bare backend is in this process
        results.push_back(run_variant(w, options, config, v, answer_check_period));
        if (!json) {
          print_table_row(std::cout, results.back(), network);
          std::cout.flush();
        }
      }
  };
  if (spawn_counts.empty())
    run_all(args.config, network);
  for (auto n : spawn_counts) {
    if (n == 0) {
      run_all(args.config, false);
      continue;
    }
    worker_processes workers(n, args.config);
    run_all(front_of(args.config, workers.addresses()), true);
  }

  std::uint64_t checked = 0, mismatches = 0;
  for (const auto& r : results) {
    checked += r.rows_checked;
    mismatches += r.mismatches;
    if (r.mismatches)
      std::cerr << "canopy bench: " << to_string(r.workload) << "/"
                << to_string(r.variant) << ": " << r.mismatches << " of "
                << r.rows_checked
                << " checked rows differ from the reference; first: " << r.first_mismatch
                << '\n';
  }
  const auto targets = evaluate_targets(results, args.config, ceilings);
  if (json) {
    nlohmann::json doc = {
        {"backend", args.config.backend},
        {"simulated_cost_us",
         {{"per_pass", args.config.mock_cost_per_pass_us},
          {"per_token", args.config.mock_cost_per_token_us}}},
        {"cpu", cpu_name()},
        {"cpu_kernels", cpu_kernels()},
        {"cores", cores},
        {"device_ceilings",
         {{"device", ceilings.device},
          {"matmul_dtype", ceilings.matmul_dtype},
          {"matmul_size", ceilings.matmul_size},
          {"matmul_gflops", ceilings.matmul_gflops},
          {"copy_gbytes_per_s", ceilings.copy_gbytes_per_s}}},
        {"config", nlohmann::json::parse(args.config.to_json())},
        {"model",
         {{"name", model.name},
          {"vocab_size", model.vocab_size},
          {"context_length", model.context_length},
          {"weight_kernels", model.weight_kernels}}},
        {"workload_options", options_json(options, model.vocab_size)},
        {"check_every", answer_check_period},
        {"peak_rss_per_run", rss_per_run},
        {"results", nlohmann::json::array()},
        {"rows_checked", checked},
        {"mismatches", mismatches},
        {"targets", targets_json(targets, args.config)},
    };
    for (const auto& r : results)
      doc["results"].push_back(to_json(r));
    std::cout << doc.dump(2) << '\n';
  } else {
    std::cout << '\n';
    print_table_legend(std::cout, network);
    print_kv_peaks(std::cout, results, options.particles);
    std::cout << "correctness: " << checked << " rows checked, " << mismatches
              << " mismatches\n\n";
    print_targets(std::cout, targets, args.config);
  }
  return mismatches ? 1 : 0;
}

} // namespace canopy::app
