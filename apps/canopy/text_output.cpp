#include "text_output.hpp"

namespace canopy::app {

std::string comma_ids(const token_seq& ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i)
    out += (i ? "," : "") + std::to_string(ids[i]);
  return out;
}

std::string hex_bytes(std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += digits[b >> 4];
    out += digits[b & 0xF];
  }
  return out;
}

std::string json_line(const nlohmann::json& doc) {
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + '\n';
}

} // namespace canopy::app
