#pragma once
// The embedding API. An engine answers "what are the next-token log-probs after this
// token sequence?" for many concurrent callers, with a token-trie cache (rows and
// per-token KV reuse), duplicate merging, batching and one worker per device.
//
//   canopy::engine lm{canopy::engine_config::from_json(R"({"vocab_size": 512})")};
//   at::Tensor logprobs = lm.next_token_logprobs_sync({1, 403, 407}); // [vocab] float32
//
// Method names and semantics follow genlm-backend's AsyncLM. Results are float32
// [vocab] CPU tensors; when rows are stored as float32 they share the cache's memory
// (no copy per hit), so treat them as read-only. Errors are canopy::error (a code and
// a message naming what is wrong), thrown by the sync methods and carried by futures.
//
// Two forms: an engine that owns its actor system, and one that spawns its actors in
// a host's existing caf::actor_system (which must have called
// canopy::messages::add_message_types on its config); handle() is the typed actor
// a host actor talks to.
//
// Thread contract: every method may be called from any thread concurrently; the
// callback overloads run the callback on an actor thread (keep it short, never block
// on another engine call inside it). Destroying the engine answers every query still
// waiting with errc::shutting_down.

#include <canopy/backends/tokenizers/chat_template.hpp>
#include <canopy/backends/tokenizers/next_byte.hpp>
#include <canopy/backends/tokenizers/tokenizer.hpp>
#include <canopy/engine_config.hpp>
#include <canopy/engine_stats.hpp>
#include <canopy/error.hpp>
#include <canopy/messages/actor_interfaces.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace caf {
class actor_system;
}

namespace canopy {

using token_seq = std::vector<std::int32_t>;

/// Per-query options.
struct query_options {
  std::int32_t priority = 0;     // priority eviction policy: higher stays cached longer
  double timeout_ms = 0;         // 0: the engine's query_timeout_ms
  std::string cache_partition{}; // "": the shared cache. Queries of one partition share
                                 // cached rows, KV and computations only with each
                                 // other (a tenant, a caller's cache_salt), so nobody
                                 // learns from timing what another partition asked.
                                 // At most messages::max_partition_bytes, no NUL.
  std::string adapter{};         // the LoRA adapter (add_adapter's name) it is computed
                                 // under; "": the base model. Rows and KV are never
                                 // shared across adapters, nor between an adapter and
                                 // the base.
};

/// A query's outcome for the callback overloads: the row, or the error.
using logprobs_result = std::variant<at::Tensor, canopy::error>;
using logprobs_callback = std::function<void(logprobs_result)>;
/// A next-byte call's outcome for the callback overload.
using next_byte_result = std::variant<backends::next_byte_distribution, canopy::error>;
using next_byte_callback = std::function<void(next_byte_result)>;

class engine {
public:
  /// Starts an engine with its own actor system. Throws canopy::error on a bad config.
  explicit engine(engine_config config = {});
  /// Spawns the engine's actors inside a host's actor system.
  engine(caf::actor_system& host, engine_config config);
  ~engine();
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  std::future<at::Tensor> next_token_logprobs(token_seq tokens,
                                              query_options options = {});
  void next_token_logprobs(token_seq tokens, logprobs_callback callback,
                           query_options options = {});
  at::Tensor next_token_logprobs_sync(token_seq tokens, query_options options = {});
  /// [B, vocab]: row b is the distribution after batch[b].
  at::Tensor batch_next_token_logprobs(const std::vector<token_seq>& batch,
                                       const query_options& options = {});
  /// The reference path: no cache, no batching, no KV kept.
  at::Tensor next_token_logprobs_uncached(token_seq tokens);

  /// The distribution over the next byte after `tokens` and `prefix`, the bytes of a
  /// token being spelled (backends/tokenizers/next_byte.hpp has the contract; EOS is
  /// eos_token_ids()). It comes from the sequence's row, found or computed as
  /// next_token_logprobs does (the same options, cache and batching), and the masses
  /// the cache keeps beside that row: a repeated call costs neither a pass nor a walk
  /// over the vocabulary. errc::no_tokenizer without a tokenizer.
  std::future<backends::next_byte_distribution>
  next_byte_logprobs(token_seq tokens, std::string prefix = {},
                     backends::byte_reduce reduce = backends::byte_reduce::sum,
                     query_options options = {});
  void next_byte_logprobs(token_seq tokens, std::string prefix,
                          backends::byte_reduce reduce, next_byte_callback callback,
                          query_options options = {});

  /// Extends `prompt` by up to max_tokens tokens, stopping after an EOS id. Temperature
  /// 0 takes the argmax; otherwise draws from softmax(logprobs / temperature) with a
  /// random stream derived from seed.
  token_seq sample(const token_seq& prompt, std::size_t max_tokens,
                   const std::vector<std::int32_t>& eos_token_ids = {},
                   double temperature = 1.0, std::uint64_t seed = 0,
                   const query_options& options = {});
  /// sample() for every prompt, stepping them together; prompt i draws from its own
  /// stream derived from (seed, i). Returns only the generated tokens of each.
  std::vector<token_seq> batch_sample(const std::vector<token_seq>& prompts,
                                      std::size_t max_tokens,
                                      const std::vector<std::int32_t>& eos_token_ids = {},
                                      double temperature = 1.0, std::uint64_t seed = 0,
                                      const query_options& options = {});

  /// Computes and keeps the KV (and the row) of prompt, as genlm-backend's cache_kv.
  void cache_kv(const token_seq& prompt, const query_options& options = {});
  /// Drops every cached row and KV entry not in use, in the cache partitions whose
  /// names start with `partitions` (by default all, the shared one included).
  void clear_cache(std::string_view partitions = {});
  /// Drops every KV entry not in use, in those partitions; rows stay.
  void clear_kv_cache(std::string_view partitions = {});
  /// Part of the cache for people to read (cache/trie_view.hpp): the node of `prefix`
  /// (empty: the root) in options' partition, under its adapter, and the nodes within
  /// `limits` below it, each with its row's bytes, its KV per worker and tier, hits,
  /// locks and children; no nodes when the prefix is not cached. It walks every node
  /// of the trie once, on the cache's thread: for inspection, not for every query.
  /// Throws errc::unknown_adapter, or what a query's tokens and scope would.
  cache::trie_view cache_view(const token_seq& prefix,
                              const cache::trie_view_limits& limits = {},
                              const query_options& options = {});
  /// Answers every waiting query with errc::cancelled.
  void reset_async_queries();

  /// Loads the PEFT LoRA adapter in directory `dir` (lora_adapter.hpp says what is
  /// accepted) as `name` on every worker, and on each that joins later; queries name it
  /// in query_options::adapter. Throws canopy::error: errc::invalid_request when the
  /// name is invalid (messages::adapter_name_problem) or taken, the directory is no
  /// adapter of this model, or it does not fit adapter_budget_bytes (each says why).
  void add_adapter(const std::string& name, const std::string& dir);
  /// Unloads adapter `name`: queries naming it get errc::unknown_adapter from now on,
  /// those still waiting too, and its cached rows and KV are dropped (those in use
  /// when they are no longer). A name loaded again later is a new adapter, never
  /// served from the old one's cache. Throws errc::unknown_adapter when none is loaded.
  void remove_adapter(const std::string& name);
  /// The names of the adapters loaded, in order.
  std::vector<std::string> adapters() const;

  /// Text to ids with the model's tokenizer, in its own convention (llama2.c: BOS and
  /// the dummy-prefix space; GPT-2: nothing added; tokenizer.json: its post-processor's
  /// special tokens); add_special_tokens false leaves out what the convention adds
  /// around the text. errc::no_tokenizer without one.
  token_seq tokenize(std::string_view text, bool add_special_tokens = true) const;
  /// The exact bytes of ids (errc::token_out_of_range for an id past the vocabulary).
  std::string detokenize(const token_seq& ids) const;
  /// For every id in [0, vocab_size()), the bytes it stands for; std::nullopt for
  /// control tokens and for head rows past the tokenizer's vocabulary
  /// (genlm-backend's byte_vocab). errc::no_tokenizer without a tokenizer.
  const std::vector<std::optional<std::string>>& byte_vocab() const;
  /// [vocab_size()]: for each id byte_vocab() has no bytes for, the text the tokenizer
  /// spells it with ("</s>", "<|eot_id|>"), when it names it (genlm-backend's byte
  /// vocabulary holds special tokens so). errc::no_tokenizer without a tokenizer.
  const std::vector<std::optional<std::string>>& special_token_texts() const;
  /// The tokenizer's byte-pair merges, first applied first; empty when it merges
  /// otherwise (llama2.c, SentencePiece). errc::no_tokenizer without a tokenizer.
  std::vector<backends::merge_rule> merge_rules() const;
  /// The tokenizer's chat templates (Jinja source, by name; a lone one is "default"),
  /// as transformers finds them beside it; empty when it has none. Canopy does not
  /// render them (the Python client's apply_chat_template does, with Jinja2).
  /// errc::no_tokenizer without a tokenizer.
  const backends::chat_templates& chat_templates() const;
  bool has_tokenizer() const;
  /// The model's BOS id, and its EOS ids (generate's stop ids first), as its files say:
  /// config.json, generation_config.json, tokenizer_config.json, a .bin's format. None
  /// for the mock and the built-in model.
  std::optional<std::int32_t> bos_token_id() const;
  const std::vector<std::int32_t>& eos_token_ids() const;

  /// Rows of the model's output head: every row has this many entries. A tokenizer
  /// may have fewer ids (padded heads), never more.
  std::int64_t vocab_size() const;
  const backends::model_info& model() const;
  const engine_config& config() const;
  engine_stats stats() const;
  /// The typed actor a host actor sends queries to.
  messages::engine_actor handle() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Converts a row of a reply into the API's tensor (zero-copy for float32 storage).
at::Tensor to_tensor(const messages::shared_logprobs& row);

} // namespace canopy
