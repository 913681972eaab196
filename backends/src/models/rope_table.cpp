// RoPE tables grown on demand (see rope_table.hpp).
#include "models/rope_table.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace canopy::backends {

rope_table::rope_table(at::Tensor inverse_frequencies, std::int64_t context,
                       at::ScalarType dtype, at::Device device)
    : inverse_frequencies_(inverse_frequencies.to(at::kDouble).unsqueeze(0)),
      context_(context), dtype_(dtype), device_(device) {}

void rope_table::cover(std::int64_t end) {
  if (end <= covered_)
    return;
  if (end > context_)
    throw std::invalid_argument("position " + std::to_string(end - 1) +
                                " is past the served context of " +
                                std::to_string(context_));
  auto target = std::max({end, 2 * covered_, block_positions});
  target = std::min(context_,
                    (target + block_positions - 1) / block_positions * block_positions);
  std::vector<at::Tensor> cos, sin;
  if (cos_.defined()) {
    cos.push_back(cos_);
    sin.push_back(sin_);
  }
  // Block by block, each computed alone: a position's values are the same whatever
  // the table's size (Float32 angle tables alone cost ~6e-5 at position 400, oracle
  // README: float64).
  for (auto first = covered_; first < target; first += block_positions) {
    const auto count = std::min(block_positions, target - first);
    const auto positions = at::arange(first, first + count, at::kDouble).unsqueeze(1);
    auto angles = positions * inverse_frequencies_; // [count, hd/2]
    angles = at::cat({angles, angles}, 1);          // [count, hd]
    cos.push_back(angles.cos().to(device_, dtype_));
    sin.push_back(angles.sin().to(device_, dtype_));
  }
  cos_ = at::cat(cos, 0);
  sin_ = at::cat(sin, 0);
  covered_ = target;
}

} // namespace canopy::backends
