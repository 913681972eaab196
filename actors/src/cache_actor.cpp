#include <canopy/actors/cache_actor.hpp>

#include <canopy/messages/errors.hpp>

#include <algorithm>
#include <map>
#include <stdexcept>

namespace canopy::actors {

using namespace messages;

// Note [adapter scopes]
// Rows and KV computed under a LoRA adapter must never answer a query under another
// adapter or the base model, and equal sequences under one adapter must still merge.
// So the adapter joins the partition in the cache key: the trie partition of
// (partition, adapter) is the partition alone for the base model, and
// partition + NUL + key under an adapter. Partitions hold no NUL (the request actors
// refuse one), so the names of two different pairs never coincide, and a clear of the
// partitions starting with a prefix takes their adapters' entries too. The batcher
// compares partitions, so it merges, orders and reuses KV within one adapter alone.
//
// The key is not the adapter's name but the name of one loading of it ("name#7",
// unique in the engine's life): removing an adapter drops its unlocked entries, and
// entries still locked then can never be matched again, even when an adapter of the
// same name is loaded later (genlm-backend's stale cache after set_lora).

bool cache_state::scope(query& q) const {
  if (q.adapter.empty())
    return true;
  const auto it = adapters.find(q.adapter);
  if (it == adapters.end())
    return false;
  q.adapter = it->second;
  q.partition.reserve(q.partition.size() + 1 + q.adapter.size());
  q.partition += '\0';
  q.partition += q.adapter;
  return true;
}

namespace {

/// "no adapter 'x' is loaded (loaded: a, b)".
caf::error unknown_adapter(const std::string& name,
                           const std::map<std::string, std::string>& adapters) {
  std::string loaded;
  for (const auto& [known, key] : adapters)
    loaded += (loaded.empty() ? "" : ", ") + known;
  return make_error(errc::unknown_adapter,
                    "no adapter '" + name + "' is loaded (" +
                        (loaded.empty() ? std::string("none is") : "loaded: " + loaded) +
                        ")");
}

} // namespace

cache::row_ptr cache_state::answerable(cache::node_id node, bool require_kv) const {
  auto row = trie->logprobs(node);
  if (!row || !require_kv || trie->kv_continues(node))
    return row;
  return nullptr;
}

cache::node_id cache_state::lock_miss(const query& q, const cache::match_result& m) {
  const auto& tokens = q.tokens;
  const auto leaf =
      m.node == cache::no_node
          ? trie->insert(q.partition, tokens.data(), tokens.size(), q.priority)
          : trie->extend(m.node, tokens.data() + m.length, tokens.size() - m.length,
                         q.priority);
  trie->lock(leaf);
  return leaf;
}

prepared_entry cache_state::prepare(cache::node_id leaf, bool require_kv) {
  prepared_entry entry;
  entry.kv.resize(trie->workers());
  if (!options.enabled)
    return entry;
  if ((entry.hit.row = answerable(leaf, require_kv)))
    return entry;
  // The pass must compute at least the last token to produce its row, so the prefix
  // ends at the parent at the latest. A host tier's KV goes back to the device in the
  // cache's accounts now, before the pass, and the worker moves it when the pass reads
  // it (the leaf's lock keeps the path).
  const auto parent = trie->parent(leaf);
  entry.kv = trie->promoted_kv_prefixes(parent);
  if (trie->config().kv_window == 0)
    return entry; // the leaf's lock keeps its whole path's KV
  // The leaf's lock keeps the window above it, which is what a pass continuing from
  // the parent reads; a prefix ending higher up gets a lock of its own.
  const auto parent_depth = trie->depth(parent);
  for (const auto& prefix : entry.kv) {
    if (prefix.length == 0 || prefix.length == parent_depth)
      continue;
    const auto node = trie->ancestor(parent, prefix.length);
    if (std::find(entry.pins.begin(), entry.pins.end(), node) == entry.pins.end()) {
      trie->lock(node);
      entry.pins.push_back(node);
    }
  }
  return entry;
}

std::vector<shared_logprobs> cache_state::store(store_request& request) {
  const auto& pass = request.pass.items;
  auto& results = request.result.items;
  std::vector<shared_logprobs> rows;
  std::vector<cache::kv_handle> unstored_kv;
  const auto worker = request.worker;
  for (std::size_t i = 0; i < pass.size(); ++i) {
    const auto& item = pass[i];
    auto& out = results[i];
    // The nodes of the new tokens only (new_nodes[j] is new token j's), found by
    // walking up from the leaf: a short walk when the prefix was cached.
    std::vector<cache::node_id> new_nodes(item.tokens.size());
    if (options.enabled) {
      const auto leaf = request.items[i].leaf;
      const auto depth = trie->depth(leaf);
      if (item.tokens.size() > depth)
        throw std::logic_error("a pass item has more new tokens than its sequence");
      new_nodes =
          trie->path(leaf, depth - static_cast<std::uint32_t>(item.tokens.size()));
    }
    // KV is prefix-closed: once one token's KV cannot be stored (or the backend had
    // no room to keep it: no_kv), the rest is useless.
    bool storing_kv = options.enabled;
    for (std::size_t j = 0; j < out.kv.size(); ++j) {
      storing_kv = storing_kv && out.kv[j] != cache::no_kv &&
                   trie->attach_kv(new_nodes[j], worker, out.kv[j],
                                   workers[worker].kv_bytes_per_token);
      if (!storing_kv && out.kv[j] != cache::no_kv)
        unstored_kv.push_back(out.kv[j]);
    }
    auto computed_rows = take_rows(out, request.result);
    for (std::size_t r = 0; r < item.rows.size(); ++r) {
      auto& computed = computed_rows.at(r);
      if (!options.enabled) {
        rows.push_back(std::move(computed));
        continue;
      }
      auto node = new_nodes[item.rows[r]];
      // A row stored earlier wins, so every caller of a sequence sees the same values.
      auto row = trie->logprobs(node);
      if (!row) {
        row = std::move(computed.row);
        trie->attach_logprobs(node, row);
      }
      rows.push_back({std::move(row)});
    }
  }
  if (!unstored_kv.empty())
    caf::anon_send(workers[worker].handle, free_kv_atom::value, std::move(unstored_kv));
  return rows;
}

void cache_state::join(cache::worker_id w, worker_actor handle,
                       const worker_description& description) {
  const auto& model = description.model;
  // A host tier only without a window (Note [host tier] in cache/src/kv_ledger.cpp).
  const auto host = trie->config().kv_window == 0 ? model.kv_host_keep_bytes : 0;
  if (w == trie->workers())
    trie->add_worker(description.kv_budget_bytes, host);
  else
    trie->set_kv_budget(w, description.kv_budget_bytes, host); // forgotten at its loss
  if (workers.size() <= w)
    workers.resize(w + 1);
  workers[w] = cache_worker{std::move(handle), model.kv_bytes_per_token};
  metrics->worker(w).kv_budget_bytes.store(description.kv_budget_bytes,
                                           std::memory_order_relaxed);
  metrics->worker(w).kv_host_budget_bytes.store(host, std::memory_order_relaxed);
  after_change();
}

void cache_state::after_change() {
  if (!options.enabled)
    return;
  // Demotions before releases: a handle demoted and then dropped must end up freed
  // (a worker ignores a move of KV it no longer holds).
  std::map<cache::worker_id, std::vector<cache::kv_handle>> demoted, released;
  for (const auto& r : trie->take_demoted())
    demoted[r.worker].push_back(r.handle);
  for (const auto& r : trie->take_released())
    released[r.worker].push_back(r.handle);
  for (auto& [w, handles] : demoted)
    caf::anon_send(workers[w].handle, demote_kv_atom::value, std::move(handles));
  for (auto& [w, handles] : released)
    caf::anon_send(workers[w].handle, free_kv_atom::value, std::move(handles));
  metrics->publish(trie->stats());
}

cache_actor::behavior_type cache(cache_actor::stateful_pointer<cache_state> self,
                                 cache_options options,
                                 std::shared_ptr<engine_metrics> metrics) {
  auto& st = self->state;
  st.options = std::move(options);
  st.options.trie.workers = 0; // workers join
  st.trie = std::make_unique<cache::token_trie>(st.options.trie);
  st.metrics = std::move(metrics);
  return {
      [=](lookup_atom, query& q, std::uint64_t ticket, const answer_sink& sink) {
        auto& st = self->state;
        if (!st.batcher) {
          self->send(sink, answer_atom::value, ticket,
                     make_error(errc::no_workers, "the engine is not started"));
          return;
        }
        if (!st.scope(q)) {
          self->send(sink, answer_atom::value, ticket,
                     unknown_adapter(q.adapter, st.adapters));
          return;
        }
        auto leaf = cache::root_node;
        if (st.options.enabled) {
          const auto m = st.trie->match(q.partition, q.tokens.data(), q.tokens.size(),
                                        q.priority, 0);
          auto row =
              m.length == q.tokens.size() ? st.answerable(m.node, q.require_kv) : nullptr;
          if (row) {
            bump(st.metrics->cache_hits);
            self->send(sink, answer_atom::value, ticket,
                       shared_logprobs{std::move(row), m.extra});
            return;
          }
          leaf = st.lock_miss(q, m);
          st.metrics->cache_count<&engine_stats::locked_nodes>().store(
              st.trie->stats().locked_nodes, std::memory_order_relaxed);
        }
        self->send(st.batcher, enqueue_atom::value, std::move(q), ticket, sink, leaf);
      },
      [=](prepare_atom, const prepare_request& request) {
        auto& st = self->state;
        prepared_batch out;
        out.entries.reserve(request.leaves.size());
        for (std::size_t i = 0; i < request.leaves.size(); ++i)
          out.entries.push_back(st.prepare(request.leaves[i], request.require_kv[i]));
        // Promotions may have demoted other KV: the workers hear of it before the
        // batcher, answered after this, sends the pass that needs the room.
        st.after_change();
        return out;
      },
      [=](store_atom,
          store_request& request) -> caf::result<std::vector<shared_logprobs>> {
        // The batcher checked the pass's shape (pass_check.hpp); a throw here would end
        // the cache, so whatever slipped through fails this batch only.
        try {
          auto rows = self->state.store(request);
          self->state.after_change();
          return rows;
        } catch (const std::exception& e) {
          self->state.after_change();
          return make_error(errc::backend_failure,
                            std::string("storing a pass: ") + e.what());
        }
      },
      [=](keep_atom, query& q, shared_logprobs& answer) {
        auto& st = self->state;
        if (!st.options.enabled || !answer.row || !answer.extra || !st.scope(q))
          return;
        const auto node = st.trie->find(q.partition, q.tokens.data(), q.tokens.size());
        if (node == cache::no_node)
          return;
        st.trie->attach_extra(node, answer.row, std::move(answer.extra));
        st.after_change();
      },
      [=](release_atom, const std::vector<cache::node_id>& leaves) {
        auto& st = self->state;
        if (st.options.enabled)
          for (auto leaf : leaves)
            st.trie->unlock(leaf);
        st.after_change();
      },
      [=](forget_atom, cache::worker_id worker) {
        self->state.trie->forget_worker(worker);
        self->state.after_change();
      },
      [=](join_atom, cache::worker_id w, worker_actor& handle,
          const worker_description& description) {
        self->state.join(w, std::move(handle), description);
      },
      [=](connect_atom, const batcher_actor& batcher) { self->state.batcher = batcher; },
      [=](cancel_atom, answer_sink& sink, std::vector<std::uint64_t>& tickets,
          std::vector<query>& keys) {
        // A query whose adapter is gone keeps its plain key, under which no entry waits
        // for its ticket: the withdrawal finds nothing, and its entry answers
        // unknown_adapter at its dispatch (the caller was answered cancelled already).
        for (auto& q : keys)
          self->state.scope(q);
        if (self->state.batcher)
          self->send(self->state.batcher, cancel_atom::value, std::move(sink),
                     std::move(tickets), std::move(keys));
      },
      [=](clear_atom, const std::string& partitions) {
        self->state.trie->clear(partitions);
        self->state.after_change();
        return true;
      },
      [=](clear_kv_atom, const std::string& partitions) {
        self->state.trie->clear_kv(partitions);
        self->state.after_change();
        return true;
      },
      [=](adapter_atom, std::string& name, std::string& key) -> caf::result<bool> {
        if (!self->state.adapters.emplace(std::move(name), std::move(key)).second)
          return make_error(errc::invalid_request, "an adapter of that name is loaded");
        return true;
      },
      [=](adapter_atom, const std::string& name) -> caf::result<std::string> {
        auto& st = self->state;
        const auto it = st.adapters.find(name);
        if (it == st.adapters.end())
          return unknown_adapter(name, st.adapters);
        const std::string key = it->second;
        st.adapters.erase(it);
        const std::string suffix = std::string(1, '\0') + key;
        st.trie->clear([&](std::string_view partition) {
          return partition.size() >= suffix.size() &&
                 partition.compare(partition.size() - suffix.size(), suffix.size(),
                                   suffix) == 0;
        });
        st.after_change();
        return key;
      },
      [=](adapters_atom) {
        std::vector<std::string> names;
        for (const auto& [name, key] : self->state.adapters)
          names.push_back(name);
        return names;
      },
      [=](view_atom, query& q,
          const cache::trie_view_limits& limits) -> caf::result<cache::trie_view> {
        auto& st = self->state;
        if (!st.scope(q)) // leaves q as it was
          return unknown_adapter(q.adapter, st.adapters);
        return st.trie->view(q.partition, q.tokens.data(), q.tokens.size(), limits);
      },
  };
}

} // namespace canopy::actors
