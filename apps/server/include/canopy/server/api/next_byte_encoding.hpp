#pragma once
// Next-byte answers on the wire (POST /v1/next_byte), in JSON: one item ->
//   {"tokens": [...], "prefix": "HEX", "logprobs": [256 numbers], "end_of_token": x,
//    "eos": x, "log_mass": x}
// and a batch -> {"results": [that, ...]}. Numbers are float64 in the shortest text that
// reads back as the same double; null stands for log 0 (no token), which JSON cannot
// hold as a number, and for "eos" after a non-empty prefix (it has none).
// Thread contract: pure functions.

#include <canopy/backends/tokenizers/next_byte.hpp>
#include <canopy/server/api/api_requests.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace canopy::server {

/// `answers[i]` answers `items[i]`; std::invalid_argument when the counts differ or a
/// lone answer (not `batch`) is not one.
std::string
encode_next_byte_json(const std::vector<next_byte_item>& items,
                      const std::vector<backends::next_byte_distribution>& answers,
                      bool batch);

/// The most bytes encode_next_byte_json can take for these items, known before any is
/// answered (the answer budget holds it meanwhile).
std::size_t next_byte_json_bound(const std::vector<next_byte_item>& items);

} // namespace canopy::server
