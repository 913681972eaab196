#pragma once
// Passes queries on to another client and keeps every n-th answer, to check it after
// the run against a reference row computed without the engine (rounded as the answers
// are), so that a fast but wrong engine cannot pass for a fast one.
// The mock's reference is exact, so its rows must match bit for bit; a model's is its
// own backend run on the whole sequence alone, which rounds differently from a
// batched pass with cached KV, so it is compared within a tolerance.
// Thread contract: ask() from one thread; answers may arrive on any; check() after
// every query was answered.

#include "bench/bench_workloads.hpp"

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace canopy::app {

struct row_check {
  std::uint64_t checked = 0;
  std::uint64_t mismatched = 0;
  std::string first_mismatch; // what differs, for the first mismatching row
};

/// The float32 row after a sequence under an adapter ("": the base), computed without
/// the engine.
using reference_row_fn =
    std::function<std::vector<float>(const token_seq&, const std::string& adapter)>;

struct check_rule {
  reference_row_fn reference;
  std::string dtype = "float32"; // how answers are rounded: float32, float16, bfloat16
  double tolerance_abs = 0;      // 0 (and tolerance_rel 0): bit for bit
  double tolerance_rel = 0;      // times |reference|, added to tolerance_abs
};

class checking_client final : public query_client {
public:
  checking_client(query_client& inner, check_rule rule, std::size_t every);
  void ask(token_seq tokens, const std::string& adapter, logprobs_callback done) override;
  void wait_until_at_most(in_flight& flight, std::size_t count) override {
    inner_.wait_until_at_most(flight, count);
  }
  void wait_all(in_flight& flight) override { inner_.wait_all(flight); }
  row_check check() const;

private:
  query_client& inner_;
  check_rule rule_;
  std::size_t every_;
  std::uint64_t asked_ = 0;
  struct kept_answer {
    token_seq tokens;
    std::string adapter;
    at::Tensor row;
  };
  std::mutex mutex_; // guards kept_
  std::vector<kept_answer> kept_;
};

} // namespace canopy::app
