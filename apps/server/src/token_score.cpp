#include <canopy/server/token_score.hpp>

#include <algorithm>
#include <numeric>

namespace canopy::server {

token_score score_token(const float* row, std::size_t vocab, std::int32_t id, std::size_t top) {
  token_score score{id, row[id], {}};
  top = std::min(top, vocab);
  if (top == 0)
    return score;
  std::vector<std::int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(top), ids.end(),
                    [row](std::int32_t a, std::int32_t b) {
                      return row[a] > row[b] || (row[a] == row[b] && a < b);
                    });
  for (std::size_t k = 0; k < top; ++k)
    score.top.emplace_back(ids[k], row[ids[k]]);
  return score;
}

} // namespace canopy::server
