#include <canopy/actors/pass_runner.hpp>

#include "exception_text.hpp"

#include <canopy/messages/adapter_key.hpp>
#include <canopy/messages/errors.hpp>

#include <exception>

namespace canopy::actors {

using namespace messages;

namespace {

computed_pass computed(backends::pass_result&& result, std::int64_t vocab,
                       cache::row_dtype dtype) {
  computed_pass out;
  out.dtype = dtype;
  out.vocab = static_cast<std::uint64_t>(vocab);
  out.tokens_computed = result.tokens_computed;
  out.matmul_flops = result.matmul_flops;
  out.compute_ns = result.compute_ns;
  out.items.resize(result.items.size());
  for (std::size_t i = 0; i < result.items.size(); ++i) {
    out.items[i].kv = std::move(result.items[i].kv);
    out.items[i].values = std::move(result.items[i].logprobs);
  }
  return out;
}

} // namespace

caf::expected<computed_pass> run_pass(backends::backend_i& backend,
                                      const backends::pass_request& request,
                                      cache::row_dtype rows) {
  try {
    return computed(backend.run(request), backend.info().vocab_size, rows);
  } catch (const std::exception& e) {
    return make_error(errc::backend_failure, exception_text(e));
  } catch (...) {
    return make_error(errc::backend_failure, "unknown exception in the backend");
  }
}

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
