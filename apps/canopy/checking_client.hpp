#pragma once
// Passes queries on to another client and keeps every n-th answer, to check it bit for
// bit against the mock backend's reference row (rounded as the answers are), so that a
// fast but wrong engine cannot pass for a fast one.
// Thread contract: ask() from one thread; answers may arrive on any; check() after
// every query was answered.

#include "bench_workloads.hpp"

#include <canopy/backends/mock_backend.hpp>

#include <cstdint>
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

class checking_client final : public query_client {
public:
  /// `dtype`: how the answers are rounded, "float32" (exact), "float16" or "bfloat16".
  checking_client(query_client& inner, const backends::mock_options& reference,
                  std::string dtype, std::size_t every);
  void ask(token_seq tokens, logprobs_callback done) override;
  row_check check() const;

private:
  query_client& inner_;
  backends::mock_options reference_;
  std::string dtype_;
  std::size_t every_;
  std::uint64_t asked_ = 0;
  std::mutex mutex_; // guards kept_
  std::vector<std::pair<token_seq, at::Tensor>> kept_;
};

} // namespace canopy::app
