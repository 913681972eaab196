#include <canopy/server/openai/completion_request.hpp>

#include "api/json_fields.hpp"

namespace canopy::server {

namespace {

using namespace detail;
using nlohmann::json;

constexpr std::string_view invalid_request = "invalid_request";

/// The member `name`, or nullptr when absent or null.
const json* given(const json& object, const char* name) {
  const json* v = member(object, name);
  return v && !v->is_null() ? v : nullptr;
}

/// "prompt": a text, a list of texts, a list of token ids, or a list of such lists.
std::vector<sequence_input> read_prompts(const json& prompt) {
  if (prompt.is_string())
    return {{std::nullopt, prompt.get<std::string>()}};
  if (!prompt.is_array())
    refuse(invalid_request,
           "prompt is neither a text, a list of texts, a list of token ids "
           "nor a list of token-id lists");
  if (prompt.empty())
    refuse("empty_sequence", "prompt is an empty list");
  if (prompt.front().is_number())
    return {{read_tokens(prompt, "prompt", false), std::nullopt}};
  std::vector<sequence_input> prompts;
  for (std::size_t i = 0; i < prompt.size(); ++i)
    prompts.push_back(read_sequence(prompt[i], "prompt[" + std::to_string(i) + "]"));
  return prompts;
}

std::vector<std::string> read_stop(const json& stop) {
  std::vector<std::string> strings;
  if (stop.is_string()) {
    strings.push_back(stop.get<std::string>());
  } else if (stop.is_array()) {
    if (stop.size() > max_stop_strings)
      refuse(invalid_request, "stop has " + std::to_string(stop.size()) +
                                  " strings, more than the limit of " +
                                  std::to_string(max_stop_strings));
    for (std::size_t i = 0; i < stop.size(); ++i)
      strings.push_back(read_string(stop[i], "stop[" + std::to_string(i) + "]"));
  } else {
    refuse(invalid_request, "stop is neither a string nor a list of strings");
  }
  for (const auto& s : strings)
    if (s.empty())
      refuse(invalid_request, "stop strings must not be empty");
  return strings;
}

/// OpenAI fields Canopy takes only at their neutral values.
void refuse_unsupported(const json& object, std::size_t n) {
  for (const char* penalty : {"frequency_penalty", "presence_penalty"})
    if (const json* v = given(object, penalty); v && read_number(*v, penalty) != 0)
      refuse(invalid_request, std::string(penalty) + " is not supported (only 0)");
  if (const json* v = given(object, "logit_bias"); v && !(v->is_object() && v->empty()))
    refuse(invalid_request, "logit_bias is not supported (only {})");
  if (given(object, "suffix"))
    refuse(invalid_request, "suffix is not supported");
  if (const json* v = given(object, "best_of");
      v && read_count(*v, "best_of", 1, 1u << 20) != n)
    refuse(invalid_request, "best_of is not supported (only equal to n)");
}

} // namespace

parsed<completion_request> parse_completion_request(std::string_view body,
                                                    const request_limits& limits) {
  return catching<completion_request>([&] {
    const json object = parse_object(body, false);
    allow_only(object, {"model", "prompt", "max_tokens", "echo", "logprobs",
                        "temperature", "top_p", "seed", "n", "stop", "stream",
                        "stream_options", "user", "best_of", "frequency_penalty",
                        "presence_penalty", "logit_bias", "suffix", "cache_salt"});
    completion_request request;
    request.model = read_string(required(object, "model"), "model");
    request.prompts = read_prompts(required(object, "prompt"));
    if (const json* v = given(object, "max_tokens"))
      request.max_tokens = read_count(*v, "max_tokens", 0, limits.max_sample_tokens);
    if (const json* v = given(object, "echo"))
      request.echo = read_bool(*v, "echo");
    if (const json* v = given(object, "logprobs"))
      request.logprobs = read_count(*v, "logprobs", 0, max_completion_logprobs);
    if (const json* v = given(object, "temperature")) {
      request.temperature = read_number(*v, "temperature");
      if (!(request.temperature >= 0 && request.temperature <= 2))
        refuse(invalid_request, "temperature must be between 0 and 2");
    }
    if (const json* v = given(object, "top_p")) {
      request.top_p = read_number(*v, "top_p");
      if (!(request.top_p > 0 && request.top_p <= 1))
        refuse(invalid_request, "top_p must be greater than 0 and at most 1");
    }
    if (const json* v = given(object, "seed"))
      request.seed = read_uint64(*v, "seed");
    if (const json* v = given(object, "n"))
      request.n = read_count(*v, "n", 1, limits.max_batch);
    if (const json* v = given(object, "stop"))
      request.stop = read_stop(*v);
    if (const json* v = given(object, "stream"))
      request.stream = read_bool(*v, "stream");
    if (const json* v = given(object, "stream_options")) {
      if (!v->is_object())
        refuse(invalid_request, "stream_options is not an object");
      allow_only(*v, {"include_usage"});
      if (!request.stream)
        refuse(invalid_request, "stream_options is only allowed with stream");
      if (const json* usage = given(*v, "include_usage"))
        request.stream_usage = read_bool(*usage, "stream_options.include_usage");
    }
    if (const json* v = given(object, "user"))
      read_string(*v, "user");
    request.cache_salt = read_cache_salt(object);
    refuse_unsupported(object, request.n);
    if (request.prompts.size() * request.n > limits.max_batch)
      refuse("batch_too_large", std::to_string(request.prompts.size()) +
                                    " prompts x n = " + std::to_string(request.n) +
                                    " completions, more than the limit of " +
                                    std::to_string(limits.max_batch));
    return request;
  });
}

} // namespace canopy::server
