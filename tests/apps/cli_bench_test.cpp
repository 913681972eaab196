// `canopy bench` through the engine, as a script runs it: the futures variant (the
// engine asked through std::future, as hosts do) answers every query right, computes
// what the callbacks' variant computes, and its targets are reported beside theirs;
// the decode workload asks one query at a time, each computing one token; --profile
// splits a lone query's time into the engine's parts and the pass's.

#include "cli_runner.hpp"
#include "shared_fixtures.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <utility>

namespace {

using canopy::testing::describe;
using canopy::testing::run_canopy;

TEST(cli_bench,
     the_futures_variant_answers_as_the_callbacks_do_and_is_measured_beside_them) {
  const auto r =
      run_canopy({"bench", "--backend", "mock", "--workload", "smc,hits,misses",
                  "--variants", "full,futures", "--particles", "8", "--steps", "16",
                  "--queries", "3000", "--in-flight", "64", "--json"});
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

TEST(cli_bench, decode_asks_one_query_at_a_time_each_computing_one_new_token) {
  const auto r =
      run_canopy({"bench", "--backend", "mock", "--workload", "decode", "--variants",
                  "full", "--steps", "40", "--prompt-length", "5", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const auto row = nlohmann::json::parse(r.out).at("results").at(0);
  EXPECT_EQ(row.at("workload"), "decode");
  EXPECT_EQ(row.at("queries"), 40);
  // The prompt once, then one token per step: 5 + 39 computed, one query per pass.
  EXPECT_EQ(row.at("tokens_computed"), 44);
  EXPECT_EQ(row.at("mean_batch_size"), 1.0);
  EXPECT_EQ(row.at("mismatches"), 0);
}

TEST(cli_bench,
     profile_splits_a_lone_querys_time_into_the_engines_parts_and_the_passs_parts) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  // The parts named below are the direct CPU forward's, wherever the machine has a GPU.
  const auto r = run_canopy({"bench", "--profile", "--model", model.string(), "--steps",
                             "24", "--devices", R"(["cpu"])"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  for (const char* part :
       {"latency from ask to answer, p50", "pass round trip, batcher to worker and back",
        "of which the backend's pass, mean", "on the zero-cost mock",
        "23 one-token passes", "all layers: attention", "all layers: norm, MLP",
        "final norm, LM head", "log-softmax", "row copy", "layer 0 (all its parts)",
        "layer 4 (all its parts)"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
  EXPECT_EQ(r.out.find("layer 5 "), std::string::npos) << "stories260K has 5 layers";
}

TEST(cli_bench, profile_on_the_mock_says_its_passes_have_no_parts) {
  const auto r = run_canopy({"bench", "--profile", "--backend", "mock", "--steps", "10"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("(9 one-token passes after the prompt's)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("names no parts"), std::string::npos) << r.out;
}

TEST(cli_bench, next_byte_sets_cached_calls_against_the_row_and_makes_masses_once) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  const auto r = run_canopy({"bench", "--next-byte", "--model", model.string(),
                             "--sequences", "4", "--sequence-length", "4", "--queries",
                             "300", "--devices", R"(["cpu"])"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  for (const char* part :
       {"vocabulary 512, 4 sequences of 4 tokens, 300 cached calls", "cold (a pass",
        "cached (hit, masses beside the row)", "row + masses on the caller",
        "wire per call: next-byte JSON", "binary float32 row 2100 bytes",
        "masses made 4 for 4 sequences; 4 kept"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
}

TEST(cli_bench, next_byte_without_a_tokenizer_is_a_clear_error) {
  const auto r = run_canopy({"bench", "--next-byte", "--backend", "mock"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--next-byte needs a model with a tokenizer"), std::string::npos)
      << describe(r);
}

TEST(cli_bench, tier_probe_sets_moving_a_prompts_kv_against_recomputing_it) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  const auto r = run_canopy(
      {"bench", "--tier-probe", "--model", model.string(), "--prompt-length", "32"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  // stories260K: 5 layers x 4 KV heads x 64 x 2 (K and V) x 4 bytes.
  for (const char* part :
       {"KV float32 (host tier float32), 32-token prompts",
        "KV bytes (device format)          1280", "recompute", "demote",
        "promote (in the next pass)", "faster than recomputing",
        "it pays while the tier moves more than"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
}

TEST(cli_bench, tier_probe_refuses_a_backend_without_a_host_tier) {
  // The mock keeps no KV rows to move.
  const auto r = run_canopy({"bench", "--tier-probe", "--backend", "mock"});
  EXPECT_NE(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.err.find("the host tier does not hold a 16-token prompt"),
            std::string::npos)
      << describe(r);
}

} // namespace
