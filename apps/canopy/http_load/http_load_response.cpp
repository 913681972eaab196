#include "http_load/http_load_response.hpp"

#include <boost/beast/core/string.hpp>

#include <cctype>
#include <charconv>

namespace canopy::app {

namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

/// Up to (not including) `separator`, consumed from `s` with the separator.
std::string_view next_piece(std::string_view& s, char separator) {
  const auto at = s.find(separator);
  const auto piece = s.substr(0, at);
  s.remove_prefix(at == std::string_view::npos ? s.size() : at + 1);
  return piece;
}

/// Whether the media type (before any parameters) is `type`, case-insensitively.
bool is_media_type(std::string_view value, std::string_view type) {
  value = trimmed(next_piece(value, ';'));
  if (value.size() != type.size())
    return false;
  for (std::size_t i = 0; i < type.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(value[i])) != type[i])
      return false;
  return true;
}

} // namespace

response_reader::response_reader(std::string& body) : body_(body) {
  body_.clear();
}

void response_reader::on_response_impl(int code, string_view, int, error_code&) {
  status_ = code;
}

void response_reader::on_field_impl(field name, string_view name_string,
                                    string_view value, error_code&) {
  const std::string_view v(value.data(), value.size());
  if (name == field::content_type)
    content_type_ = is_media_type(v, "application/json")           ? media_type::json
                    : is_media_type(v, "application/octet-stream") ? media_type::binary
                                                                   : media_type::other;
  // Beast 1.74 has no enum value for Server-Timing: compare the name.
  else if (!engine_ms_ && boost::beast::iequals(name_string, "Server-Timing"))
    engine_ms_ = engine_duration_ms(v);
}

void response_reader::on_body_init_impl(const boost::optional<std::uint64_t>& length,
                                        error_code&) {
  if (length)
    body_.reserve(static_cast<std::size_t>(*length));
}

std::size_t response_reader::on_body_impl(string_view piece, error_code&) {
  body_.append(piece.data(), piece.size());
  return piece.size();
}

std::size_t response_reader::on_chunk_body_impl(std::uint64_t, string_view piece,
                                                error_code& ec) {
  return on_body_impl(piece, ec);
}

std::optional<double> engine_duration_ms(std::string_view server_timing) {
  while (!server_timing.empty()) {
    std::string_view metric = next_piece(server_timing, ',');
    if (trimmed(next_piece(metric, ';')) != "engine")
      continue;
    while (!metric.empty()) {
      const std::string_view param = trimmed(next_piece(metric, ';'));
      if (param.substr(0, 4) != "dur=")
        continue;
      const std::string_view text = param.substr(4);
      double ms = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
      if (ec != std::errc{} || end != text.data() + text.size() || !(ms >= 0))
        return std::nullopt;
      return ms;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

} // namespace canopy::app
