#pragma once
// The exact quantile of measured values, for the benchmarks' reports.
// Thread contract: a pure function (it reorders its argument).

#include <algorithm>
#include <cstddef>
#include <vector>

namespace canopy::app {

/// The exact q-quantile (nearest rank, rounding down) of `values`, reordered in the
/// process; 0 when empty.
inline double quantile(std::vector<double>& values, double q) {
  if (values.empty())
    return 0;
  const auto at =
      std::min(values.size() - 1, static_cast<std::size_t>(q * values.size()));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(at),
                   values.end());
  return values[at];
}

} // namespace canopy::app
