#pragma once
// Whether an answer to POST /v1/logprobs is what was asked: status 200, the media type
// asked for, and a well-formed body holding exactly one full-vocabulary row after
// exactly the tokens sent (docs/http-api.md: "HTTP API", "Binary log-prob format"); one
// to POST /v1/next_byte, 256 values after them. An answer to POST /v1/completions must
// score every prompt token sent. Checking the echoed
// tokens catches an answer delivered to the wrong request on a keep-alive connection.
// Every answer is checked, so the row checks allocate nothing when they pass. Thread
// contract: pure functions.

#include "http_load/http_load_options.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::app {

/// A response's Content-Type, as far as the checks care.
enum class media_type { other, json, binary };

/// A response as read off the wire.
struct answer {
  int status = 0;
  media_type type = media_type::other;
  std::string_view body;
};

/// "" when `a` answers `tokens` with one row of `vocab` values in `payload`; else what
/// is wrong, e.g. "HTTP 503: {...}" or "binary: rows 2, expected 1".
std::string check_answer(const answer& a, http_payload payload,
                         const std::vector<std::int32_t>& tokens, std::size_t vocab);

} // namespace canopy::app
