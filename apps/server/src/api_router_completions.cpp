// POST /v1/completions and GET /v1/models: OpenAI's legacy completions API over the
// engine's queries (completion_request.hpp, completion_response.hpp).

#include <canopy/server/api_router.hpp>
#include <canopy/server/completion_request.hpp>
#include <canopy/server/completion_response.hpp>

#include "route_helpers.hpp"

#include <caf/send.hpp>

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
std::size_t json_bytes_per_token(std::size_t longest_token_bytes, std::size_t alternatives) {
  return (alternatives + 2) * (6 * longest_token_bytes + 48);
}

/// What the completion's stages share: the request, its prompts, and what the first
/// stage (the prompts' rows, for echo with logprobs) found.
struct completion_state {
  completion_request request;
  std::vector<cache::token_seq> prompts;
  std::size_t prompt_tokens = 0;                       // of every prompt, once each
  std::vector<std::vector<token_score>> prompt_scores; // [prompts]
  double prompt_engine_ms = 0;                         // the first stage's (Server-Timing)
};

/// Scores each prompt token after the first by the row before it.
std::vector<std::vector<token_score>> score_prompts(const std::vector<scored_sequence>& answers,
                                                    std::size_t alternatives) {
  std::vector<std::vector<token_score>> scores(answers.size());
  for (std::size_t s = 0; s < answers.size(); ++s) {
    const auto& tokens = answers[s].tokens;
    for (std::size_t i = 1; i < tokens.size(); ++i)
      scores[s].push_back(score_token(*answers[s].rows[i - 1], tokens[i], alternatives));
  }
  return scores;
}

std::string completion_id(request_id id) {
  const auto now = std::chrono::system_clock::now().time_since_epoch().count();
  char text[40];
  std::snprintf(text, sizeof text, "cmpl-%016llx%04llx", static_cast<unsigned long long>(now),
                static_cast<unsigned long long>(id & 0xffff));
  return text;
}

} // namespace

http_response api_router::completion_body(const std::vector<completion_result>& results,
                                          const completion_format& format, json head,
                                          json usage) const {
  json choices = json::array();
  for (std::size_t c = 0; c < results.size(); ++c)
    choices.push_back(completion_choice(results[c], c, format, texts()));
  head["choices"] = std::move(choices);
  head["usage"] = std::move(usage);
  return json_response(head);
}

http_response api_router::event_stream(const std::vector<completion_result>& results,
                                       const completion_format& format, const json& head,
                                       json usage) const {
  http_response response;
  response.content_type = "text/event-stream";
  response.headers.emplace_back("Cache-Control", "no-cache");
  const auto event = [&](json choices, json usage_or_null) {
    json chunk = head;
    chunk["choices"] = std::move(choices);
    if (!usage_or_null.is_null())
      chunk["usage"] = std::move(usage_or_null);
    response.body += "data: " + dump(chunk) + "\n\n";
  };
  // The choices' chunks interleaved step by step, as they were generated.
  std::vector<std::vector<json>> chunks;
  std::size_t steps = 0;
  for (std::size_t c = 0; c < results.size(); ++c) {
    chunks.push_back(completion_chunks(results[c], c, format, texts()));
    steps = std::max(steps, chunks.back().size());
  }
  for (std::size_t k = 0; k < steps; ++k)
    for (auto& choice : chunks)
      if (k < choice.size())
        event(json::array({std::move(choice[k])}), nullptr);
  if (!usage.is_null())
    event(json::array(), std::move(usage));
  response.body += "data: [DONE]\n\n";
  return response;
}

http_response api_router::models() const {
  return json_response({{"object", "list"},
                        {"data", json::array({{{"id", model_id_},
                                               {"object", "model"},
                                               {"created", started_},
                                               {"owned_by", "canopy"}}})}});
}

void api_router::completions(request_id id, const http_request& request, respond_fn respond) {
  auto result = parse_completion_request(request.body, limits_);
  auto* req = parsed_or_respond(result, respond);
  if (!req)
    return;
  if (req->model != model_id_)
    return respond(to_response({404, "model_not_found",
                                "the model `" + req->model + "` does not exist; this server "
                                "serves `" + model_id_ + "`"}));
  if (!engine_.has_tokenizer())
    return respond(to_response(from_engine_error(
      messages::errc::no_tokenizer, "completions need the model's tokenizer, and it has none")));
  auto state = std::make_shared<completion_state>();
  const auto context = static_cast<std::size_t>(engine_.model().context_length);
  auto& prompt_tokens = state->prompt_tokens;
  for (std::size_t p = 0; p < req->prompts.size(); ++p) {
    auto tokens = resolve(req->prompts[p]);
    auto* ids = parsed_or_respond(tokens, respond);
    if (!ids)
      return;
    if (ids->empty())
      return respond(to_response(
        {400, "empty_sequence", "prompt " + std::to_string(p) + " has no tokens"}));
    if (ids->size() + req->max_tokens > context)
      return respond(to_response(
        {400, "sequence_too_long",
         "this model's maximum context length is " + std::to_string(context) +
           " tokens; prompt " + std::to_string(p) + " has " + std::to_string(ids->size()) +
           " and max_tokens asks for " + std::to_string(req->max_tokens) + " more"}));
    prompt_tokens += ids->size();
    state->prompts.push_back(std::move(*ids));
  }
  const bool logprobs = req->logprobs.has_value();
  const bool prompt_rows = req->echo && logprobs;
  if (prompt_rows && prompt_tokens > max_rows_)
    return respond(to_response({400, "batch_too_large",
                                "echo with logprobs asks for " + std::to_string(prompt_tokens) +
                                  " rows, more than the limit of " + std::to_string(max_rows_)}));
  // Every choice's tokens, echoed and generated, encoded; the prompts' rows are held
  // while they are scored.
  const auto choice_tokens = (req->echo ? prompt_tokens : 0) +
                             req->prompts.size() * req->max_tokens;
  const auto encoded = 256 + req->n * choice_tokens *
                               json_bytes_per_token(longest_token_bytes_,
                                                    logprobs ? *req->logprobs : 0);
  auto reserved = reserve_bytes(encoded, prompt_rows ? prompt_tokens : 0);
  if (auto* refusal = std::get_if<http_response>(&reserved))
    return respond(std::move(*refusal));
  auto held = std::make_shared<byte_reservation>(std::move(std::get<byte_reservation>(reserved)));
  state->request = std::move(*req);

  // The second stage: every prompt n times, each with its own random stream.
  auto complete = [this, id, state, held,
                   respond = std::move(respond)](std::optional<api_error> failed) mutable {
    if (failed)
      return respond(to_response(*failed));
    const auto& r = state->request;
    sample_job job;
    for (const auto& prompt : state->prompts)
      for (std::size_t k = 0; k < r.n; ++k)
        job.prompts.push_back(prompt);
    job.max_tokens = r.max_tokens;
    job.eos_token_ids = engine_.eos_token_ids();
    job.temperature = r.temperature;
    job.top_p = r.top_p;
    job.seed = r.seed;
    job.top_logprobs = r.logprobs;
    if (!r.stop.empty())
      job.stop_after = [this, stop = r.stop](const cache::token_seq& generated) {
        return ends_in_stop(texts(), generated, stop);
      };
    auto answer = answer_with(std::move(respond), [this, id, state,
                                                   held](const gateway_reply& reply) {
      const auto& r = state->request;
      std::vector<completion_result> results;
      const auto prompt_tokens = state->prompt_tokens;
      std::size_t completion_tokens = 0;
      for (std::size_t c = 0; c < reply.generated.size(); ++c) {
        const auto p = c / r.n;
        results.push_back({state->prompts[p],
                           p < state->prompt_scores.size() ? state->prompt_scores[p]
                                                           : std::vector<token_score>{},
                           reply.generated[c],
                           c < reply.scores.size() ? reply.scores[c] : std::vector<token_score>{},
                           reply.stopped[c]});
        completion_tokens += reply.generated[c].size();
      }
      const json usage = {{"prompt_tokens", prompt_tokens},
                          {"completion_tokens", completion_tokens},
                          {"total_tokens", prompt_tokens + completion_tokens}};
      const completion_format format{r.echo, r.logprobs.has_value(), r.stop};
      const json head = {{"id", completion_id(id)},
                         {"object", "text_completion"},
                         {"created", std::chrono::duration_cast<std::chrono::seconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count()},
                         {"model", model_id_}};
      auto response = r.stream
                        ? event_stream(results, format, head, r.stream_usage ? usage : json())
                        : completion_body(results, format, head, usage);
      response.reserved = held;
      return response;
    });
    // Server-Timing counts both stages' engine time.
    job.done = [state, answer = std::move(answer)](gateway_reply reply) {
      reply.engine_ms += state->prompt_engine_ms;
      answer(std::move(reply));
    };
    caf::anon_send(gateway_of(id), sample_atom::value, id, std::move(job));
  };
  if (!prompt_rows)
    return complete(std::nullopt);
  // The first stage: every prompt's rows, so that the completions after them (and a
  // repeated prompt) are read from the trie. A cancellation that comes between the
  // stages finds no job, and the second runs unanswered.
  logprobs_job rows;
  rows.sequences = state->prompts;
  rows.all_positions = true;
  rows.done = [state, complete = std::move(complete)](gateway_reply reply) mutable {
    state->prompt_engine_ms = reply.engine_ms;
    if (!reply.error)
      state->prompt_scores = score_prompts(reply.answers, *state->request.logprobs);
    complete(std::move(reply.error));
  };
  caf::anon_send(gateway_of(id), messages::logprobs_atom::value, id, std::move(rows));
}

} // namespace canopy::server
