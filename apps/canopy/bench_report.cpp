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

} // namespace canopy::app
