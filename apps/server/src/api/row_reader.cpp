#include "api/row_reader.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace canopy::server {

row_reader::view row_reader::read(const cache::logprob_row& row) {
  const std::size_t vocab = row.vocab();
  const float* values = row.float32_data(); // stored float32: no copy
  if (values == nullptr) {
    decoded_.resize(vocab);
    row.decode(decoded_.data());
    values = decoded_.data();
  }
  if (!top_k_)
    return {values, nullptr, vocab};
  const std::size_t k = std::min(*top_k_, vocab);
  order_.resize(vocab);
  std::iota(order_.begin(), order_.end(), 0);
  // NaN ranks with -inf so the order stays strict-weak; ties go to the lower id.
  const auto rank = [values](std::int32_t id) {
    const float v = values[id];
    return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v;
  };
  std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k),
                    order_.end(), [&](std::int32_t a, std::int32_t b) {
                      const float ra = rank(a), rb = rank(b);
                      return ra > rb || (ra == rb && a < b);
                    });
  picked_.resize(k);
  for (std::size_t i = 0; i < k; ++i)
    picked_[i] = values[order_[i]];
  return {picked_.data(), order_.data(), k};
}

} // namespace canopy::server
