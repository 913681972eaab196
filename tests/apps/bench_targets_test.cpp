// `canopy bench`'s targets read against the device's ceilings measured in the same run:
// on a GPU (a copy rate measured) the scoring passes are held to 40% of its
// matrix-product peak and one sequence's decode to 60% of the bandwidth bound of the
// weights a step reads; on the CPU the scoring goal stays half the ceiling and decode has
// no bound.

#include "bench/bench_report.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace canopy::app;

target_check named(const std::vector<target_check>& targets, const std::string& prefix) {
  for (const auto& t : targets)
    if (t.label.rfind(prefix, 0) == 0)
      return t;
  throw std::runtime_error("no target named " + prefix);
}

device_ceilings measured(std::string device, std::string dtype, std::int64_t size,
                         double gflops, double copy_gbytes_per_s) {
  device_ceilings c;
  c.device = std::move(device);
  c.matmul_dtype = std::move(dtype);
  c.matmul_size = size;
  c.matmul_gflops = gflops;
  c.copy_gbytes_per_s = copy_gbytes_per_s;
  return c;
}

device_ceilings an_h200() {
  return measured("cuda:0", "bfloat16", 8192, 776000, 2000);
}
device_ceilings a_cpu() {
  return measured("cpu", "float32", 1024, 200, 0);
}

/// One sequence decoding: `queries` tokens in `seconds`, steps reading `weights` bytes.
bench_result decoding(std::uint64_t queries, double seconds, std::uint64_t weights) {
  bench_result r;
  r.workload = workload_kind::decode;
  r.queries = queries;
  r.seconds = seconds;
  r.step_weight_bytes = weights;
  return r;
}

/// Scoring passes that did `gflop` GFLOP of products in `seconds` of the backend's time.
bench_result scoring(double gflop, double seconds) {
  bench_result r;
  r.workload = workload_kind::scoring;
  r.queries = 16384;
  r.seconds = 2 * seconds;
  r.matmul_flops = static_cast<std::uint64_t>(gflop * 1e9);
  r.compute_seconds = seconds;
  r.mean_batch_size = 256;
  return r;
}

TEST(bench_targets, decode_on_a_gpu_is_the_bound_over_the_time_a_token_took) {
  // 1.6 GB at 2,000 GB/s: a bound of 0.8 ms. 1,000 tokens in 1 s: 1 ms each, 80%.
  auto targets = evaluate_targets({decoding(1000, 1.0, 1'600'000'000)}, {}, an_h200());
  const auto fast = named(targets, "decode at the weights' bandwidth bound");
  ASSERT_TRUE(fast.ran);
  EXPECT_NEAR(fast.measured, 80.0, 1e-9);
  EXPECT_EQ(fast.goal, 60.0);
  EXPECT_TRUE(fast.pass);
  EXPECT_EQ(fast.detail, "(1.000 ms a token; bound 0.800 ms: 1.60 GB at 2000 GB/s)");
  // The same tokens in 2 s: 40%, below.
  targets = evaluate_targets({decoding(1000, 2.0, 1'600'000'000)}, {}, an_h200());
  const auto slow = named(targets, "decode at the weights' bandwidth bound");
  EXPECT_NEAR(slow.measured, 40.0, 1e-9);
  EXPECT_FALSE(slow.pass);
}

TEST(bench_targets, decode_has_no_bound_without_a_copy_rate_or_the_weights_bytes) {
  const auto on_cpu = evaluate_targets({decoding(1000, 1.0, 1'600'000'000)}, {}, a_cpu());
  const auto t = named(on_cpu, "decode at the weights' bandwidth bound");
  EXPECT_FALSE(t.ran);
  EXPECT_EQ(t.needs, "--workload decode and --variants full on a GPU");
  const auto unknown = evaluate_targets({decoding(1000, 1.0, 0)}, {}, an_h200());
  EXPECT_FALSE(named(unknown, "decode at the weights' bandwidth bound").ran);
}

TEST(bench_targets, scoring_is_held_to_forty_percent_of_a_gpus_peak_and_half_a_cpus) {
  // 300 TFLOP in 1 s of passes against 776 TFLOP/s: 38.7%, below issue 32's 40%.
  const auto gpu = evaluate_targets({scoring(300000, 1.0)}, {}, an_h200());
  const auto on_gpu = named(gpu, "scoring passes' share of the GPU's matmul peak");
  ASSERT_TRUE(on_gpu.ran);
  EXPECT_NEAR(on_gpu.measured, 100.0 * 300000 / 776000, 1e-9);
  EXPECT_EQ(on_gpu.goal, 40.0);
  EXPECT_FALSE(on_gpu.pass);
  EXPECT_NE(on_gpu.detail.find("of 776000.0 GFLOP/s, bfloat16, at batch 256"),
            std::string::npos)
      << on_gpu.detail;
  // 110 GFLOP in 1 s against a CPU's 200: 55%, above its 50%.
  const auto cpu = evaluate_targets({scoring(110, 1.0)}, {}, a_cpu());
  const auto on_cpu = named(cpu, "scoring passes' share of the matmul ceiling");
  EXPECT_NEAR(on_cpu.measured, 55.0, 1e-9);
  EXPECT_EQ(on_cpu.goal, 50.0);
  EXPECT_TRUE(on_cpu.pass);
}

} // namespace
