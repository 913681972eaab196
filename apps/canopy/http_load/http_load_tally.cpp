#include "http_load/http_load_tally.hpp"

namespace canopy::app {

void error_tally::add(std::string message) {
  ++total;
  for (auto& [kind, count] : kinds)
    if (kind == message) {
      ++count;
      return;
    }
  if (kinds.size() < max_kinds)
    kinds.emplace_back(std::move(message), 1);
  else
    ++unlisted;
}

} // namespace canopy::app
