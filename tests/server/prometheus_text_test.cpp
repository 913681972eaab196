// /metrics text: every line checked against the text format 0.0.4 by a small parser
// written here, histograms cumulative with +Inf equal to _count, labels escaped, and
// every metric docs/http-api.md promises present with its value.

#include <canopy/server/api/prometheus_text.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace canopy::server {
namespace {

struct sample_line {
  std::string name;
  std::map<std::string, std::string> labels; // values unescaped
  double value = 0;
};

/// The text parsed, with every departure from the format in `errors`.
struct parsed_text {
  std::map<std::string, std::string> types; // family -> counter | gauge | histogram
  std::vector<sample_line> samples;
  std::vector<std::string> errors;
};

bool is_name(const std::string& s, bool colon_allowed) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])))
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
          (colon_allowed && c == ':')))
      return false;
  return true;
}

bool parse_value(const std::string& text, double& value) {
  if (text == "+Inf" || text == "-Inf" || text == "NaN") {
    value = text == "NaN" ? NAN : text[0] == '+' ? INFINITY : -INFINITY;
    return true;
  }
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-');
}

/// `name{label="value",...} value`; false when malformed.
bool parse_sample(const std::string& line, sample_line& out) {
  std::size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ')
    ++i;
  out.name = line.substr(0, i);
  if (!is_name(out.name, true) || i == line.size())
    return false;
  if (line[i] == '{') {
    ++i;
    while (true) {
      const std::size_t eq = line.find('=', i);
      if (eq == std::string::npos)
        return false;
      const std::string label = line.substr(i, eq - i);
      if (!is_name(label, false) || out.labels.count(label) || eq + 1 >= line.size() ||
          line[eq + 1] != '"')
        return false;
      std::string value;
      for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] != '\\') {
          value += line[i];
          continue;
        }
        if (++i == line.size())
          return false;
        if (line[i] == 'n')
          value += '\n';
        else if (line[i] == '\\' || line[i] == '"')
          value += line[i];
        else
          return false;
      }
      if (i == line.size())
        return false;
      out.labels[label] = value;
      ++i; // past the closing quote
      if (i < line.size() && line[i] == ',') {
        ++i;
        continue;
      }
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      return false;
    }
  }
  return i < line.size() && line[i] == ' ' && parse_value(line.substr(i + 1), out.value);
}

parsed_text check_text(const std::string& text) {
  parsed_text p;
  if (text.empty() || text.back() != '\n')
    p.errors.push_back("the text does not end with a newline");
  std::string family, help_of;
  std::size_t start = 0;
  for (int number = 1; start < text.size(); ++number) {
    const std::size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    const std::string where = "line " + std::to_string(number) + " '" + line + "': ";
    if (line.rfind("# HELP ", 0) == 0) {
      const std::size_t space = line.find(' ', 7);
      help_of = line.substr(7, space - 7);
      const std::string help = space == std::string::npos ? "" : line.substr(space + 1);
      for (std::size_t i = 0; i < help.size(); ++i)
        if (help[i] == '\\' &&
            (++i == help.size() || (help[i] != '\\' && help[i] != 'n')))
          p.errors.push_back(where + "bad escape in HELP");
      if (!is_name(help_of, true) || help.empty())
        p.errors.push_back(where + "bad HELP");
    } else if (line.rfind("# TYPE ", 0) == 0) {
      const std::size_t space = line.find(' ', 7);
      family = line.substr(7, space - 7);
      const std::string type = space == std::string::npos ? "" : line.substr(space + 1);
      if (type != "counter" && type != "gauge" && type != "histogram")
        p.errors.push_back(where + "unknown type");
      if (family != help_of)
        p.errors.push_back(where + "TYPE without its HELP just before");
      if (!p.types.emplace(family, type).second)
        p.errors.push_back(where + "family declared twice");
      if (family.rfind("canopy_", 0) != 0)
        p.errors.push_back(where + "not canopy_*");
      if ((type == "counter") !=
          (family.size() > 6 && family.compare(family.size() - 6, 6, "_total") == 0))
        p.errors.push_back(where + "counters, and only counters, end in _total");
    } else {
      sample_line s;
      if (!parse_sample(line, s)) {
        p.errors.push_back(where + "malformed sample");
        continue;
      }
      const auto type = p.types.find(family);
      const bool belongs = type != p.types.end() &&
                           (type->second == "histogram" ? s.name == family + "_bucket" ||
                                                              s.name == family + "_sum" ||
                                                              s.name == family + "_count"
                                                        : s.name == family);
      if (!belongs)
        p.errors.push_back(where + "sample outside its family '" + family + "'");
      p.samples.push_back(std::move(s));
    }
  }
  return p;
}

/// Histogram rules: le ascending, counts cumulative, last le="+Inf" equal to _count.
void check_histograms(const parsed_text& p) {
  for (const auto& [family, type] : p.types) {
    if (type != "histogram")
      continue;
    std::vector<const sample_line*> buckets;
    const sample_line* count = nullptr;
    const sample_line* sum = nullptr;
    for (const sample_line& s : p.samples) {
      if (s.name == family + "_bucket")
        buckets.push_back(&s);
      else if (s.name == family + "_count")
        count = &s;
      else if (s.name == family + "_sum")
        sum = &s;
    }
    ASSERT_FALSE(buckets.empty()) << family;
    ASSERT_NE(count, nullptr) << family;
    ASSERT_NE(sum, nullptr) << family;
    double previous_le = -INFINITY, previous_count = 0;
    for (const sample_line* b : buckets) {
      ASSERT_EQ(b->labels.count("le"), 1u) << family;
      double le = 0;
      ASSERT_TRUE(parse_value(b->labels.at("le"), le)) << family;
      EXPECT_GT(le, previous_le) << family;
      EXPECT_GE(b->value, previous_count) << family << " le=" << b->labels.at("le");
      previous_le = le;
      previous_count = b->value;
    }
    EXPECT_EQ(buckets.back()->labels.at("le"), "+Inf") << family;
    EXPECT_EQ(buckets.back()->value, count->value) << family;
  }
}

/// The value of the one sample with this name and these labels.
double value_of(const parsed_text& p, const std::string& name,
                const std::map<std::string, std::string>& labels = {}) {
  const sample_line* found = nullptr;
  for (const sample_line& s : p.samples)
    if (s.name == name && s.labels == labels) {
      EXPECT_EQ(found, nullptr) << "duplicate sample " << name;
      found = &s;
    }
  EXPECT_NE(found, nullptr) << "no sample " << name;
  return found != nullptr ? found->value : NAN;
}

histogram_snapshot histogram(std::vector<double> bounds,
                             std::vector<std::uint64_t> counts, double sum) {
  histogram_snapshot h;
  h.upper_bounds = std::move(bounds);
  h.counts = std::move(counts);
  h.sum = sum;
  for (std::uint64_t c : h.counts)
    h.count += c;
  return h;
}

engine_stats busy_engine() {
  engine_stats e;
  e.queries = 100;
  e.answered = 90;
  e.failed = 7;
  e.cache_hits = 40;
  e.merged_duplicates = 12;
  e.batches = 9;
  e.failed_passes = 1;
  e.deferred = 2;
  e.tokens_requested = 5000;
  e.tokens_computed = 800;
  e.compute_seconds = 0.25;
  e.logprob_evictions = 3;
  e.kv_evictions = 4;
  e.kv_demotions = 21;
  e.kv_demoted_bytes = 2100;
  e.kv_promotions = 13;
  e.kv_promoted_bytes = 1300;
  e.refused_attaches = 5;
  e.logprob_entries = 6;
  e.locked_nodes = 65;
  e.logprob_bytes = 1 << 20;
  e.logprob_budget_bytes = 1 << 30;
  e.kv_bytes = {1000, 2000};
  worker_stats local;
  local.id = 0;
  local.node = "local";
  local.device = "cpu";
  local.state = "active";
  local.passes = 7;
  local.tokens_computed = 300;
  local.kv_bytes = 1000;
  local.kv_peak_bytes = 3000;
  local.kv_budget_bytes = 4096;
  local.kv_host_bytes = 500;
  local.kv_host_budget_bytes = 16384;
  worker_stats remote = local;
  remote.id = 1;
  remote.node = "10.0.0.2:7101";
  remote.state = "lost";
  remote.in_flight = 2;
  remote.heartbeat_age_ms = 1500;
  remote.losses = 1;
  remote.redispatched_queries = 17;
  remote.kv_bytes = 2000;
  remote.kv_budget_bytes = 8192;
  remote.kv_host_bytes = 0;
  remote.kv_host_budget_bytes = 0;
  e.workers = {local, remote};
  node_stats node;
  node.address = "10.0.0.2:7101";
  node.state = "refused";
  node.last_error = "fingerprint differs";
  node.admissions = 2;
  node.losses = 1;
  e.nodes = {node};
  e.latency_seconds = histogram({0.001, 0.01, 0.1}, {2, 0, 5, 1}, 1.5);
  e.batch_size = histogram({1, 2, 4}, {3, 3, 3, 0}, 20);
  e.errors_by_code = {{"cancelled", 2}, {"deadline_exceeded", 5}};
  e.queue_depth = 11;
  e.in_flight = 13;
  return e;
}

server_stats busy_server() {
  server_stats s;
  s.connections_open = 3;
  s.connections_accepted = 50;
  s.connections_refused = 1;
  s.requests = {
      {{"/v1/logprobs", 200}, 40}, {{"/v1/logprobs", 400}, 2}, {{"other", 404}, 1}};
  s.request_seconds = histogram({0.5}, {4, 1}, 2.75);
  s.bytes_received = 12345;
  s.bytes_sent = 67890;
  s.cancelled_requests = 6;
  return s;
}

TEST(prometheus_text, every_line_is_well_formed) {
  for (const auto& [engine, server] : {std::pair{busy_engine(), busy_server()},
                                       std::pair{engine_stats{}, server_stats{}}}) {
    const parsed_text p = check_text(prometheus_text(engine, server));
    EXPECT_TRUE(p.errors.empty()) << ::testing::PrintToString(p.errors);
    check_histograms(p);
  }
}

TEST(prometheus_text, histogram_buckets_are_cumulative) {
  engine_stats e = busy_engine();
  e.latency_seconds.count = 9; // a snapshot read across increments: buckets say 8
  const std::string text = prometheus_text(e, busy_server());
  EXPECT_NE(text.find("canopy_query_latency_seconds_bucket{le=\"0.001\"} 2\n"
                      "canopy_query_latency_seconds_bucket{le=\"0.01\"} 2\n"
                      "canopy_query_latency_seconds_bucket{le=\"0.1\"} 7\n"
                      "canopy_query_latency_seconds_bucket{le=\"+Inf\"} 8\n"
                      "canopy_query_latency_seconds_sum 1.5\n"
                      "canopy_query_latency_seconds_count 8\n"),
            std::string::npos)
      << text;
  const parsed_text p = check_text(text);
  EXPECT_EQ(value_of(p, "canopy_batch_size_bucket", {{"le", "4"}}), 9);
  EXPECT_EQ(value_of(p, "canopy_batch_size_count"), 9);
  EXPECT_EQ(value_of(p, "canopy_http_request_duration_seconds_bucket", {{"le", "0.5"}}),
            4);
  EXPECT_EQ(value_of(p, "canopy_http_request_duration_seconds_bucket", {{"le", "+Inf"}}),
            5);
  EXPECT_EQ(value_of(p, "canopy_http_request_duration_seconds_sum"), 2.75);
  // No observations: only the +Inf bucket, at zero.
  const parsed_text empty = check_text(prometheus_text({}, {}));
  EXPECT_EQ(value_of(empty, "canopy_query_latency_seconds_bucket", {{"le", "+Inf"}}), 0);
  EXPECT_EQ(value_of(empty, "canopy_query_latency_seconds_count"), 0);
}

TEST(prometheus_text, every_metric_is_there_with_its_value) {
  const parsed_text p = check_text(prometheus_text(busy_engine(), busy_server()));
  EXPECT_EQ(value_of(p, "canopy_queries_total"), 100);
  EXPECT_EQ(value_of(p, "canopy_queries_answered_total"), 90);
  EXPECT_EQ(value_of(p, "canopy_queries_failed_total"), 7);
  EXPECT_EQ(value_of(p, "canopy_query_errors_total", {{"code", "cancelled"}}), 2);
  EXPECT_EQ(value_of(p, "canopy_query_errors_total", {{"code", "deadline_exceeded"}}), 5);
  EXPECT_EQ(value_of(p, "canopy_cache_hits_total"), 40);
  EXPECT_EQ(value_of(p, "canopy_merged_duplicates_total"), 12);
  EXPECT_EQ(value_of(p, "canopy_batches_total"), 9);
  EXPECT_EQ(value_of(p, "canopy_failed_passes_total"), 1);
  EXPECT_EQ(value_of(p, "canopy_deferred_queries_total"), 2);
  EXPECT_EQ(value_of(p, "canopy_tokens_requested_total"), 5000);
  EXPECT_EQ(value_of(p, "canopy_tokens_computed_total"), 800);
  EXPECT_EQ(value_of(p, "canopy_compute_seconds_total"), 0.25);
  EXPECT_EQ(value_of(p, "canopy_evictions_total", {{"kind", "logprobs"}}), 3);
  EXPECT_EQ(value_of(p, "canopy_evictions_total", {{"kind", "kv"}}), 4);
  EXPECT_EQ(value_of(p, "canopy_kv_tier_moves_total", {{"direction", "demote"}}), 21);
  EXPECT_EQ(value_of(p, "canopy_kv_tier_moves_total", {{"direction", "promote"}}), 13);
  EXPECT_EQ(value_of(p, "canopy_kv_tier_moved_bytes_total", {{"direction", "demote"}}),
            2100);
  EXPECT_EQ(value_of(p, "canopy_kv_tier_moved_bytes_total", {{"direction", "promote"}}),
            1300);
  EXPECT_EQ(value_of(p, "canopy_refused_attaches_total"), 5);
  EXPECT_EQ(value_of(p, "canopy_logprob_cache_entries"), 6);
  EXPECT_EQ(value_of(p, "canopy_cache_locked_nodes"), 65);
  EXPECT_EQ(value_of(p, "canopy_logprob_cache_bytes"), 1 << 20);
  EXPECT_EQ(value_of(p, "canopy_logprob_cache_budget_bytes"), 1 << 30);
  const std::map<std::string, std::string> local = {
      {"worker", "0"}, {"node", "local"}, {"device", "cpu"}};
  const std::map<std::string, std::string> remote = {
      {"worker", "1"}, {"node", "10.0.0.2:7101"}, {"device", "cpu"}};
  EXPECT_EQ(value_of(p, "canopy_kv_cache_bytes", local), 1000);
  EXPECT_EQ(value_of(p, "canopy_kv_cache_bytes", remote), 2000);
  EXPECT_EQ(value_of(p, "canopy_kv_cache_peak_bytes", local), 3000);
  EXPECT_EQ(value_of(p, "canopy_kv_cache_budget_bytes", local), 4096);
  EXPECT_EQ(value_of(p, "canopy_kv_cache_budget_bytes", remote), 8192);
  EXPECT_EQ(value_of(p, "canopy_kv_host_cache_bytes", local), 500);
  EXPECT_EQ(value_of(p, "canopy_kv_host_cache_budget_bytes", local), 16384);
  EXPECT_EQ(value_of(p, "canopy_kv_host_cache_budget_bytes", remote), 0);
  EXPECT_EQ(value_of(p, "canopy_worker_up", local), 1);
  EXPECT_EQ(value_of(p, "canopy_worker_up", remote), 0);
  EXPECT_EQ(value_of(p, "canopy_worker_passes_total", local), 7);
  EXPECT_EQ(value_of(p, "canopy_worker_tokens_computed_total", local), 300);
  EXPECT_EQ(value_of(p, "canopy_worker_passes_in_flight", remote), 2);
  EXPECT_EQ(value_of(p, "canopy_worker_losses_total", remote), 1);
  EXPECT_EQ(value_of(p, "canopy_worker_redispatched_queries_total", remote), 17);
  EXPECT_EQ(value_of(p, "canopy_worker_heartbeat_age_seconds", remote), 1.5);
  EXPECT_EQ(p.samples.end(),
            std::find_if(p.samples.begin(), p.samples.end(),
                         [&](const auto& s) {
                           return s.name == "canopy_worker_heartbeat_age_seconds" &&
                                  s.labels == local;
                         }))
      << "an in-process worker has no heartbeat";
  EXPECT_EQ(
      value_of(p, "canopy_node_state", {{"node", "10.0.0.2:7101"}, {"state", "refused"}}),
      1);
  EXPECT_EQ(value_of(p, "canopy_node_admissions_total", {{"node", "10.0.0.2:7101"}}), 2);
  EXPECT_EQ(value_of(p, "canopy_node_losses_total", {{"node", "10.0.0.2:7101"}}), 1);
  EXPECT_EQ(value_of(p, "canopy_queue_depth"), 11);
  EXPECT_EQ(value_of(p, "canopy_queries_in_flight"), 13);
  EXPECT_EQ(value_of(p, "canopy_http_connections_open"), 3);
  EXPECT_EQ(value_of(p, "canopy_http_connections_accepted_total"), 50);
  EXPECT_EQ(value_of(p, "canopy_http_connections_refused_total"), 1);
  EXPECT_EQ(value_of(p, "canopy_http_requests_total",
                     {{"route", "/v1/logprobs"}, {"status", "200"}}),
            40);
  EXPECT_EQ(
      value_of(p, "canopy_http_requests_total", {{"route", "other"}, {"status", "404"}}),
      1);
  EXPECT_EQ(value_of(p, "canopy_http_received_bytes_total"), 12345);
  EXPECT_EQ(value_of(p, "canopy_http_sent_bytes_total"), 67890);
  EXPECT_EQ(value_of(p, "canopy_http_cancelled_requests_total"), 6);
  EXPECT_EQ(p.types.at("canopy_query_latency_seconds"), "histogram");
  EXPECT_EQ(p.types.at("canopy_queue_depth"), "gauge");
}

TEST(prometheus_text, label_values_are_escaped) {
  server_stats s;
  s.requests = {{{"a\"b\\c\nd", 500}, 1}};
  engine_stats e;
  e.errors_by_code = {{"x\\\"y", 3}};
  const std::string text = prometheus_text(e, s);
  EXPECT_NE(
      text.find(
          "canopy_http_requests_total{route=\"a\\\"b\\\\c\\nd\",status=\"500\"} 1\n"),
      std::string::npos)
      << text;
  const parsed_text p = check_text(text);
  EXPECT_TRUE(p.errors.empty()) << ::testing::PrintToString(p.errors);
  EXPECT_EQ(value_of(p, "canopy_http_requests_total",
                     {{"route", "a\"b\\c\nd"}, {"status", "500"}}),
            1);
  EXPECT_EQ(value_of(p, "canopy_query_errors_total", {{"code", "x\\\"y"}}), 3);
}

TEST(prometheus_text, the_line_checker_catches_broken_text) {
  // The checker itself must be able to fail.
  for (const char* bad :
       {"canopy_x 1", // no newline
        "# HELP canopy_x h\n# TYPE canopy_x counter\ncanopy_x 1\n",
        "# HELP canopy_x h\n# TYPE canopy_x gauge\ncanopy_x{a=\"\\q\"} 1\n",
        "# HELP canopy_x h\n# TYPE canopy_x gauge\ncanopy_x{a=b} 1\n",
        "# HELP canopy_x h\n# TYPE canopy_x gauge\ncanopy_y 1\n",
        "# HELP canopy_x h\n# TYPE canopy_x gauge\ncanopy_x one\n",
        "# TYPE canopy_x gauge\ncanopy_x 1\n"})
    EXPECT_FALSE(check_text(bad).errors.empty()) << bad;
  EXPECT_TRUE(
      check_text(
          "# HELP canopy_x h\n# TYPE canopy_x gauge\ncanopy_x{a=\"\\\"\"} -1.5e-3\n")
          .errors.empty());
}

} // namespace
} // namespace canopy::server
