#include <canopy/actors/node_device_actor.hpp>

#include <canopy/actors/pass_runner.hpp>
#include <canopy/messages/errors.hpp>

#include <vector>

namespace canopy::actors {

using namespace messages;

namespace {

using device_pointer = node_device_actor::stateful_pointer<node_device_state>;

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
    if (forget ? it->second.erase(kv) != 0 : it->second.count(kv) != 0)
      mine.push_back(kv);
  return mine;
}

caf::error no_session() {
  // worker_lost: the front's link treats it as the node gone, and connects again.
  return make_error(errc::worker_lost, "the node has no such session (it ended)");
}

} // namespace

node_device_actor::behavior_type
node_device(device_pointer self,
            std::shared_ptr<std::unique_ptr<backends::backend_i>> backend,
            std::uint64_t owner_key) {
  self->state.backend = std::move(*backend);
  self->state.owner_key = owner_key;
  return {
      [=](run_atom, std::uint64_t session, const backends::pass_request& request,
          cache::row_dtype rows) -> caf::result<computed_pass> {
        auto& st = self->state;
        auto it = st.sessions.find(session);
        if (it == st.sessions.end())
          return no_session();
        auto& owned = it->second;
        for (std::size_t i = 0; i < request.items.size(); ++i) {
          const auto prefix = request.items[i].prefix;
          if (prefix != cache::no_kv && owned.count(prefix) == 0)
            return make_error(errc::invalid_request,
                              "pass item " + std::to_string(i) +
                                  " builds on KV its session does not hold");
        }
        auto result = run_pass(*st.backend, request, rows);
        if (!result)
          return std::move(result.error());
        for (const auto& item : result->items)
          for (auto kv : item.kv)
            if (kv != cache::no_kv)
              owned.insert(kv);
        return std::move(*result);
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
          st.sessions.emplace(session, std::unordered_set<cache::kv_handle>{});
          return std::uint64_t{0};
        }
        auto it = st.sessions.find(session);
        if (it == st.sessions.end())
          return std::uint64_t{0};
        std::vector<cache::kv_handle> freed(it->second.begin(), it->second.end());
        st.sessions.erase(it);
        release_kv(*st.backend, freed);
        return std::uint64_t{freed.size()};
      },
      [=](drain_atom, std::uint64_t key) {
        if (key == self->state.owner_key)
          self->quit(); // after what came before; later passes are bounced to their
                        // fronts
      },
  };
}

} // namespace canopy::actors
