#include <canopy/actors/remote_worker_proxy.hpp>

namespace canopy::actors {

using namespace messages;

worker_actor::behavior_type remote_worker_proxy(worker_actor::pointer self,
                                                node_device_actor device,
                                                std::uint64_t session,
                                                backends::model_info model) {
  return {
      [=](run_atom, backends::pass_request& request, cache::row_dtype rows) {
        return self->delegate(device, run_atom::value, session, std::move(request), rows);
      },
      [=](free_kv_atom, std::vector<cache::kv_handle>& handles) {
        self->send(device, free_kv_atom::value, session, std::move(handles));
      },
      [=](demote_kv_atom, std::vector<cache::kv_handle>& handles) {
        self->send(device, demote_kv_atom::value, session, std::move(handles));
      },
      [=](info_atom) { return model; },
      [=](adapter_atom, std::string& key, backends::lora_adapter_files& files) {
        return self->delegate(device, adapter_atom::value, session, std::move(key),
                              std::move(files));
      },
      [=](adapter_atom, std::string& key) {
        self->send(device, adapter_atom::value, session, std::move(key));
      },
  };
}

} // namespace canopy::actors
