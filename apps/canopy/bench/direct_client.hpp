#pragma once
// The overhead baseline: the backend called directly on the calling thread, one pass
// per query computing its whole sequence with keep_kv=false. No actors, no cache, no
// batching; it measures its own latencies, as there is no engine to ask.
// Thread contract: one thread at a time (the backend's contract).

#include "bench/bench_workloads.hpp"

#include <canopy/backends/backend.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace canopy::app {

class direct_client final : public query_client {
public:
  explicit direct_client(std::unique_ptr<backends::backend_i> backend);
  void ask(token_seq tokens, const std::string& adapter, logprobs_callback done) override;

  std::int64_t vocab_size() const;
  /// Forgets what was measured so far (the hits warm-up).
  void reset_measurements();
  std::uint64_t tokens_computed() const { return tokens_computed_; }
  std::uint64_t matmul_flops() const { return matmul_flops_; }
  double compute_seconds() const { return double(compute_ns_) * 1e-9; }
  /// Percentile p in [0, 1] of the query latencies, in microseconds.
  double latency_us(double p) const;

private:
  std::unique_ptr<backends::backend_i> backend_;
  std::uint64_t tokens_computed_ = 0;
  std::uint64_t matmul_flops_ = 0;
  std::uint64_t compute_ns_ = 0;
  std::vector<std::int64_t> latencies_ns_;
};

} // namespace canopy::app
