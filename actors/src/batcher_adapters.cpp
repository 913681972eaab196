// The batcher's LoRA adapters: loaded on every worker, on each that joins later, and
// unloaded everywhere. The batcher keeps each adapter's files for the joiners, within
// the adapters' budget.

#include "batcher_internals.hpp"

#include <canopy/messages/adapter_key.hpp>
#include <canopy/messages/errors.hpp>

#include <memory>
#include <string>

namespace canopy::actors::batcher_detail {

using namespace messages;

namespace {

/// One adapter's loading on the workers there were: answered once all are done.
struct adapter_loading {
  caf::typed_response_promise<bool> promise;
  std::vector<worker_actor> asked;
  std::size_t waiting = 0;
  caf::error refusal; // the first
};

void conclude(batcher_pointer self, const std::string& key, adapter_loading& loading) {
  if (!loading.refusal) {
    loading.promise.deliver(true);
    return;
  }
  // None keeps it: the workers that loaded it unload it, and joiners never see it.
  auto& st = self->state;
  for (const auto& w : loading.asked)
    self->send(w, adapter_atom::value, key);
  const auto it = st.adapters.find(key);
  if (it != st.adapters.end()) {
    st.adapter_bytes -= it->second.bytes();
    st.adapters.erase(it);
  }
  loading.promise.deliver(loading.refusal);
}

} // namespace

caf::result<bool> add_adapter(batcher_pointer self, const std::string& key,
                              backends::lora_adapter_files& files) {
  auto& st = self->state;
  const std::string name(adapter_name_of(key));
  if (st.adapters.count(key) != 0)
    return make_error(errc::invalid_request, "adapter '" + name + "' is loaded already");
  const auto budget = st.options.adapter_budget_bytes;
  if (files.bytes() > budget - st.adapter_bytes)
    return make_error(errc::invalid_request,
                      "adapter '" + name + "' (" + files.source + ") holds " +
                          std::to_string(files.bytes()) +
                          " bytes, and the adapters' budget of " +
                          std::to_string(budget) + " bytes (adapter_budget_bytes) has " +
                          std::to_string(budget - st.adapter_bytes) + " left");
  // Kept before the workers answer, so a worker joining meanwhile loads it too.
  st.adapter_bytes += files.bytes();
  const auto& kept = st.adapters.emplace(key, std::move(files)).first->second;
  auto loading = std::make_shared<adapter_loading>();
  for (auto w : st.workers.alive())
    loading->asked.push_back(st.workers[w].handle);
  if (loading->asked.empty())
    return true; // the workers that join will load it
  loading->promise = self->make_response_promise<bool>();
  loading->waiting = loading->asked.size();
  for (const auto& handle : loading->asked)
    self->request(handle, caf::infinite, adapter_atom::value, key, kept)
        .then(
            [=](bool) {
              if (--loading->waiting == 0)
                conclude(self, key, *loading);
            },
            [=](const caf::error& e) {
              // A Canopy error is the worker's refusal; anything else is the worker
              // gone, which loses nothing: it will not run passes either.
              if (code_of(e) != errc::none && !loading->refusal)
                loading->refusal = e;
              if (--loading->waiting == 0)
                conclude(self, key, *loading);
            });
  return loading->promise;
}

bool remove_adapter(batcher_pointer self, const std::string& key) {
  auto& st = self->state;
  const auto it = st.adapters.find(key);
  if (it == st.adapters.end())
    return false;
  st.adapter_bytes -= it->second.bytes();
  st.adapters.erase(it);
  // After every pass already sent under it (a worker's mailbox keeps the order); the
  // entries still queued under it are answered at their dispatch (unknown_adapter).
  for (auto w : st.workers.alive())
    self->send(st.workers[w].handle, adapter_atom::value, key);
  return true;
}

void load_adapters(batcher_pointer self, const worker_actor& handle) {
  for (const auto& [key, files] : self->state.adapters)
    self->request(handle, caf::infinite, adapter_atom::value, key, files)
        .then([](bool) {},
              [](const caf::error&) {
                // It served the same model as the workers that took the adapter, so a
                // refusal is unexpected; its passes under the adapter then fail with
                // the backend's message.
              });
}

} // namespace canopy::actors::batcher_detail
