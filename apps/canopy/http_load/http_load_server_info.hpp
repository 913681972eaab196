#pragma once
// What the load generator asks the server before measuring it: GET /v1/model, for the
// vocabulary (the size of a valid row, the range of random tokens) and the context
// (the longest sequence it accepts); for the completions payload, GET /v1/models for
// the id its requests name.
// Thread contract: fetch_served_model blocks its caller (it runs its own io_context).

#include "http_load/http_load_options.hpp"

#include <cstddef>
#include <string>

namespace canopy::app {

struct served_model {
  std::string name;
  std::size_t vocab_size = 0;
  std::size_t context_length = 0;
  std::string openai_id; // /v1/models' id; empty unless the completions payload runs
};

/// Throws std::runtime_error naming the target and what failed (no server listening,
/// 401 without the right token, an answer that is not the model's description).
served_model fetch_served_model(const http_load_options& options);

} // namespace canopy::app
