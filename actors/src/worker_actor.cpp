#include <canopy/actors/worker_actor.hpp>

#include <canopy/messages/errors.hpp>

#include <exception>
#include <string>

namespace canopy::actors {

using namespace messages;

worker_actor::behavior_type
worker(worker_actor::stateful_pointer<worker_state> self,
       std::shared_ptr<std::unique_ptr<backends::backend_i>> backend) {
  // The backend arrives through a shared holder because spawn arguments are copied.
  self->state.backend = std::move(*backend);
  return {
    [=](run_atom, const backends::pass_request& request)
      -> caf::result<backends::pass_result> {
      try {
        return self->state.backend->run(request);
      } catch (const std::exception& e) {
        return make_error(errc::backend_failure, e.what());
      } catch (...) {
        return make_error(errc::backend_failure, "unknown exception in the backend");
      }
    },
    [=](free_kv_atom, const std::vector<cache::kv_handle>& handles) {
      try {
        self->state.backend->release_kv(handles);
      } catch (...) {
        // Freeing is best effort: a backend that cannot free keeps serving.
      }
    },
    [=](info_atom) { return self->state.backend->info(); },
  };
}

} // namespace canopy::actors
