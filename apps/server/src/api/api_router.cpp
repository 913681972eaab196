#include <canopy/server/api/api_router.hpp>

#include "api/route_helpers.hpp"

#include <canopy/backends/tokenizers/hex_bytes.hpp>
#include <canopy/server/api/cache_partition.hpp>
#include <canopy/server/api/prometheus_text.hpp>
#include <canopy/server/api_paths.hpp>

#include <caf/send.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>

namespace canopy::server {

namespace {

/// One route of the API: its path, its method and what answers it.
struct route_entry {
  std::string_view path;
  std::string_view method;
  void (*run)(api_router&, request_id, http_request&, respond_fn&);
};

/// Whether the routes are api_paths, each once (with as many routes as paths).
template <std::size_t N>
constexpr bool every_route_is_an_api_path(const std::array<route_entry, N>& routes) {
  for (std::size_t i = 0; i < N; ++i) {
    if (!is_api_path(routes[i].path))
      return false;
    for (std::size_t j = 0; j < i; ++j)
      if (routes[j].path == routes[i].path)
        return false;
  }
  return N == api_paths.size();
}

using json = nlohmann::json;
using namespace detail;

std::string_view path_of(std::string_view target) {
  return target.substr(0, target.find('?'));
}

bool wants_binary(const http_request& request) {
  return request.accept.find("application/octet-stream") != std::string::npos;
}

/// The model's architecture, and the name of the file or folder it was read from ("" for
/// none), as backends::public_name gives them.
std::pair<std::string, std::string> model_names(const canopy::engine& engine) {
  const auto name = backends::public_name(engine.model());
  const auto space = name.find(' ');
  if (space == std::string::npos)
    return {name, {}};
  return {name.substr(0, space), name.substr(space + 1)};
}

std::string model_body(const canopy::engine& engine) {
  const auto& info = engine.model();
  const auto [architecture, source] = model_names(engine);
  const auto& config = engine.config();
  // The workers serving now: in-process ones by device, remote ones as node/device.
  json devices = json::array();
  for (const auto& w : engine.stats().workers)
    if (w.state != "lost")
      devices.push_back(w.node == "local" ? w.device : w.node + "/" + w.device);
  return dump({{"name", source.empty() ? architecture : architecture + " " + source},
               {"architecture", architecture},
               {"backend", config.backend},
               {"vocab_size", info.vocab_size},
               {"context_length", info.context_length},
               {"dtype", config.backend == "mock" ? "float32" : config.dtype},
               {"weight_dtype",
                info.weight_dtype.empty() ? json(nullptr) : json(info.weight_dtype)},
               {"weight_bytes", info.weight_bytes},
               {"logprob_dtype", config.logprob_dtype},
               {"kv_dtype", info.kv_dtype.empty() ? json(nullptr) : json(info.kv_dtype)},
               {"devices", std::move(devices)},
               {"tokenizer", engine.has_tokenizer()},
               {"bos_token_id",
                engine.bos_token_id() ? json(*engine.bos_token_id()) : json(nullptr)},
               {"eos_token_ids", engine.eos_token_ids()}});
}

std::string vocab_body(const canopy::engine& engine) {
  if (!engine.has_tokenizer())
    return {};
  json vocab = json::array();
  for (const auto& bytes : engine.byte_vocab())
    vocab.push_back(bytes ? json(backends::hex_bytes(*bytes)) : json(nullptr));
  // How the tokenizer spells the ids that have no bytes ("</s>"), by id.
  json special = json::object();
  const auto& texts = engine.special_token_texts();
  for (std::size_t id = 0; id < texts.size(); ++id)
    if (texts[id])
      special[std::to_string(id)] = *texts[id];
  return dump({{"vocab", std::move(vocab)}, {"special_tokens", std::move(special)}});
}

/// GET /v1/tokenizer/merges: the byte-pair merges as [left, right, result] ids, first
/// applied first ([] when the tokenizer merges otherwise); "" without a tokenizer.
std::string merges_body(const canopy::engine& engine) {
  if (!engine.has_tokenizer())
    return {};
  json merges = json::array();
  for (const auto& rule : engine.merge_rules())
    merges.push_back(json::array({rule.left, rule.right, rule.result}));
  return dump({{"merges", std::move(merges)}});
}

/// GET /v1/tokenizer/chat_templates: {"chat_templates": {name: Jinja source}} ({} when
/// the tokenizer has none); "" without a tokenizer.
std::string chat_templates_body(const canopy::engine& engine) {
  if (!engine.has_tokenizer())
    return {};
  return dump({{"chat_templates", engine.chat_templates()}});
}

/// A tokenizer document fixed at start-up; `body` is "" when the model has no tokenizer.
void answer_document(const std::string& body, const std::string& what,
                     respond_fn& respond) {
  if (body.empty())
    return respond(to_response(from_engine_error(
        messages::errc::no_tokenizer, "the model has no tokenizer, so no " + what)));
  http_response response;
  response.body = body;
  respond(std::move(response));
}

http_response ok(const gateway_reply&) {
  return json_response({{"ok", true}});
}

} // namespace

api_router::api_router(canopy::engine& engine, std::vector<gateway_actor> gateways,
                       std::shared_ptr<server_metrics> metrics,
                       const server_options& options)
    : engine_(engine), gateways_(std::move(gateways)),
      metrics_(std::move(metrics)), limits_{options.max_batch, options.max_sample_tokens},
      max_rows_(options.max_rows), max_answer_bytes_(options.max_answer_bytes),
      answers_(std::make_shared<byte_budget>(options.answer_budget_bytes)),
      max_generated_tokens_(options.max_generated_tokens),
      generation_(std::make_shared<byte_budget>(options.generation_budget_tokens)),
      vocab_body_(vocab_body(engine)), merges_body_(merges_body(engine)),
      chat_templates_body_(chat_templates_body(engine)),
      model_id_(options.served_model_name),
      started_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      authenticated_(!options.auth_tokens.empty()) {
  metrics_->watch_budget("answers", "bytes", answers_);
  metrics_->watch_budget("generation", "tokens", generation_);
  if (model_id_.empty()) {
    auto [architecture, source] = model_names(engine);
    model_id_ = source.empty() ? architecture : source;
  }
  if (!engine.has_tokenizer())
    return;
  for (const auto& bytes : engine.byte_vocab())
    longest_token_bytes_ = std::max(longest_token_bytes_, bytes ? bytes->size() : 0);
  for (const auto& text : engine.special_token_texts())
    longest_token_bytes_ = std::max(longest_token_bytes_, text ? text->size() : 0);
}

const gateway_actor& api_router::gateway_of(request_id id) const {
  return gateways_[id % gateways_.size()];
}

void api_router::handle(request_id id, http_request request, respond_fn respond) {
  // The transport's I/O threads must not die of a handler's exception (out of memory
  // while tokenizing, say): it becomes a 500, if the answer is still ours to give.
  try {
    dispatch(id, request, respond);
  } catch (const std::exception& e) {
    if (respond)
      respond(to_response({500, "internal_error", e.what()}));
  }
}

void api_router::dispatch(request_id id, http_request& request, respond_fn& respond) {
  static constexpr std::array<route_entry, api_paths.size()> routes{{
      {"/v1/logprobs", "POST",
       [](api_router& r, request_id id, http_request& q, respond_fn& a) {
         r.logprobs(id, q, std::move(a));
       }},
      {"/v1/next_byte", "POST",
       [](api_router& r, request_id id, http_request& q, respond_fn& a) {
         r.next_byte(id, q, std::move(a));
       }},
      {"/v1/sample", "POST",
       [](api_router& r, request_id id, http_request& q, respond_fn& a) {
         r.sample(id, q, std::move(a));
       }},
      {"/v1/completions", "POST",
       [](api_router& r, request_id id, http_request& q, respond_fn& a) {
         r.completions(id, q, std::move(a));
       }},
      {"/v1/models", "GET",
       [](api_router& r, request_id, http_request&, respond_fn& a) { a(r.models()); }},
      {"/v1/cache/kv", "POST",
       [](api_router& r, request_id id, http_request& q, respond_fn& a) {
         r.cache_kv(id, q, std::move(a));
       }},
      {"/v1/cache/clear", "POST",
       [](api_router& r, request_id, http_request& q, respond_fn& a) {
         r.cache_clear(q, std::move(a));
       }},
      {"/v1/cache/tree", "POST",
       [](api_router& r, request_id id, http_request& q, respond_fn& a) {
         r.cache_tree(id, q, std::move(a));
       }},
      {"/v1/tokenize", "POST",
       [](api_router& r, request_id, http_request& q, respond_fn& a) {
         a(r.tokenize(q));
       }},
      {"/v1/detokenize", "POST",
       [](api_router& r, request_id, http_request& q, respond_fn& a) {
         a(r.detokenize(q));
       }},
      {"/v1/vocab", "GET",
       [](api_router& r, request_id, http_request&, respond_fn& a) {
         answer_document(r.vocab_body_, "byte vocabulary", a);
       }},
      {"/v1/tokenizer/merges", "GET",
       [](api_router& r, request_id, http_request&, respond_fn& a) {
         answer_document(r.merges_body_, "merges", a);
       }},
      {"/v1/tokenizer/chat_templates", "GET",
       [](api_router& r, request_id, http_request&, respond_fn& a) {
         answer_document(r.chat_templates_body_, "chat templates", a);
       }},
      {"/v1/model", "GET",
       [](api_router& r, request_id, http_request&, respond_fn& a) {
         // Built per request: which workers serve changes while the server runs.
         http_response response;
         response.body = model_body(r.engine_);
         a(std::move(response));
       }},
      {"/healthz", "GET",
       [](api_router&, request_id, http_request&, respond_fn& a) {
         a(json_response({{"status", "ok"}}));
       }},
      {"/metrics", "GET",
       [](api_router& r, request_id, http_request&, respond_fn& a) { a(r.metrics()); }},
      {"/v1/adapters", "POST",
       [](api_router& r, request_id, http_request& q, respond_fn& a) {
         a(r.adapters(q, false));
       }},
      {"/v1/adapters/remove", "POST",
       [](api_router& r, request_id, http_request& q, respond_fn& a) {
         a(r.adapters(q, true));
       }},
  }};
  static_assert(every_route_is_an_api_path(routes),
                "a route missing from api_paths.hpp would be counted as \"other\"");
  auto path = path_of(request.target);
  for (const auto& route : routes) {
    if (route.path != path)
      continue;
    if (request.method != route.method) {
      auto response =
          to_response({405, "method_not_allowed",
                       request.method + " is not allowed on " + std::string(path) +
                           "; use " + std::string(route.method)});
      response.headers.emplace_back("Allow", std::string(route.method));
      return respond(std::move(response));
    }
    return route.run(*this, id, request, respond);
  }
  respond(to_response({404, "not_found", "no such route: " + std::string(path)}));
}

void api_router::cancel(request_id id) {
  caf::anon_send(gateway_of(id), messages::cancel_atom::value, id);
}

parsed<cache::token_seq> api_router::resolve(const sequence_input& input) const {
  if (input.tokens)
    return *input.tokens;
  try {
    return engine_.tokenize(*input.text);
  } catch (const canopy::error& e) {
    return engine_error(e);
  }
}

void api_router::logprobs(request_id id, const http_request& request,
                          respond_fn respond) {
  auto result = parse_logprobs_request(request.body, limits_);
  auto* req = parsed_or_respond(result, respond);
  if (!req)
    return;
  logprobs_job job;
  std::size_t rows = 0;
  for (const auto& input : req->sequences) {
    auto tokens = resolve(input);
    auto* ids = parsed_or_respond(tokens, respond);
    if (!ids)
      return;
    rows += req->all_positions ? ids->size() : 1;
    job.sequences.push_back(std::move(*ids));
  }
  if (rows > max_rows_)
    return respond(
        to_response({400, "batch_too_large",
                     "the request asks for " + std::to_string(rows) +
                         " rows, more than the limit of " + std::to_string(max_rows_)}));
  job.all_positions = req->all_positions;
  job.priority = req->priority;
  job.deadline_ms = req->deadline_ms;
  job.scope = {cache_partition(request.tenant, req->cache_salt), req->adapter};
  row_format format{req->batch, req->all_positions, req->top_k, req->dtype};
  const bool binary = wants_binary(request);
  answer_shape shape{job.sequences.size(), 0, rows,
                     static_cast<std::size_t>(engine_.vocab_size())};
  for (const auto& s : job.sequences) {
    shape.tokens += s.size();
    shape.longest = std::max(shape.longest, s.size());
  }
  shape.longest += scope_tokens(job.scope);
  auto reserved = reserve_answer(shape, format, binary);
  if (auto* refusal = std::get_if<http_response>(&reserved))
    return respond(std::move(*refusal));
  job.done = answer_with(
      std::move(respond),
      [format, binary,
       held = std::make_shared<byte_reservation>(
           std::move(std::get<byte_reservation>(reserved)))](const gateway_reply& reply) {
        http_response response;
        if (binary) {
          response.content_type = "application/octet-stream";
          response.body = encode_binary(reply.answers, format);
        } else {
          response.body = encode_json(reply.answers, format);
        }
        response.reserved = held; // given back once the answer is written
        return response;
      });
  caf::anon_send(gateway_of(id), messages::logprobs_atom::value, id, std::move(job));
}

std::variant<byte_reservation, http_response>
api_router::reserve_answer(const answer_shape& shape, const row_format& format,
                           bool binary) const {
  return reserve_bytes(encoded_size_bound(shape, format, binary), shape.rows,
                       std::min(shape.rows, rows_in_flight_per_job), shape.longest);
}

std::variant<byte_reservation, http_response>
api_router::reserve_bytes(std::size_t encoded, std::size_t rows, std::size_t queries,
                          std::size_t query_tokens) const {
  if (encoded > max_answer_bytes_)
    return to_response({413, "answer_too_large",
                        "the answer could take " + std::to_string(encoded) +
                            " bytes, more than the limit of " +
                            std::to_string(max_answer_bytes_) +
                            " (--max-answer-bytes); ask for top_k, the binary format "
                            "(float16) or fewer rows"});
  // While it is encoded, the rows it is made of are held as well; while it is computed,
  // its queries in flight (each carries its tokens: Note [rows in flight]).
  const auto held = encoded + 4 * rows * static_cast<std::size_t>(engine_.vocab_size()) +
                    queries * query_tokens * query_bytes_per_token;
  auto reservation = answers_->reservation();
  if (!reservation.resize(held))
    return budget_full(*answers_, held, "answers being computed or written",
                       "--answer-budget-bytes");
  return reservation;
}

std::variant<byte_reservation, http_response>
api_router::reserve_generation(std::size_t tokens) const {
  if (tokens > max_generated_tokens_)
    return to_response(
        {400, "generation_too_large",
         "the request asks to generate " + std::to_string(tokens) +
             " tokens (prompts x n x max_tokens), more than the limit of " +
             std::to_string(max_generated_tokens_) + " (--max-generated-tokens)"});
  auto reservation = generation_->reservation();
  if (!reservation.resize(tokens))
    return budget_full(*generation_, tokens, "generations in flight",
                       "--generation-budget-tokens", "tokens");
  return reservation;
}

void api_router::sample(request_id id, const http_request& request, respond_fn respond) {
  auto result = parse_sample_request(request.body, limits_);
  auto* req = parsed_or_respond(result, respond);
  if (!req)
    return;
  sample_job job;
  for (const auto& input : req->prompts) {
    auto tokens = resolve(input);
    auto* ids = parsed_or_respond(tokens, respond);
    if (!ids)
      return;
    job.prompts.push_back(std::move(*ids));
  }
  auto generation = reserve_generation(job.prompts.size() * req->max_tokens);
  if (auto* refusal = std::get_if<http_response>(&generation))
    return respond(std::move(*refusal));
  job.max_tokens = req->max_tokens;
  job.eos_token_ids = req->eos_token_ids;
  job.temperature = req->temperature;
  job.seed = req->seed;
  job.scope = {cache_partition(request.tenant, req->cache_salt), req->adapter};
  job.done = answer_with(
      std::move(respond),
      [this, batch = req->batch,
       held = std::make_shared<byte_reservation>(std::move(
           std::get<byte_reservation>(generation)))](const gateway_reply& reply) {
        json results = json::array();
        for (const auto& generated : reply.generated) {
          json one = {{"tokens", generated}};
          if (engine_.has_tokenizer()) {
            try {
              one["text"] = engine_.detokenize(generated);
            } catch (const canopy::error&) {
              // ids past the tokenizer (a padded head): the ids alone stand
            }
          }
          results.push_back(std::move(one));
        }
        return json_response(batch ? json{{"results", std::move(results)}}
                                   : std::move(results.at(0)));
      });
  caf::anon_send(gateway_of(id), sample_atom::value, id, std::move(job));
}

void api_router::cache_kv(request_id id, const http_request& request,
                          respond_fn respond) {
  auto result = parse_cache_kv_request(request.body);
  auto* req = parsed_or_respond(result, respond);
  if (!req)
    return;
  auto tokens = resolve(req->prompt);
  auto* ids = parsed_or_respond(tokens, respond);
  if (!ids)
    return;
  cache_kv_job job{std::move(*ids),
                   {cache_partition(request.tenant, req->cache_salt), req->adapter},
                   answer_with(std::move(respond), ok)};
  caf::anon_send(gateway_of(id), cache_kv_atom::value, id, std::move(job));
}

void api_router::cache_clear(const http_request& request, respond_fn respond) {
  auto result = parse_cache_clear_request(request.body);
  auto* req = parsed_or_respond(result, respond);
  if (!req)
    return;
  // A tenant clears its own partitions only; without tenants, every one.
  clear_job job{req->kv_only, tenant_partitions(request.tenant),
                answer_with(std::move(respond), ok)};
  caf::anon_send(gateways_.front(), messages::clear_atom::value, std::move(job));
}

http_response api_router::tokenize(const http_request& request) const {
  auto result = parse_tokenize_request(request.body);
  if (auto* error = std::get_if<api_error>(&result))
    return to_response(*error);
  try {
    const auto& req = std::get<tokenize_request>(result);
    return json_response(
        {{"tokens", engine_.tokenize(req.text, req.add_special_tokens)}});
  } catch (const canopy::error& e) {
    return to_response(engine_error(e));
  }
}

http_response api_router::detokenize(const http_request& request) const {
  auto result = parse_detokenize_request(request.body);
  if (auto* error = std::get_if<api_error>(&result))
    return to_response(*error);
  try {
    auto bytes = engine_.detokenize(std::get<detokenize_request>(result).tokens);
    return json_response({{"text", bytes}, {"hex", backends::hex_bytes(bytes)}});
  } catch (const canopy::error& e) {
    return to_response(engine_error(e));
  }
}

http_response api_router::metrics() const {
  http_response response;
  response.content_type = prometheus_content_type;
  response.body = prometheus_text(engine_.stats(), metrics_->snapshot());
  return response;
}

} // namespace canopy::server
