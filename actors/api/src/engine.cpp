#include <canopy/engine.hpp>

#include <canopy/actor_system_setup.hpp>
#include <canopy/actors/engine_actors.hpp>
#include <canopy/actors/model_tokenizer.hpp>
#include <canopy/actors/remote_workers.hpp>
#include <canopy/backends/checkpoints/lora_adapter.hpp>
#include <canopy/messages/adapter_key.hpp>
#include <canopy/messages/errors.hpp>
#include <canopy/sampling.hpp>

#include <ATen/ATen.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace canopy {

using namespace messages;

using actors::from_ms;

namespace {

canopy::error to_exception(caf::actor_system& system, const caf::error& e) {
  auto code = code_of(e);
  if (code != errc::none)
    return canopy::error(code, message_of(e));
  if (e == caf::sec::request_receiver_down)
    return canopy::error(errc::shutting_down, "the engine stopped before answering");
  return canopy::error(errc::backend_failure, system.render(e));
}

} // namespace

struct engine::impl {
  engine_config config;
  std::unique_ptr<caf::actor_system_config> own_config;
  std::unique_ptr<caf::actor_system> own_system;
  caf::actor_system* system = nullptr;
  actors::engine_actors actors;
  std::optional<actors::model_tokenizer> tokenizer;
  backends::special_tokens special;
  std::atomic<std::size_t> next_front{0};
  std::atomic<std::uint64_t> next_adapter{1}; // adapter_key's serials

  const actors::model_tokenizer& need_tokenizer() const {
    if (!tokenizer)
      throw canopy::error(errc::no_tokenizer,
                          "the model " + actors.model.name +
                              " has no tokenizer: give token ids, or name one with the "
                              "'tokenizer' setting");
    return *tokenizer;
  }

  const engine_actor& front() {
    const auto& fronts = actors.fronts;
    return fronts[next_front.fetch_add(1, std::memory_order_relaxed) % fronts.size()];
  }

  void start(caf::actor_system& sys) {
    system = &sys;
    check_actor_system(sys, config, front_role(config));
    const auto tokenizer_path = actors::configured_tokenizer_path(config);
    auto tokenizer_file = actors::load_configured_tokenizer(tokenizer_path);
    if (tokenizer_file && config.backend == "mock") // rows of the tokenizer's size
      config.vocab_size = static_cast<std::int64_t>(tokenizer_file->byte_vocab().size());
    auto backends = actors::make_backends(config);
    auto model = actors::served_model(config, backends);
    if (tokenizer_file)
      tokenizer = actors::fit_model_tokenizer(std::move(tokenizer_file), tokenizer_path,
                                              model.vocab_size);
    special = actors::load_special_tokens(config, model.vocab_size,
                                          tokenizer ? &*tokenizer : nullptr);
    auto workers = actors::spawn_local_workers(sys, config, std::move(backends));
    std::shared_ptr<const backends::byte_order> byte_order; // none without a tokenizer
    if (tokenizer)
      byte_order = std::make_shared<const backends::byte_order>(tokenizer->byte_vocab,
                                                                special.eos);
    actors = actors::spawn_engine_actors(sys, config, std::move(model),
                                         std::move(workers), byte_order);
    // The in-process workers join with messages; once the batcher answers a ping sent
    // after them, they are in, and stats() (and GET /v1/model) list them from the start.
    {
      caf::scoped_actor self{sys};
      self->request(actors.batcher, caf::infinite, ping_atom::value)
          .receive([](bool) {}, [&](const caf::error& e) { throw to_exception(sys, e); });
    }
    for (const auto& [name, dir] : config.adapter_list())
      add_adapter(name, dir); // remote workers load them when they join
    if (config.remote_workers.empty())
      return;
    actors::spawn_worker_links(sys, config, actors);
    // The nodes that are up join before the first query; a handshake takes a few
    // round trips, each bounded by worker_timeout_ms.
    actors::await_first_attempts(sys, actors.links,
                                 3 * from_ms(config.worker_timeout_ms));
  }

  /// start(), leaving nothing running when it throws (an adapter of the `adapters`
  /// setting refused, say): an actor left alive would keep the actor system's
  /// destructor waiting for ever.
  void start_or_stop(caf::actor_system& sys) {
    try {
      start(sys);
    } catch (...) {
      stop();
      throw;
    }
  }

  void stop() {
    actors.stop();
    // Drop our handles first: a detached worker's thread ends only once its actor
    // object is gone, and the system's destructor waits for that thread.
    actors = {};
    own_system.reset();
  }

  /// Sends a query whose outcome (a logprobs_result) goes to `on_result`, on an actor
  /// thread. `on_result` is stored in the reply as it is, not wrapped in another
  /// std::function: hosts hold many queries at once, and each heap block made on the
  /// asking thread and freed on an actor thread costs both a lock.
  template <class OnResult, class Atom, class... Ts>
  void send_query(OnResult on_result, Atom atom, Ts&&... xs) {
    auto* sys = system;
    reply_callback reply{
        [sys, on_result = std::move(on_result)](caf::expected<shared_logprobs> result) {
          if (result)
            on_result(to_tensor(*result));
          else
            on_result(to_exception(*sys, result.error()));
        }};
    caf::anon_send(front(), atom, std::forward<Ts>(xs)..., std::move(reply));
  }

  /// An outcome function (a result or the error) that fulfils `promise`.
  template <class T> static auto fulfilling(std::shared_ptr<std::promise<T>> promise) {
    return [promise = std::move(promise)](std::variant<T, canopy::error> result) {
      if (auto* t = std::get_if<T>(&result))
        promise->set_value(std::move(*t));
      else
        promise->set_exception(std::make_exception_ptr(std::get<canopy::error>(result)));
    };
  }

  /// The same, answered through a future. A reply dropped unanswered destroys the
  /// promise, so the future still gets an error.
  template <class Atom, class... Ts>
  std::future<at::Tensor> future_query(Atom atom, Ts&&... xs) {
    auto promise = std::make_shared<std::promise<at::Tensor>>();
    auto future = promise->get_future();
    send_query(fulfilling(std::move(promise)), atom, std::forward<Ts>(xs)...);
    return future;
  }

  /// A next-byte query whose outcome (a next_byte_result) goes to `on_result`, on an
  /// actor thread.
  template <class OnResult> void send_next_byte(next_byte_query q, OnResult on_result) {
    auto* sys = system;
    next_byte_reply reply{[sys, on_result = std::move(on_result)](
                              caf::expected<backends::next_byte_distribution> result) {
      if (result)
        on_result(std::move(*result));
      else
        on_result(to_exception(*sys, result.error()));
    }};
    caf::anon_send(front(), next_byte_atom::value, std::move(q), std::move(reply));
  }

  /// Asks a front actor something with a bool answer and waits for it.
  template <class Atom, class... Ts> void control(Atom atom, Ts&&... xs) {
    ask<bool>(front(), atom, std::forward<Ts>(xs)...);
  }

  /// The answer of `to` to a request, waited for; its error thrown as canopy::error.
  template <class T, class Handle, class... Ts> T ask(const Handle& to, Ts&&... xs) {
    caf::scoped_actor self{*system};
    T out{};
    self->request(to, caf::infinite, std::forward<Ts>(xs)...)
        .receive([&](T& answer) { out = std::move(answer); },
                 [&](const caf::error& e) { throw to_exception(*system, e); });
    return out;
  }

  void add_adapter(const std::string& name, const std::string& dir) {
    if (auto problem = adapter_name_problem(name); !problem.empty())
      throw canopy::error(errc::invalid_request, problem);
    const canopy::error taken(errc::invalid_request,
                              "adapter '" + name +
                                  "' is loaded already; remove it first");
    // Checked before reading and loading it for nothing; the cache has the last word.
    const auto names = ask<std::vector<std::string>>(actors.cache, adapters_atom::value);
    if (std::find(names.begin(), names.end(), name) != names.end())
      throw taken;
    backends::lora_adapter_files files;
    try {
      files = backends::read_lora_adapter_files(dir, config.adapter_budget_bytes);
    } catch (const std::exception& e) {
      throw canopy::error(errc::invalid_request, "adapter '" + name + "': " + e.what());
    }
    const auto key = adapter_key(name, next_adapter.fetch_add(1));
    ask<bool>(actors.batcher, adapter_atom::value, key, std::move(files));
    try {
      ask<bool>(actors.cache, adapter_atom::value, name, key);
    } catch (const canopy::error&) { // another call took the name meanwhile
      ask<bool>(actors.batcher, adapter_atom::value, key);
      throw taken;
    }
  }
};

engine::engine(engine_config config) : impl_(std::make_unique<impl>()) {
  config.validate();
  impl_->config = std::move(config);
  impl_->own_config = std::make_unique<caf::actor_system_config>();
  configure_actor_system(*impl_->own_config, impl_->config, front_role(impl_->config));
  auto threads = impl_->config.scheduler_threads;
  if (threads == 0)
    threads = std::max(2u, std::thread::hardware_concurrency());
  impl_->own_config->set("scheduler.max-threads", static_cast<std::size_t>(threads));
  impl_->own_system = std::make_unique<caf::actor_system>(*impl_->own_config);
  impl_->start_or_stop(*impl_->own_system);
}

engine::engine(caf::actor_system& host, engine_config config)
    : impl_(std::make_unique<impl>()) {
  config.validate();
  impl_->config = std::move(config);
  impl_->start_or_stop(host);
}

engine::~engine() {
  impl_->stop();
}

namespace {

query make_query(token_seq tokens, const query_options& options,
                 bool require_kv = false) {
  query q{std::move(tokens), options.priority, require_kv, from_ms(options.timeout_ms),
          options.cache_partition};
  q.adapter = options.adapter;
  return q;
}

} // namespace

std::future<at::Tensor> engine::next_token_logprobs(token_seq tokens,
                                                    query_options options) {
  return impl_->future_query(logprobs_atom::value,
                             make_query(std::move(tokens), options));
}

void engine::next_token_logprobs(token_seq tokens, logprobs_callback callback,
                                 query_options options) {
  impl_->send_query(std::move(callback), logprobs_atom::value,
                    make_query(std::move(tokens), options));
}

at::Tensor engine::next_token_logprobs_sync(token_seq tokens, query_options options) {
  return next_token_logprobs(std::move(tokens), options).get();
}

at::Tensor engine::batch_next_token_logprobs(const std::vector<token_seq>& batch,
                                             const query_options& options) {
  std::vector<std::future<at::Tensor>> futures;
  futures.reserve(batch.size());
  for (const auto& tokens : batch)
    futures.push_back(next_token_logprobs(tokens, options));
  std::vector<at::Tensor> rows;
  rows.reserve(batch.size());
  for (auto& f : futures)
    rows.push_back(f.get());
  if (rows.empty())
    return at::empty({0, vocab_size()}, at::kFloat);
  return at::stack(rows);
}

namespace {

next_byte_query make_next_byte_query(token_seq tokens, std::string prefix,
                                     backends::byte_reduce reduce,
                                     const query_options& options) {
  return {make_query(std::move(tokens), options), std::move(prefix), reduce};
}

} // namespace

std::future<backends::next_byte_distribution>
engine::next_byte_logprobs(token_seq tokens, std::string prefix,
                           backends::byte_reduce reduce, query_options options) {
  auto promise = std::make_shared<std::promise<backends::next_byte_distribution>>();
  auto future = promise->get_future();
  impl_->send_next_byte(
      make_next_byte_query(std::move(tokens), std::move(prefix), reduce, options),
      impl::fulfilling(std::move(promise)));
  return future;
}

void engine::next_byte_logprobs(token_seq tokens, std::string prefix,
                                backends::byte_reduce reduce, next_byte_callback callback,
                                query_options options) {
  impl_->send_next_byte(
      make_next_byte_query(std::move(tokens), std::move(prefix), reduce, options),
      std::move(callback));
}

at::Tensor engine::next_token_logprobs_uncached(token_seq tokens) {
  return impl_->future_query(uncached_atom::value, std::move(tokens)).get();
}

token_seq engine::sample(const token_seq& prompt, std::size_t max_tokens,
                         const std::vector<std::int32_t>& eos_token_ids,
                         double temperature, std::uint64_t seed,
                         const query_options& options) {
  return batch_sample({prompt}, max_tokens, eos_token_ids, temperature, seed, options)
      .front();
}

std::vector<token_seq>
engine::batch_sample(const std::vector<token_seq>& prompts, std::size_t max_tokens,
                     const std::vector<std::int32_t>& eos_token_ids, double temperature,
                     std::uint64_t seed, const query_options& options) {
  sampling_run run(prompts, max_tokens, eos_token_ids, temperature, seed);
  while (!run.finished()) {
    std::vector<std::pair<std::size_t, std::future<at::Tensor>>> asked;
    for (auto& [i, context] : run.next_queries())
      asked.emplace_back(i, next_token_logprobs(std::move(context), options));
    for (auto& [i, future] : asked) {
      auto row = future.get();
      run.advance(i, row.data_ptr<float>(), row.numel());
    }
  }
  return run.generated();
}

void engine::cache_kv(const token_seq& prompt, const query_options& options) {
  impl_->future_query(logprobs_atom::value, make_query(prompt, options, true)).get();
}

void engine::clear_cache(std::string_view partitions) {
  impl_->control(clear_atom::value, std::string(partitions));
}
void engine::clear_kv_cache(std::string_view partitions) {
  impl_->control(clear_kv_atom::value, std::string(partitions));
}
cache::trie_view engine::cache_view(const token_seq& prefix,
                                    const cache::trie_view_limits& limits,
                                    const query_options& options) {
  return impl_->ask<cache::trie_view>(impl_->front(), view_atom::value,
                                      make_query(prefix, options), limits);
}

void engine::reset_async_queries() {
  impl_->control(cancel_atom::value);
}

void engine::add_adapter(const std::string& name, const std::string& dir) {
  impl_->add_adapter(name, dir);
}

void engine::remove_adapter(const std::string& name) {
  const auto key =
      impl_->ask<std::string>(impl_->actors.cache, adapter_atom::value, name);
  impl_->ask<bool>(impl_->actors.batcher, adapter_atom::value, key);
}

std::vector<std::string> engine::adapters() const {
  return impl_->ask<std::vector<std::string>>(impl_->actors.cache, adapters_atom::value);
}

token_seq engine::tokenize(std::string_view text, bool add_special_tokens) const {
  try {
    return impl_->need_tokenizer().tokenizer->encode(text, add_special_tokens);
  } catch (const std::invalid_argument& e) { // text a normalizer cannot read
    throw canopy::error(errc::invalid_request, e.what());
  }
}

std::string engine::detokenize(const token_seq& ids) const {
  const auto& t = impl_->need_tokenizer();
  for (const auto id : ids)
    if (id < 0 || static_cast<std::size_t>(id) >= t.tokenizer->byte_vocab().size())
      throw canopy::error(errc::token_out_of_range,
                          "token id " + std::to_string(id) +
                              " is outside the tokenizer's [0, " +
                              std::to_string(t.tokenizer->byte_vocab().size()) + ")");
  return t.tokenizer->decode(ids);
}

const std::vector<std::optional<std::string>>& engine::byte_vocab() const {
  return impl_->need_tokenizer().byte_vocab;
}

const std::vector<std::optional<std::string>>& engine::special_token_texts() const {
  return impl_->need_tokenizer().special_texts;
}

std::vector<backends::merge_rule> engine::merge_rules() const {
  return impl_->need_tokenizer().tokenizer->merge_rules();
}

const backends::chat_templates& engine::chat_templates() const {
  return impl_->need_tokenizer().chat_templates;
}

bool engine::has_tokenizer() const {
  return impl_->tokenizer.has_value();
}

std::optional<std::int32_t> engine::bos_token_id() const {
  return impl_->special.bos;
}

const std::vector<std::int32_t>& engine::eos_token_ids() const {
  return impl_->special.eos;
}

std::int64_t engine::vocab_size() const {
  return impl_->actors.model.vocab_size;
}
const backends::model_info& engine::model() const {
  return impl_->actors.model;
}
const engine_config& engine::config() const {
  return impl_->config;
}

engine_stats engine::stats() const {
  auto s = impl_->actors.metrics->snapshot();
  s.logprob_budget_bytes = impl_->config.logprob_budget_bytes;
  return s;
}

engine_actor engine::handle() const {
  return impl_->actors.fronts.front();
}

at::Tensor to_tensor(const shared_logprobs& reply) {
  const auto& row = reply.row;
  const auto vocab = static_cast<std::int64_t>(row->vocab());
  if (const float* data = row->float32_data()) {
    // Share the cache's memory: the context keeps the row alive as long as the tensor.
    // A context with a plain function, not a std::function deleter, saves a heap block
    // per answer (hosts free answers on their own threads, where each costs a lock).
    return at::for_blob(const_cast<float*>(data), {vocab})
        .context(new cache::row_ptr(row),
                 [](void* keep) { delete static_cast<cache::row_ptr*>(keep); })
        .options(at::TensorOptions(at::kFloat))
        .make_tensor();
  }
  auto out = at::empty({vocab}, at::kFloat);
  row->decode(out.data_ptr<float>());
  return out;
}

} // namespace canopy
