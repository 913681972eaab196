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

/// Renders POST /v1/logprobs for one payload; Host and Authorization come from the
/// options.
class request_writer {
public:
  request_writer(const http_load_options& options, http_payload payload);

  /// The request for the row after `tokens`, written over `out` (its capacity kept).
  void logprobs(std::string& out, const std::vector<std::int32_t>& tokens) const;

private:
  std::string head_; // the request line and every header but Content-Length
};

/// A GET of `path` with the options' Host and Authorization, e.g. for /v1/model.
std::string get_request(const http_load_options& options, std::string_view path);

} // namespace canopy::app
