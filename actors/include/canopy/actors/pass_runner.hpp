#pragma once
// Running one pass on a backend as every worker actor does, in-process or on a worker
// node, and loading its LoRA adapters: the result carries the backend's rows as they are,
// tagged with the dtype the pass asked for (encoded when they leave the process, or by
// the cache), and every exception becomes errc::backend_failure with the backend's
// message, so the worker keeps serving.
//
// Thread contract: call from the thread that owns the backend.

#include <canopy/backends/backend.hpp>
#include <canopy/cache/logprob_row.hpp>
#include <canopy/messages/computed_pass.hpp>

#include <caf/expected.hpp>

#include <string>
#include <vector>

namespace canopy::actors {

caf::expected<messages::computed_pass> run_pass(backends::backend_i& backend,
                                                const backends::pass_request& request,
                                                cache::row_dtype rows);

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
