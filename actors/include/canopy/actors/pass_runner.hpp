#pragma once
// What every worker actor does with its backend besides passes (pass_pipeline.hpp),
// in-process or on a worker node: freeing and demoting KV, best effort, and loading
// LoRA adapters, a refusal becoming errc::invalid_request naming the adapter and why.
//
// Thread contract: call from the thread that owns the backend.

#include <canopy/backends/backend.hpp>

#include <caf/expected.hpp>

#include <string>
#include <vector>

namespace canopy::actors {

/// Frees KV entries the cache dropped; best effort (a backend that cannot free keeps
/// serving).
void release_kv(backends::backend_i& backend,
                const std::vector<cache::kv_handle>& handles);

/// Moves KV entries the cache demoted to the backend's host tier; best effort too (a
/// pass that meets one still on the device reads it there).
void demote_kv(backends::backend_i& backend,
               const std::vector<cache::kv_handle>& handles);

/// Loads the adapter of `key` (messages/adapter_key.hpp) into the backend as
/// `loaded_as`; a refusal becomes errc::invalid_request naming the adapter and why.
caf::expected<bool> load_adapter(backends::backend_i& backend,
                                 const std::string& loaded_as, const std::string& key,
                                 const backends::lora_adapter_files& files);

} // namespace canopy::actors
