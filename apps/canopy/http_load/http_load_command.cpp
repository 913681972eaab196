#include "http_load/http_load_command.hpp"

#include "http_load/http_load_report.hpp"

#include <algorithm>
#include <iostream>
#include <thread>

namespace canopy::app {

namespace {

const char* const usage =
    "Usage: canopy bench --target http://HOST:PORT [options]\n\n"
    "Measures a running `canopy serve` from outside, over HTTP/1.1 keep-alive. Each\n"
    "combination of workload, payload and connection count runs for --duration-s, every\n"
    "connection sending requests back to back (one client thread, async I/O).\n"
    "  hits     a set of sequences, each asked for once to warm the cache (not\n"
    "           measured), then drawn at random: cache hits\n"
    "  misses   every request a fresh random sequence: cache misses\n"
    "Payloads: json (POST /v1/logprobs, Accept: application/json), binary (the same,\n"
    "application/octet-stream), completions (POST /v1/completions with echo,\n"
    "logprobs 0 and max_tokens 0: every prompt token scored, as OpenAI clients score\n"
    "a text), or prefill (POST /v1/completions, max_tokens 1: the prompt read, one\n"
    "token generated, no scores; what any OpenAI server answers), or next_byte (POST\n"
    "/v1/next_byte: the first byte of the next token, 256 values). For completions\n"
    "and prefill the prompt tokens per second follow the table. With --vocab-size the\n"
    "target may be\n"
    "another OpenAI server (no GET /v1/model; the model id from GET /v1/models).\n"
    "Every answer is checked: status 200, the payload asked for, one full-vocabulary "
    "row\n"
    "after exactly the tokens sent (vocabulary from GET /v1/model). Failed requests are\n"
    "listed by kind and make the exit code 1. The server's overhead is each request's\n"
    "latency minus its Server-Timing engine;dur. After the table: the size of one row "
    "in\n"
    "each payload, and the serving targets (informational).\n";

void print_preamble(std::ostream& out, const http_load_options& o,
                    const served_model& m) {
  out << "canopy bench: " << o.target.url << ", model " << m.name << " (vocab "
      << m.vocab_size << ", context " << m.context_length << "); "
      << std::thread::hardware_concurrency() << " cores here, one client I/O thread\n"
      << "each run: " << o.duration_s << " s of " << o.sequence_length
      << "-token requests on keep-alive connections; hits over " << o.hit_sequences
      << " warmed sequences (seed " << o.seed
      << "), misses fresh from the OS's entropy\n\n";
}

nlohmann::json options_json(const http_load_options& o) {
  return {{"duration_s", o.duration_s},
          {"sequence_length", o.sequence_length},
          {"hit_sequences", o.hit_sequences},
          {"seed", o.seed},
          {"authorization", !o.auth_token.empty()}};
}

/// Refuses requests the served model would refuse, and misses that could repeat.
void check_sequence_length(const http_load_options& o, const served_model& m) {
  const auto length = std::to_string(o.sequence_length);
  if (o.sequence_length > m.context_length)
    throw usage_error("--sequence-length " + length + ": more than the served model's " +
                      "context_length " + std::to_string(m.context_length));
  const bool misses = std::find(o.workloads.begin(), o.workloads.end(),
                                http_workload::misses) != o.workloads.end();
  const auto least = least_miss_length(m.vocab_size);
  if (misses && (least == 0 || o.sequence_length < least))
    throw usage_error("--sequence-length " + length + ": misses need sequences of at " +
                      "least " + std::to_string(least) + " tokens over a vocabulary of " +
                      std::to_string(m.vocab_size) + ", or they could repeat (be hits)");
}

} // namespace

bool names_http_target(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--target" || a.rfind("--target=", 0) == 0)
      return true;
  return false;
}

int http_load_command(const std::vector<std::string>& argv) {
  const auto args =
      parse_command_line(argv, usage, http_load_flags(), engine_settings::refused);
  if (args.help)
    return 0;
  const auto options = http_load_options_of(args);
  const auto model = fetch_served_model(options);
  check_sequence_length(options, model);
  ensure_descriptors(
      *std::max_element(options.connections.begin(), options.connections.end()));
  const auto hit_set = make_hit_set(options.hit_sequences, options.sequence_length,
                                    model.vocab_size, options.seed);

  if (!options.json) {
    print_preamble(std::cout, options, model);
    print_http_table_header(std::cout);
    std::cout.flush(); // rows appear as runs finish
  }
  std::vector<http_load_result> results;
  for (auto w : options.workloads)
    for (auto p : options.payloads)
      for (auto n : options.connections) {
        results.push_back(run_load(options, model, w, p, n, hit_set));
        if (!options.json) {
          print_http_table_row(std::cout, results.back());
          std::cout.flush();
        }
      }

  std::uint64_t errors = 0;
  for (const auto& r : results)
    errors += r.errors.total;
  print_http_errors(std::cerr, results);
  const auto targets = evaluate_http_targets(results);
  // No engine runs here: a default config keeps print_targets' engine notes out.
  const engine_config no_engine;
  if (options.json) {
    nlohmann::json doc = {
        {"target", options.target.url},
        {"model",
         {{"name", model.name},
          {"vocab_size", model.vocab_size},
          {"context_length", model.context_length}}},
        {"cores", std::thread::hardware_concurrency()},
        {"options", options_json(options)},
        {"results", nlohmann::json::array()},
        {"errors", errors},
        {"row_bytes", row_sizes_json(results, model, options.sequence_length)},
        {"targets", targets_json(targets, no_engine).at("checks")},
    };
    for (const auto& r : results) {
      auto run = to_json(r);
      if (r.payload == http_payload::completions || r.payload == http_payload::prefill)
        run["prompt_tokens_per_second"] =
            run["requests_per_second"].get<double>() * double(options.sequence_length);
      doc["results"].push_back(std::move(run));
    }
    std::cout << doc.dump(2) << '\n';
  } else {
    std::cout << '\n';
    print_http_table_legend(std::cout);
    std::cout << "failed requests: " << errors << "\n\n";
    print_scoring_rates(std::cout, results, options.sequence_length);
    print_row_sizes(std::cout, results, model, options.sequence_length);
    std::cout << '\n';
    print_targets(std::cout, targets, no_engine);
  }
  return errors ? 1 : 0;
}

} // namespace canopy::app
