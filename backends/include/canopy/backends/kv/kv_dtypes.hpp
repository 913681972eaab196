#pragma once
// The names of the KV storage formats a torch worker knows, for whoever checks a
// configuration (the engine config, the formats themselves) without LibTorch's headers.
// Thread contract: pure functions.

#include <string>
#include <vector>

namespace canopy::backends {

/// The KV storage formats a torch worker knows (torch_options::kv_dtype), in order.
const std::vector<std::string>& kv_dtype_names();

} // namespace canopy::backends
