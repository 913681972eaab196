#include <canopy/actors/pass_runner.hpp>

#include "exception_text.hpp"

#include <canopy/messages/adapter_key.hpp>
#include <canopy/messages/errors.hpp>

namespace canopy::actors {

using namespace messages;

void release_kv(backends::backend_i& backend,
                const std::vector<cache::kv_handle>& handles) {
  try {
    backend.release_kv(handles);
  } catch (...) {
    // Best effort: a backend that cannot free keeps serving.
  }
}

void demote_kv(backends::backend_i& backend,
               const std::vector<cache::kv_handle>& handles) {
  try {
    backend.demote_kv(handles);
  } catch (...) {
    // Best effort: KV left on the device is still read correctly.
  }
}

caf::expected<bool> load_adapter(backends::backend_i& backend,
                                 const std::string& loaded_as, const std::string& key,
                                 const backends::lora_adapter_files& files) {
  try {
    backend.add_adapter(loaded_as, files);
    return true;
  } catch (const std::exception& e) {
    return make_error(errc::invalid_request, "adapter '" +
                                                 std::string(adapter_name_of(key)) +
                                                 "': " + exception_text(e));
  }
}

} // namespace canopy::actors
