#pragma once
// The API: routes each HTTP request to its handler. Requests that need the engine's
// queries (logprobs, next_byte, sample, completions, cache) become gateway jobs, answered
// when the gateway's `done` runs (JSON, the binary row format or server-sent events, with
// Server-Timing); the rest (health, model, models, vocabulary, metrics, tokenize,
// detokenize, adapters) are answered at once from the engine's own thread-safe methods
// and answers prepared at start. Unknown paths get 404, known paths with the wrong method
// 405.
// Thread contract: handle() and cancel() from any number of threads at once (the
// transport's I/O threads and its handler threads); the router holds no mutable state
// of its own beyond what it was given.

#include <canopy/engine.hpp>
#include <canopy/server/api/api_requests.hpp>
#include <canopy/server/api/gateway_actor.hpp>
#include <canopy/server/api/row_encoding.hpp>
#include <canopy/server/openai/completion_response.hpp>
#include <canopy/server/server_metrics.hpp>
#include <canopy/server/server_options.hpp>
#include <canopy/server/transport/byte_budget.hpp>
#include <canopy/server/transport/http_message.hpp>

#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace canopy::server {

class api_router : public request_handler {
public:
  /// `gateways` must not be empty; `engine` and the gateways outlive the router.
  api_router(canopy::engine& engine, std::vector<gateway_actor> gateways,
             std::shared_ptr<server_metrics> metrics, const server_options& options);

  void handle(request_id id, http_request request, respond_fn respond) override;
  void cancel(request_id id) override;

private:
  void dispatch(request_id id, http_request& request, respond_fn& respond);
  const gateway_actor& gateway_of(request_id id) const;
  void logprobs(request_id id, const http_request& request, respond_fn respond);
  void sample(request_id id, const http_request& request, respond_fn respond);
  /// POST /v1/next_byte (api_router_next_byte.cpp).
  void next_byte(request_id id, const http_request& request, respond_fn respond);
  void cache_kv(request_id id, const http_request& request, respond_fn respond);
  /// POST /v1/completions (api_router_completions.cpp): with echo and logprobs, first
  /// a job for the prompts' rows, then a sample job for the completions.
  void completions(request_id id, const http_request& request, respond_fn respond);
  http_response models() const;
  /// How the model's tokens read (needs a tokenizer).
  token_texts texts() const {
    return {engine_.byte_vocab(), engine_.special_token_texts()};
  }
  void cache_clear(const http_request& request, respond_fn respond);
  /// POST /v1/cache/tree (api_router_cache_tree.cpp): the caller's cache around a
  /// prefix, for people to read.
  void cache_tree(request_id id, const http_request& request, respond_fn respond);
  /// POST /v1/adapters and /v1/adapters/remove (api_router_adapters.cpp): load or
  /// unload a LoRA adapter; only on a server with bearer tokens, since loading reads a
  /// directory of the server's machine.
  http_response adapters(const http_request& request, bool remove) const;
  http_response tokenize(const http_request& request) const;
  http_response detokenize(const http_request& request) const;
  http_response metrics() const;
  /// Holds an answer's bytes against the answer budget before it is computed, or the
  /// refusal: 413 past max_answer_bytes, 503 when the budget has no room.
  std::variant<byte_reservation, http_response>
  reserve_answer(const answer_shape& shape, const row_format& format, bool binary) const;
  /// The same for an answer of `encoded` bytes at most, made of `rows` full rows, whose
  /// job holds `queries` engine queries of `query_tokens` tokens at most at once.
  std::variant<byte_reservation, http_response>
  reserve_bytes(std::size_t encoded, std::size_t rows, std::size_t queries,
                std::size_t query_tokens) const;
  /// Holds a sample's or completion's `tokens` to generate (prompts x n x max_tokens)
  /// against the generation budget, or the refusal: 400 past max_generated_tokens,
  /// 503 when the budget has no room.
  std::variant<byte_reservation, http_response>
  reserve_generation(std::size_t tokens) const;
  /// Token ids of a sequence given as ids or text; an error names sequence `index`.
  parsed<cache::token_seq> resolve(const sequence_input& input) const;

  canopy::engine& engine_;
  std::vector<gateway_actor> gateways_;
  std::shared_ptr<server_metrics> metrics_;
  request_limits limits_;
  std::size_t max_rows_;
  std::size_t max_answer_bytes_;
  std::shared_ptr<byte_budget> answers_; // answers being computed or written
  std::size_t max_generated_tokens_;
  std::shared_ptr<byte_budget> generation_; // counts tokens: generation in flight
  std::string vocab_body_;  // GET /v1/vocab, fixed at start ("" without a tokenizer)
  std::string merges_body_; // GET /v1/tokenizer/merges, likewise
  std::string chat_templates_body_;     // GET /v1/tokenizer/chat_templates, likewise
  std::string model_id_;                // the OpenAI routes' model id
  std::int64_t started_;                // Unix seconds at start (/v1/models' "created")
  std::size_t longest_token_bytes_ = 0; // of the byte vocabulary (answer size bounds)
  bool authenticated_;                  // the server has bearer tokens
};

} // namespace canopy::server
