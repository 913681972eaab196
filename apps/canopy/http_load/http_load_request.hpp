#pragma once
// The load generator's requests as the bytes that go on the wire. A connection sending
// back to back renders each request over the same string, so that after the first few
// no request allocates.
// Thread contract: a request_writer is immutable once built; share it across threads.

#include "http_load/http_load_options.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::app {

/// Renders one payload's request (POST /v1/logprobs, POST /v1/next_byte, or POST
/// /v1/completions for the OpenAI model id `model`); Host and Authorization come from
/// the options.
class request_writer {
public:
  request_writer(const http_load_options& options, http_payload payload,
                 const std::string& model);

  /// The request for `tokens` (the row after them; next_byte: the first byte of the
  /// token after them; completions: every prompt token scored), written over `out`
  /// (its capacity kept).
  void write(std::string& out, const std::vector<std::int32_t>& tokens) const;

private:
  std::string head_;       // the request line and every header but Content-Length
  std::string body_start_; // the body up to the token ids
  std::string body_end_;   // and after them
};

/// A GET of `path` with the options' Host and Authorization, e.g. for /v1/model.
std::string get_request(const http_load_options& options, std::string_view path);

} // namespace canopy::app
