#include <canopy/actors/worker_actor.hpp>

#include <canopy/actors/pass_runner.hpp>

namespace canopy::actors {

using namespace messages;

polling_worker_actor::behavior_type
worker(polling_worker_actor::stateful_pointer<worker_state> self,
       std::shared_ptr<std::unique_ptr<backends::backend_i>> backend) {
  // The backend arrives through a shared holder because spawn arguments are copied.
  self->state.backend = std::move(*backend);
  return {
      [=](run_atom, const backends::pass_request& request, cache::row_dtype rows) {
        auto answer = self->make_response_promise<computed_pass>();
        if (self->state.passes.start(*self->state.backend, request, rows, answer))
          self->send(self, poll_atom::value);
        return answer;
      },
      [=](poll_atom) {
        if (self->state.passes.answer_ready())
          self->send(self, poll_atom::value);
      },
      [=](free_kv_atom, const std::vector<cache::kv_handle>& handles) {
        release_kv(*self->state.backend, handles);
      },
      [=](demote_kv_atom, const std::vector<cache::kv_handle>& handles) {
        demote_kv(*self->state.backend, handles);
      },
      [=](info_atom) { return self->state.backend->info(); },
      [=](adapter_atom, const std::string& key,
          const backends::lora_adapter_files& files) -> caf::result<bool> {
        auto loaded = load_adapter(*self->state.backend, key, key, files);
        if (!loaded)
          return std::move(loaded.error());
        return true;
      },
      [=](adapter_atom, const std::string& key) {
        self->state.backend->remove_adapter(key);
      },
  };
}

} // namespace canopy::actors
