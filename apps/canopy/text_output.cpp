#include "text_output.hpp"

namespace canopy::app {

std::string comma_ids(const token_seq& ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i)
    out += (i ? "," : "") + std::to_string(ids[i]);
  return out;
}

std::string json_line(const nlohmann::json& doc) {
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + '\n';
}

} // namespace canopy::app
