#include <canopy/server/api/token_score.hpp>

#include "api/row_reader.hpp"

namespace canopy::server {

token_score score_token(const cache::logprob_row& row, std::int32_t id, std::size_t top) {
  token_score score{id, row.at(static_cast<std::size_t>(id)), {}};
  if (top == 0)
    return score;
  row_reader reader(top);
  const auto best = reader.read(row);
  for (std::size_t k = 0; k < best.cols; ++k)
    score.top.emplace_back(best.ids[k], best.values[k]);
  return score;
}

} // namespace canopy::server
