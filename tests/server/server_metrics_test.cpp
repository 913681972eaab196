// The transport's counters: route labels (the API's paths, the page's, the rest) and
// what a snapshot reports.

#include <canopy/server/api_paths.hpp>
#include <canopy/server/server_metrics.hpp>

#include <gtest/gtest.h>

namespace canopy::server {
namespace {

TEST(server_metrics, route_label_keeps_known_paths_without_query_and_folds_the_rest) {
  for (const auto route : api_paths) {
    EXPECT_EQ(server_metrics::route_label(route), route);
    EXPECT_EQ(server_metrics::route_label(std::string(route) + "?a=1&b"), route);
    EXPECT_EQ(server_metrics::route_label(std::string(route) + "/"), "other");
  }
  for (const char* other : {"", "/v1", "/v1/logprobs/", "/V1/model", "/v1/modelx",
                            "/wp-admin.php", "?/v1/model", "*", "/web", "/webx/a.js"})
    EXPECT_EQ(server_metrics::route_label(other), "other") << other;
  // The page's files share one label, however many there are.
  for (const char* page : {"/", "/?token", "/web/page.js", "/web/missing.js?x"})
    EXPECT_EQ(server_metrics::route_label(page), "/web") << page;
}

TEST(server_metrics, snapshot_reports_every_counter) {
  server_metrics metrics;
  metrics.connection_accepted();
  metrics.connection_accepted();
  metrics.connection_closed();
  metrics.connection_refused();
  metrics.request_cancelled();
  metrics.request_done("/v1/model?x", 200, std::chrono::milliseconds(3), 10, 100);
  metrics.request_done("/v1/model", 200, std::chrono::milliseconds(20), 1, 2);
  metrics.request_done("/scan", 404, std::chrono::seconds(30), 0, 5);

  auto stats = metrics.snapshot();
  EXPECT_EQ(stats.connections_open, 1u);
  EXPECT_EQ(stats.connections_accepted, 2u);
  EXPECT_EQ(stats.connections_refused, 1u);
  EXPECT_EQ(stats.cancelled_requests, 1u);
  EXPECT_EQ(stats.bytes_received, 11u);
  EXPECT_EQ(stats.bytes_sent, 107u);
  using key = std::pair<std::string, int>;
  std::vector<std::pair<key, std::uint64_t>> expected = {{{"/v1/model", 200}, 2},
                                                         {{"other", 404}, 1}};
  EXPECT_EQ(stats.requests, expected);
  EXPECT_EQ(stats.request_seconds.count, 3u);
  EXPECT_NEAR(stats.request_seconds.sum, 30.023, 1e-6);
  EXPECT_EQ(stats.request_seconds.upper_bounds, bucket_histogram::latency_bounds());
  EXPECT_EQ(stats.request_seconds.counts.back(), 1u); // 30 s: past the last bound
}

} // namespace
} // namespace canopy::server
