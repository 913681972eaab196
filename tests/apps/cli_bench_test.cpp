// `canopy bench` through the engine, as a script runs it: the futures variant (the
// engine asked through std::future, as hosts do) answers every query right, computes
// what the callbacks' variant computes, and its targets are reported beside theirs.

#include "cli_runner.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <utility>

namespace {

using canopy::testing::describe;
using canopy::testing::run_canopy;

TEST(CliBench, TheFuturesVariantAnswersAsTheCallbacksDoAndIsMeasuredBesideThem) {
  const auto r = run_canopy({"bench", "--backend", "mock", "--workload", "smc,hits,misses",
                             "--variants", "full,futures", "--particles", "8", "--steps",
                             "16", "--queries", "3000", "--in-flight", "64", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const auto report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report.at("workload_options").at("in_flight"), 64);
  std::map<std::pair<std::string, std::string>, nlohmann::json> rows;
  for (const auto& row : report.at("results"))
    rows[{row.at("workload"), row.at("variant")}] = row;
  for (const char* workload : {"smc", "hits", "misses"}) {
    const auto& callbacks = rows.at({workload, "full"});
    const auto& futures = rows.at({workload, "futures"});
    EXPECT_EQ(futures.at("queries"), callbacks.at("queries")) << workload;
    EXPECT_EQ(futures.at("tokens_computed"), callbacks.at("tokens_computed")) << workload;
    EXPECT_GT(futures.at("rows_checked").get<int>(), 0) << workload;
    EXPECT_EQ(futures.at("mismatches"), 0) << workload;
  }
  std::map<std::string, bool> ran;
  for (const auto& target : report.at("targets").at("checks"))
    ran[target.at("name")] = target.at("ran");
  EXPECT_TRUE(ran.at("cache-hit queries/s (hits, futures)"));
  EXPECT_TRUE(ran.at("futures/callbacks time (hits)"));
  EXPECT_TRUE(ran.at("futures/callbacks time (misses)"));
}

} // namespace
