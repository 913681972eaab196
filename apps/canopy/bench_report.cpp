#include "bench_report.hpp"

#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

namespace canopy::app {

namespace {

constexpr double mib = 1024.0 * 1024.0;

struct derived {
  double queries_per_second;
  double computed_per_requested;
  double computed_per_unique;
  double duplicate_share;
};

double ratio(double a, double b) {
  return b > 0 ? a / b : 0.0;
}

derived derive(const bench_result& r) {
  return {ratio(double(r.queries), r.seconds),
          ratio(double(r.tokens_computed), double(r.tokens_requested)),
          ratio(double(r.tokens_computed), double(r.unique_tokens)),
          ratio(double(r.repeated_queries), double(r.queries))};
}

std::string fixed(double value, int decimals) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(decimals) << value;
  return s.str();
}

constexpr double hit_queries_goal = 300000;
constexpr double miss_queries_goal = 100000;

bool zero_cost(const engine_config& c) {
  return c.mock_cost_per_pass_us == 0 && c.mock_cost_per_token_us == 0;
}

std::string describe_target(const target_check& t) {
  const std::string workload(to_string(t.workload));
  if (t.name == "queries_per_second")
    return (t.workload == workload_kind::hits ? "cache-hit" : "cache-miss") +
           std::string(" queries/s (") + workload + ")";
  return "computed/unique (" + workload + ")";
}

// Negative widths are left-aligned.
constexpr int widths[] = {-8, -12, 8, 8, 10, 9, 9, 9, 8, 9, 6, 6, 9, 9, 8, 8, 4};

void print_cells(std::ostream& out, const std::vector<std::string>& cells) {
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const int w = widths[i];
    out << (i ? " " : "") << (w < 0 ? std::left : std::right) << std::setw(w < 0 ? -w : w)
        << cells[i];
  }
  out << std::right << '\n';
}

} // namespace

void print_table_header(std::ostream& out) {
  print_cells(out, {"workload", "variant", "queries", "seconds", "queries/s", "tok req",
                    "tok comp", "comp/req", "unique", "comp/uniq", "dup", "batch",
                    "p50 us", "p99 us", "rss MiB", "eng MiB", "bad"});
}

void print_table_row(std::ostream& out, const bench_result& r) {
  const auto d = derive(r);
  print_cells(out, {std::string(to_string(r.workload)), std::string(to_string(r.variant)),
                    std::to_string(r.queries), fixed(r.seconds, 3),
                    fixed(d.queries_per_second, 0), std::to_string(r.tokens_requested),
                    std::to_string(r.tokens_computed), fixed(d.computed_per_requested, 3),
                    std::to_string(r.unique_tokens), fixed(d.computed_per_unique, 2),
                    fixed(100 * d.duplicate_share, 0) + "%",
                    r.mean_batch_size > 0 ? fixed(r.mean_batch_size, 1) : "-",
                    fixed(r.latency_p50_us, 1), fixed(r.latency_p99_us, 1),
                    fixed(double(r.peak_rss_bytes) / mib, 0),
                    fixed(double(r.logprob_bytes + r.kv_bytes) / mib, 1),
                    std::to_string(r.mismatches)});
}

void print_table_legend(std::ostream& out) {
  out << "tok req/comp: tokens asked for / computed by the backend; unique: distinct "
         "prefixes "
         "of the workload\n(the least any engine must compute, so comp/uniq 1.00 is "
         "ideal); "
         "dup: queries repeating an earlier one\nexactly; batch: queries per pass; "
         "p50/p99: "
         "latency from ask to answer; rss: peak resident memory of\nthe process during "
         "the "
         "run; eng: cached rows + KV at the end; bad: checked rows differing from the "
         "reference\n";
}

nlohmann::json to_json(const bench_result& r) {
  const auto d = derive(r);
  return {
      {"workload", std::string(to_string(r.workload))},
      {"variant", std::string(to_string(r.variant))},
      {"queries", r.queries},
      {"seconds", r.seconds},
      {"queries_per_second", d.queries_per_second},
      {"tokens_requested", r.tokens_requested},
      {"tokens_computed", r.tokens_computed},
      {"computed_per_requested", d.computed_per_requested},
      {"unique_tokens", r.unique_tokens},
      {"computed_per_unique", d.computed_per_unique},
      {"duplicate_share", d.duplicate_share},
      {"mean_batch_size", r.mean_batch_size},
      {"latency_us", {{"p50", r.latency_p50_us}, {"p99", r.latency_p99_us}}},
      {"peak_rss_bytes", r.peak_rss_bytes},
      {"engine_bytes", {{"logprobs", r.logprob_bytes}, {"kv", r.kv_bytes}}},
      {"rows_checked", r.rows_checked},
      {"mismatches", r.mismatches},
      {"first_mismatch", r.first_mismatch},
      {"engine_stats", r.engine_stats_json.empty()
                           ? nlohmann::json(nullptr)
                           : nlohmann::json::parse(r.engine_stats_json)},
  };
}

std::vector<target_check> evaluate_targets(const std::vector<bench_result>& results) {
  std::vector<target_check> out;
  const auto full_row = [&](workload_kind w) -> const bench_result* {
    for (const auto& r : results)
      if (r.workload == w && r.variant == bench_variant::full)
        return &r;
    return nullptr;
  };
  const auto throughput = [&](workload_kind w, double goal) {
    target_check t;
    t.name = "queries_per_second";
    t.workload = w;
    t.goal = goal;
    if (const auto* r = full_row(w)) {
      t.ran = true;
      t.measured = derive(*r).queries_per_second;
      t.pass = t.measured >= goal;
    }
    out.push_back(t);
  };
  throughput(workload_kind::hits, hit_queries_goal);
  throughput(workload_kind::misses, miss_queries_goal);
  for (auto w : {workload_kind::smc, workload_kind::scoring, workload_kind::misses}) {
    target_check t;
    t.name = "computed_per_unique";
    t.workload = w;
    t.goal = 1.0;
    if (const auto* r = full_row(w)) {
      t.ran = true;
      t.measured = derive(*r).computed_per_unique;
      t.tokens_computed = r->tokens_computed;
      t.unique_tokens = r->unique_tokens;
      // Exactly: a token computed twice (or not at all) is a miss however rare.
      t.pass = r->unique_tokens > 0 && r->tokens_computed == r->unique_tokens;
    }
    out.push_back(t);
  }
  return out;
}

void print_targets(std::ostream& out, const std::vector<target_check>& targets,
                   const engine_config& config) {
  out << "targets (full variant; informational, the exit code does not depend on them)";
  if (!zero_cost(config))
    out << "; the goals are for zero simulated cost, this run simulated a device";
  out << ":\n";
  for (const auto& t : targets) {
    out << "  " << std::left << std::setw(34) << describe_target(t) << std::right;
    const bool rate = t.name == "queries_per_second";
    if (!t.ran) {
      out << "not run (needs --workload " << to_string(t.workload)
          << " and --variants full)\n";
      continue;
    }
    out << std::setw(9) << (rate ? fixed(t.measured, 0) : fixed(t.measured, 2))
        << (rate ? "  vs >= " : "  vs    ") << std::left << std::setw(7)
        << (rate ? fixed(t.goal, 0) : fixed(t.goal, 2)) << std::right << "  "
        << (t.pass ? "PASS" : "BELOW");
    if (!rate)
      out << " (" << t.tokens_computed << " computed, " << t.unique_tokens << " unique)";
    out << '\n';
  }
}

nlohmann::json targets_json(const std::vector<target_check>& targets,
                            const engine_config& config) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& t : targets) {
    nlohmann::json c = {
        {"name", t.name},
        {"workload", std::string(to_string(t.workload))},
        {"variant", "full"},
        {"comparison", t.name == "queries_per_second" ? ">=" : "=="},
        {"goal", t.goal},
        {"ran", t.ran},
        {"measured", t.ran ? nlohmann::json(t.measured) : nlohmann::json(nullptr)},
        {"status", t.ran ? (t.pass ? "PASS" : "BELOW") : "not_run"},
    };
    if (t.name == "computed_per_unique" && t.ran) {
      c["tokens_computed"] = t.tokens_computed;
      c["unique_tokens"] = t.unique_tokens;
    }
    checks.push_back(std::move(c));
  }
  return {{"zero_simulated_cost", zero_cost(config)}, {"checks", std::move(checks)}};
}

} // namespace canopy::app
