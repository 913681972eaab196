// POST /v1/completions and GET /v1/models: OpenAI's legacy completions API over the
// engine's queries (completion_request.hpp, completion_response.hpp).

#include <canopy/server/api/api_router.hpp>
#include <canopy/server/api/cache_partition.hpp>
#include <canopy/server/openai/completion_request.hpp>
#include <canopy/server/openai/completion_response.hpp>

#include "api/route_helpers.hpp"

#include <caf/send.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

namespace canopy::server {

namespace {

using json = nlohmann::json;
using namespace detail;

/// Bytes a token can take in a completion's JSON: its spelling (at most 6 bytes of
/// escape per byte) in tokens and in each alternative, with their numbers and offset.
std::size_t json_bytes_per_token(std::size_t longest_token_bytes,
                                 std::size_t alternatives) {
  return (alternatives + 2) * (6 * longest_token_bytes + 48);
}

/// A completion in progress, shared by its stages and the gateway's callbacks: the
/// request and its prompts, then each choice's pieces as its tokens come. The first
/// stage (echo with logprobs) scores the prompts; the second samples, and gives each
/// choice's pieces as they become final: as server-sent events (stream), or kept for
/// one JSON answer at the end. From the second stage on, only the gateway's thread
/// touches it.
struct completion_run {
  completion_run(completion_request r, token_texts t) : request(std::move(r)), texts(t) {}

  completion_request request;
  token_texts texts;
  query_scope scope; // its queries' partition and adapter (the model it named)
  std::vector<cache::token_seq> prompts;
  std::size_t prompt_tokens = 0;                       // of every prompt, once each
  std::vector<std::vector<token_score>> prompt_scores; // [prompts], echo with logprobs
  double prompt_engine_ms = 0; // the first stage's (Server-Timing)
  nlohmann::json head;         // what every answer chunk carries
  respond_fn respond;
  std::shared_ptr<byte_reservation> held;     // the answer's bytes, till written
  byte_reservation generation;                // its tokens to generate, till it ends
  std::vector<choice_pieces> choices;         // [prompts x n]
  std::vector<std::vector<token_piece>> kept; // [choices], not streamed: every piece
  std::vector<const char*> finish;            // [choices]: null while it runs
  std::shared_ptr<body_stream> stream;        // once the stream's head has gone
};

/// Scores each prompt token after the first by the row before it.
std::vector<std::vector<token_score>>
score_prompts(const std::vector<scored_sequence>& answers, std::size_t alternatives) {
  std::vector<std::vector<token_score>> scores(answers.size());
  for (std::size_t s = 0; s < answers.size(); ++s) {
    const auto& tokens = answers[s].tokens;
    for (std::size_t i = 1; i < tokens.size(); ++i)
      scores[s].push_back(score_token(*answers[s].rows[i - 1], tokens[i], alternatives));
  }
  return scores;
}

/// Sends `text` on the stream; the first text sends the stream's head with it, so an
/// error before any token still gets its own status.
void emit(completion_run& run, std::string text) {
  if (run.stream)
    return run.stream->push(std::move(text));
  run.stream = std::make_shared<body_stream>();
  http_response head;
  head.content_type = "text/event-stream";
  head.headers.emplace_back("Cache-Control", "no-cache");
  head.body = std::move(text);
  head.stream = run.stream;
  head.stream_cut = "data: " +
                    dump({{"error",
                           {{"code", "shutting_down"},
                            {"message", "the server stopped before this completion "
                                        "ended"},
                            {"type", "server_error"}}}}) +
                    "\n\n";
  head.reserved = run.held;
  run.respond(std::move(head));
}

/// One server-sent event: a chunk with `choices`, and `usage` unless null.
void emit_chunk(completion_run& run, json choices, json usage) {
  json chunk = run.head;
  chunk["choices"] = std::move(choices);
  if (!usage.is_null())
    chunk["usage"] = std::move(usage);
  emit(run, "data: " + dump(chunk) + "\n\n");
}

/// Gives choice c's final `pieces` and, when it has ended, its finish reason.
void give(completion_run& run, std::size_t c, std::vector<token_piece> pieces,
          const char* finish) {
  const bool logprobs = run.request.logprobs.has_value();
  run.finish[c] = finish;
  if (!run.request.stream) {
    auto& kept = run.kept[c];
    kept.insert(kept.end(), std::make_move_iterator(pieces.begin()),
                std::make_move_iterator(pieces.end()));
    return;
  }
  for (const auto& piece : pieces)
    emit_chunk(run, json::array({chunk_choice(piece, c, logprobs, run.texts)}), nullptr);
  if (finish)
    emit_chunk(run, json::array({finish_chunk_choice(c, finish)}), nullptr);
}

/// A generated token of choice `token.prompt`: true when a stop string ends it.
bool on_token(completion_run& run, const sampled_token& token) {
  const auto c = token.prompt;
  auto& choice = run.choices[c];
  auto pieces =
      choice.add(token.id, token.score ? std::optional(*token.score) : std::nullopt);
  const char* finish = nullptr;
  if (choice.cut() || token.last) {
    auto rest = choice.flush();
    pieces.insert(pieces.end(), std::make_move_iterator(rest.begin()),
                  std::make_move_iterator(rest.end()));
    finish = choice.finish_reason(token.stopped);
  }
  give(run, c, std::move(pieces), finish);
  return choice.cut();
}

/// The sample stage's end: the choices not ended yet end, then the answer (or the
/// stream's usage and [DONE]).
void on_done(completion_run& run, gateway_reply reply) {
  if (reply.error) {
    if (!run.stream)
      return run.respond(to_response(*reply.error));
    // The stream's head has gone: the error is its last event (OpenAI's clients raise
    // it).
    run.stream->push("data: " + to_response(*reply.error).body + "\n\n");
    return run.stream->end();
  }
  std::size_t completion_tokens = 0;
  for (std::size_t c = 0; c < run.choices.size(); ++c) {
    completion_tokens += reply.generated[c].size();
    if (!run.finish[c])
      give(run, c, run.choices[c].flush(),
           run.choices[c].finish_reason(reply.stopped[c]));
  }
  const json usage = {{"prompt_tokens", run.prompt_tokens},
                      {"completion_tokens", completion_tokens},
                      {"total_tokens", run.prompt_tokens + completion_tokens}};
  if (run.request.stream) {
    if (run.request.stream_usage)
      emit_chunk(run, json::array(), usage);
    emit(run, "data: [DONE]\n\n");
    return run.stream->end();
  }
  json choices = json::array();
  for (std::size_t c = 0; c < run.choices.size(); ++c)
    choices.push_back(completion_choice(run.kept[c], c, run.request.logprobs.has_value(),
                                        run.texts, run.finish[c]));
  json body = run.head;
  body["choices"] = std::move(choices);
  body["usage"] = usage;
  auto response = json_response(body);
  add_server_timing(response, reply.engine_ms + run.prompt_engine_ms);
  response.reserved = run.held;
  run.respond(std::move(response));
}

std::string completion_id(request_id id) {
  const auto now = std::chrono::system_clock::now().time_since_epoch().count();
  char text[40];
  std::snprintf(text, sizeof text, "cmpl-%016llx%04llx",
                static_cast<unsigned long long>(now),
                static_cast<unsigned long long>(id & 0xffff));
  return text;
}

} // namespace

http_response api_router::models() const {
  // Each LoRA adapter is a model of its own, whose parent is the served one (as vLLM
  // lists them): completions name it in "model".
  json data = json::array({{{"id", model_id_},
                            {"object", "model"},
                            {"created", started_},
                            {"owned_by", "canopy"}}});
  for (const auto& adapter : engine_.adapters())
    data.push_back({{"id", adapter},
                    {"object", "model"},
                    {"created", started_},
                    {"owned_by", "canopy"},
                    {"parent", model_id_}});
  return json_response({{"object", "list"}, {"data", std::move(data)}});
}

void api_router::completions(request_id id, const http_request& request,
                             respond_fn respond) {
  auto result = parse_completion_request(request.body, limits_);
  auto* req = parsed_or_respond(result, respond);
  if (!req)
    return;
  const auto adapters = engine_.adapters();
  const bool adapted =
      std::find(adapters.begin(), adapters.end(), req->model) != adapters.end();
  if (req->model != model_id_ && !adapted) {
    // Named back, but not whole: a client's 1 MB name is not echoed.
    const auto named =
        req->model.size() <= 80 ? req->model : req->model.substr(0, 80) + "...";
    std::string served = "`" + model_id_ + "`";
    for (const auto& adapter : adapters)
      served += ", `" + adapter + "`";
    return respond(to_response(
        {404, "model_not_found",
         "the model `" + named + "` does not exist; this server serves " + served}));
  }
  if (!engine_.has_tokenizer())
    return respond(to_response(
        from_engine_error(messages::errc::no_tokenizer,
                          "completions need the model's tokenizer, and it has none")));
  auto run = std::make_shared<completion_run>(std::move(*req), texts());
  const auto& r = run->request;
  run->scope = {cache_partition(request.tenant, r.cache_salt),
                r.model == model_id_ ? std::string() : r.model};
  const auto context = static_cast<std::size_t>(engine_.model().context_length);
  for (std::size_t p = 0; p < r.prompts.size(); ++p) {
    auto tokens = resolve(r.prompts[p]);
    auto* ids = parsed_or_respond(tokens, respond);
    if (!ids)
      return;
    if (ids->empty())
      return respond(to_response(
          {400, "empty_sequence", "prompt " + std::to_string(p) + " has no tokens"}));
    if (ids->size() + r.max_tokens > context)
      return respond(to_response(
          {400, "sequence_too_long",
           "this model's maximum context length is " + std::to_string(context) +
               " tokens; prompt " + std::to_string(p) + " has " +
               std::to_string(ids->size()) + " and max_tokens asks for " +
               std::to_string(r.max_tokens) + " more"}));
    // Checked before anything is sent: echo with max_tokens 0 would answer 200 with
    // them, and a stream would have sent its 200 and echo before the engine refused.
    const auto vocab = engine_.vocab_size();
    for (std::size_t i = 0; i < ids->size(); ++i)
      if ((*ids)[i] < 0 || (*ids)[i] >= vocab)
        return respond(to_response({400, "token_out_of_range",
                                    "prompt " + std::to_string(p) + ": token id " +
                                        std::to_string((*ids)[i]) + " at position " +
                                        std::to_string(i) + " is outside [0, " +
                                        std::to_string(vocab) + ")"}));
    run->prompt_tokens += ids->size();
    run->prompts.push_back(std::move(*ids));
  }
  const auto prompt_tokens = run->prompt_tokens;
  const bool logprobs = r.logprobs.has_value();
  const bool prompt_rows = r.echo && logprobs;
  if (prompt_rows && prompt_tokens > max_rows_)
    return respond(
        to_response({400, "batch_too_large",
                     "echo with logprobs asks for " + std::to_string(prompt_tokens) +
                         " rows, more than the limit of " + std::to_string(max_rows_)}));
  // Every choice's tokens, echoed and generated, encoded (as one answer, or as events
  // that each repeat the head); the prompts' rows are held while they are scored.
  const auto choice_tokens =
      (r.echo ? prompt_tokens : 0) + r.prompts.size() * r.max_tokens;
  const auto per_token =
      json_bytes_per_token(longest_token_bytes_, logprobs ? *r.logprobs : 0) +
      (r.stream ? 128 + r.model.size() : 0);
  const auto encoded = 512 + r.n * (choice_tokens + r.prompts.size()) * per_token;
  // In flight at once: a window of the prompts' rows, or a step of every choice.
  std::size_t longest_prompt = 0;
  for (const auto& prompt : run->prompts)
    longest_prompt = std::max(longest_prompt, prompt.size());
  const auto queries =
      std::max(prompt_rows ? std::min(prompt_tokens, rows_in_flight_per_job) : 0,
               r.n * run->prompts.size());
  auto reserved = reserve_bytes(encoded, prompt_rows ? prompt_tokens : 0, queries,
                                longest_prompt + r.max_tokens + scope_tokens(run->scope));
  if (auto* refusal = std::get_if<http_response>(&reserved))
    return respond(std::move(*refusal));
  auto generation = reserve_generation(run->prompts.size() * r.n * r.max_tokens);
  if (auto* refusal = std::get_if<http_response>(&generation))
    return respond(std::move(*refusal));
  run->generation = std::move(std::get<byte_reservation>(generation));
  run->held =
      std::make_shared<byte_reservation>(std::move(std::get<byte_reservation>(reserved)));
  run->respond = std::move(respond);
  run->head = {{"id", completion_id(id)},
               {"object", "text_completion"},
               {"created", std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count()},
               {"model", r.model}};

  // The second stage: every prompt n times, each with its own random stream; each
  // choice starts with its echoed prompt.
  auto sample = [this, id, run](std::optional<api_error> failed) {
    if (failed)
      return run->respond(to_response(*failed));
    const auto& r = run->request;
    sample_job job;
    job.scope = run->scope;
    for (std::size_t p = 0; p < run->prompts.size(); ++p)
      for (std::size_t k = 0; k < r.n; ++k) {
        job.prompts.push_back(run->prompts[p]);
        const auto c = run->choices.size();
        run->choices.emplace_back(r.stop, run->texts);
        run->kept.emplace_back();
        run->finish.push_back(nullptr);
        if (r.echo)
          give(*run, c,
               run->choices[c].echo(run->prompts[p], p < run->prompt_scores.size()
                                                         ? run->prompt_scores[p]
                                                         : std::vector<token_score>{}),
               nullptr);
      }
    job.max_tokens = r.max_tokens;
    job.eos_token_ids = engine_.eos_token_ids();
    job.temperature = r.temperature;
    job.top_p = r.top_p;
    job.seed = r.seed;
    job.top_logprobs = r.logprobs;
    job.on_token = [run](const sampled_token& token) { return on_token(*run, token); };
    job.done = [run](gateway_reply reply) {
      try {
        on_done(*run, std::move(reply));
      } catch (const std::exception& e) { // out of memory: the gateway must not die of it
        reply = {};
        reply.error = api_error{500, "internal_error", e.what()};
        on_done(*run, std::move(reply));
      }
    };
    caf::anon_send(gateway_of(id), sample_atom::value, id, std::move(job));
  };
  if (!prompt_rows)
    return sample(std::nullopt);
  // The first stage: every prompt's rows, so that the completions after them (and a
  // repeated prompt) are read from the trie. A cancellation that comes between the
  // stages finds no job, and the second runs unanswered.
  logprobs_job rows;
  rows.sequences = run->prompts;
  rows.all_positions = true;
  rows.scope = run->scope;
  rows.done = [run, sample = std::move(sample)](gateway_reply reply) {
    run->prompt_engine_ms = reply.engine_ms;
    if (!reply.error)
      run->prompt_scores = score_prompts(reply.answers, *run->request.logprobs);
    sample(std::move(reply.error));
  };
  caf::anon_send(gateway_of(id), messages::logprobs_atom::value, id, std::move(rows));
}

} // namespace canopy::server
