#include "transport/http_wire.hpp"

#include <canopy/server/api_error.hpp>

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/rfc7230.hpp>

#include <algorithm>
#include <cstdio>

namespace canopy::server {

namespace beast = boost::beast;
namespace http = beast::http;

http_response error_response(int status, std::string code, std::string message) {
  return to_response(api_error{status, std::move(code), std::move(message)});
}

std::uint32_t header_limit(const server_options& options) {
  return static_cast<std::uint32_t>(
      std::min<std::size_t>(options.max_header_bytes, UINT32_MAX));
}

http_response parse_error(const beast::error_code& ec, const server_options& options) {
  if (ec == http::error::header_limit)
    return error_response(431, "header_too_large",
                          "the header section is larger than " +
                              std::to_string(options.max_header_bytes) + " bytes");
  if (ec == http::error::body_limit)
    return error_response(413, "payload_too_large",
                          "the body is larger than " +
                              std::to_string(options.max_body_bytes) + " bytes");
  return error_response(400, "malformed_http", "malformed HTTP request: " + ec.message());
}

// Beast would read such a body by its own rules (or not at
// all), and what it left would be parsed as the next request: a smuggled one. So the
// connection ends with the answer (RFC 9112 6.1: chunked must come last, 400;
// codings the server does not implement, 501).
std::optional<http_response> transfer_coding_problem(beast::string_view value) {
  if (value.empty())
    return std::nullopt;
  // Beast's own reading of the list (OWS around commas, empty elements); one that does
  // not parse counts as no coding Canopy knows.
  const http::opt_token_list codings{value};
  std::size_t count = 0;
  bool any_chunked = false;
  bool last_chunked = false;
  if (http::validate_list(codings))
    for (const auto coding : codings) {
      ++count;
      last_chunked = beast::iequals(coding, "chunked");
      any_chunked = any_chunked || last_chunked;
    }
  if (count == 1 && last_chunked)
    return std::nullopt;
  const auto quoted = "Transfer-Encoding \"" + std::string(to_std(value)) + "\"";
  if (any_chunked && !last_chunked)
    return error_response(400, "unsupported_transfer_encoding",
                          quoted + ": \"chunked\" must come last");
  return error_response(501, "unsupported_transfer_encoding",
                        quoted + ": only \"chunked\" is supported");
}

http::response<http::string_body> wire_head(const http_response& response,
                                            unsigned version, bool keep_alive) {
  http::response<http::string_body> wire;
  wire.version(version);
  wire.result(static_cast<unsigned>(response.status));
  wire.set(http::field::server, "canopy");
  wire.set(http::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers)
    wire.insert(name, value);
  wire.keep_alive(keep_alive);
  return wire;
}

http::response<http::string_body> to_wire(http_response response, unsigned version,
                                          bool keep_alive) {
  auto wire = wire_head(response, version, keep_alive);
  wire.body() = std::move(response.body);
  wire.prepare_payload();
  return wire;
}

void frame(std::string& out, const std::string& bytes, bool chunked) {
  if (bytes.empty())
    return;
  if (chunked) {
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
    out += size;
  }
  out += bytes;
  if (chunked)
    out += "\r\n";
}

} // namespace canopy::server
