#pragma once
// One HTTP response read off a keep-alive connection without allocating (once the
// body string has grown): a Beast parser that keeps only what the load generator checks
// (status, Content-Type, Server-Timing's engine duration) and the body, which it
// writes into a string the connection reuses.
// Thread contract: used on its connection's I/O thread. A Beast parser reads one
// message: build a new reader (cheap, no allocation) for every response.

#include "http_load/http_load_check.hpp"

#include <boost/beast/http/basic_parser.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace canopy::app {

class response_reader : public boost::beast::http::basic_parser<false> {
public:
  /// Clears `body` (its capacity kept); the body is written there.
  explicit response_reader(std::string& body);

  /// What was read, once the parser is done; `body` is the string given.
  answer read() const { return {status_, content_type_, body_}; }
  /// Server-Timing's engine;dur=, in milliseconds; empty when absent or malformed.
  std::optional<double> engine_ms() const { return engine_ms_; }

private:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;
  using field = boost::beast::http::field;

  void on_request_impl(boost::beast::http::verb, string_view, string_view, int,
                       error_code&) override {}
  void on_response_impl(int code, string_view, int, error_code&) override;
  void on_field_impl(field name, string_view name_string, string_view value,
                     error_code&) override;
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>& length,
                         error_code&) override;
  std::size_t on_body_impl(string_view piece, error_code&) override;
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view piece,
                                 error_code& ec) override;
  void on_finish_impl(error_code&) override {}

  std::string& body_;
  int status_ = 0;
  media_type content_type_ = media_type::other;
  std::optional<double> engine_ms_;
};

/// The dur= of the metric named "engine" in a Server-Timing value such as
/// "engine;dur=0.123" or "queue;dur=1, engine;desc=\"x\";dur=2" (RFC: metrics are
/// comma-separated, parameters semicolon-separated); empty when there is none.
std::optional<double> engine_duration_ms(std::string_view server_timing);

} // namespace canopy::app
