#pragma once
// Reading a stored log-prob row as float32 values: every value (dense), or the k largest
// with their ids (NaN ranks with -inf, ties go to the lower id). The answer encodings
// and the completions' token scores read rows this way, so top-k means one thing.
// Thread contract: a reader belongs to one thread at a time.

#include <canopy/cache/logprob_row.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace canopy::server {

/// Reuses its buffers from row to row, so a response allocates them once.
class row_reader {
public:
  struct view {
    const float* values;
    const std::int32_t* ids; // [cols]; nullptr when dense
    std::size_t cols;
  };

  explicit row_reader(std::optional<std::size_t> top_k) : top_k_(top_k) {}

  /// Valid until the next read.
  view read(const cache::logprob_row& row);

private:
  std::optional<std::size_t> top_k_;
  std::vector<float> decoded_; // a row stored as float16/bfloat16, as float32
  std::vector<std::int32_t> order_;
  std::vector<float> picked_;
};

} // namespace canopy::server
