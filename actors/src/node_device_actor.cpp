#include <canopy/actors/node_device_actor.hpp>

#include <canopy/actors/pass_runner.hpp>
#include <canopy/messages/errors.hpp>

#include <vector>

namespace canopy::actors {

using namespace messages;

namespace {

using device_pointer = polling_node_device_actor::stateful_pointer<node_device_state>;

/// Of `handles`, those the open session made (none once it ended, its KV freed
/// already); `forget` takes them out of the session's own.
std::vector<cache::kv_handle> session_kv(node_device_state& st, std::uint64_t session,
                                         const std::vector<cache::kv_handle>& handles,
                                         bool forget) {
  std::vector<cache::kv_handle> mine;
  auto it = st.sessions.find(session);
  if (it == st.sessions.end())
    return mine;
  for (auto kv : handles)
    if (forget ? it->second.kv.erase(kv) != 0 : it->second.kv.count(kv) != 0)
      mine.push_back(kv);
  return mine;
}

/// The backend's name for a session's adapter: sessions never share one.
std::string loaded_as(std::uint64_t session, const std::string& key) {
  return std::to_string(session) + "/" + key;
}

caf::error no_session() {
  // worker_lost: the front's link treats it as the node gone, and connects again.
  return make_error(errc::worker_lost, "the node has no such session (it ended)");
}

/// Records the KV a computed pass made as its session's, or, when the session ended
/// while the pass computed, frees it and refuses the pass.
caf::error own_kv(node_device_state& st, std::uint64_t session,
                  const computed_pass& pass) {
  std::vector<cache::kv_handle> made;
  for (const auto& item : pass.items)
    for (auto kv : item.kv)
      if (kv != cache::no_kv)
        made.push_back(kv);
  auto it = st.sessions.find(session);
  if (it == st.sessions.end()) {
    release_kv(*st.backend, made);
    return no_session();
  }
  it->second.kv.insert(made.begin(), made.end());
  return caf::none;
}

} // namespace

polling_node_device_actor::behavior_type
node_device(device_pointer self,
            std::shared_ptr<std::unique_ptr<backends::backend_i>> backend,
            std::uint64_t owner_key) {
  self->state.backend = std::move(*backend);
  self->state.owner_key = owner_key;
  return {
      [=](run_atom, std::uint64_t session, backends::pass_request& request,
          cache::row_dtype rows) -> caf::result<computed_pass> {
        auto& st = self->state;
        auto it = st.sessions.find(session);
        if (it == st.sessions.end())
          return no_session();
        const auto& owned = it->second.kv;
        for (std::size_t i = 0; i < request.items.size(); ++i) {
          auto& item = request.items[i];
          if (item.prefix != cache::no_kv && owned.count(item.prefix) == 0)
            return make_error(errc::invalid_request,
                              "pass item " + std::to_string(i) +
                                  " builds on KV its session does not hold");
          if (item.adapter.empty())
            continue;
          if (it->second.adapters.count(item.adapter) == 0)
            return make_error(errc::invalid_request,
                              "pass item " + std::to_string(i) +
                                  " names an adapter its session did not load");
          item.adapter = loaded_as(session, item.adapter);
        }
        auto answer = self->make_response_promise<computed_pass>();
        if (st.passes.start(*st.backend, request, rows, answer,
                            [self, session](const computed_pass& pass) {
                              return own_kv(self->state, session, pass);
                            }))
          self->send(self, poll_atom::value);
        return answer;
      },
      [=](poll_atom) {
        if (self->state.passes.answer_ready())
          self->send(self, poll_atom::value);
      },
      [=](free_kv_atom, std::uint64_t session,
          const std::vector<cache::kv_handle>& handles) {
        release_kv(*self->state.backend, session_kv(self->state, session, handles, true));
      },
      [=](demote_kv_atom, std::uint64_t session,
          const std::vector<cache::kv_handle>& handles) {
        // A session moves only KV it made.
        demote_kv(*self->state.backend, session_kv(self->state, session, handles, false));
      },
      [=](session_atom, std::uint64_t key, std::uint64_t session,
          bool open) -> caf::result<std::uint64_t> {
        auto& st = self->state;
        if (key != st.owner_key)
          return make_error(errc::invalid_request,
                            "sessions are the node's gate's to open");
        if (open) {
          st.sessions.emplace(session, node_device_state::session{});
          return std::uint64_t{0};
        }
        auto it = st.sessions.find(session);
        if (it == st.sessions.end())
          return std::uint64_t{0};
        std::vector<cache::kv_handle> freed(it->second.kv.begin(), it->second.kv.end());
        for (const auto& key : it->second.adapters)
          st.backend->remove_adapter(loaded_as(session, key));
        st.sessions.erase(it);
        release_kv(*st.backend, freed);
        return std::uint64_t{freed.size()};
      },
      [=](adapter_atom, std::uint64_t session, const std::string& key,
          const backends::lora_adapter_files& files) -> caf::result<bool> {
        auto& st = self->state;
        auto it = st.sessions.find(session);
        if (it == st.sessions.end())
          return no_session();
        auto loaded = load_adapter(*st.backend, loaded_as(session, key), key, files);
        if (!loaded)
          return std::move(loaded.error());
        it->second.adapters.insert(key);
        return true;
      },
      [=](adapter_atom, std::uint64_t session, const std::string& key) {
        auto& st = self->state;
        auto it = st.sessions.find(session);
        if (it != st.sessions.end() && it->second.adapters.erase(key) != 0)
          st.backend->remove_adapter(loaded_as(session, key));
      },
      [=](drain_atom, std::uint64_t key) {
        if (key != self->state.owner_key)
          return;
        self->state.passes.answer_all();
        self->quit(); // after what came before; later passes are bounced to their fronts
      },
  };
}

} // namespace canopy::actors
