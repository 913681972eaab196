#pragma once
// What lies between Canopy's http_response and Beast's wire: a request's problems
// (a parse error, a Transfer-Encoding Canopy does not read) as error answers, a
// response's head and whole message, and the chunk framing of a streamed body.
// Thread contract: pure functions.

#include <canopy/server/server_options.hpp>
#include <canopy/server/transport/http_message.hpp>

#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace canopy::server {

inline std::string_view to_std(boost::beast::string_view s) {
  return {s.data(), s.size()};
}

/// The header limit for Beast's parser (which counts in 32 bits).
std::uint32_t header_limit(const server_options& options);

/// An error answer (api_error's body) the transport gives of itself.
http_response error_response(int status, std::string code, std::string message);

/// A request Beast could not read, as its error answer: 431 past the header limit,
/// 413 past the body limit, 400 otherwise.
http_response parse_error(const boost::beast::error_code& ec,
                          const server_options& options);

/// A Transfer-Encoding other than "chunked" alone, as an error answer; nullopt when it
/// is absent or "chunked".
std::optional<http_response> transfer_coding_problem(boost::beast::string_view value);

/// The status line and headers of `response` (its body and framing aside).
boost::beast::http::response<boost::beast::http::string_body>
wire_head(const http_response& response, unsigned version, bool keep_alive);

/// The whole message of a response that is not streamed.
boost::beast::http::response<boost::beast::http::string_body>
to_wire(http_response response, unsigned version, bool keep_alive);

/// Appends a streamed body's `bytes` as they go on the wire: one chunk (HTTP/1.1), or
/// as they are. Nothing for none: an empty chunk would end the body.
void frame(std::string& out, const std::string& bytes, bool chunked);

} // namespace canopy::server
