#include <canopy/server/api/api_requests.hpp>

#include "api/json_fields.hpp"

#include <canopy/backends/tokenizers/hex_bytes.hpp>

#include <limits>
#include <utility>

namespace canopy::server {

namespace {

using namespace detail;
using nlohmann::json;

constexpr std::string_view invalid_request = "invalid_request";

/// The one of `names` that `body` has; refuses none and more than one.
const char* exactly_one(const json& body, std::initializer_list<const char*> names) {
  const auto listed = [&] {
    std::string list;
    for (const char* name : names)
      list += (list.empty() ? "" : ", ") + std::string(name);
    return list;
  };
  const char* found = nullptr;
  for (const char* name : names) {
    if (member(body, name) == nullptr)
      continue;
    if (found != nullptr)
      refuse(invalid_request, "only one of " + listed() + " may be given");
    found = name;
  }
  if (found == nullptr)
    refuse(invalid_request, "one of " + listed() + " is required");
  return found;
}

/// The sequence under "tokens" or "text" (`name`).
sequence_input read_single(const json& body, std::string_view name) {
  if (name == "tokens")
    return {read_tokens(body.at("tokens"), "tokens", false), std::nullopt};
  return {std::nullopt, read_string(body.at("text"), "text")};
}

/// Refuses a "batch" that is not a non-empty list of at most limits.max_batch `entries`
/// (what the request calls them: "sequences", "entries").
void check_batch_list(const json& list, const request_limits& limits,
                      std::string_view entries) {
  if (!list.is_array())
    refuse(invalid_request, "batch is not a list");
  if (list.empty())
    refuse(invalid_request, "batch is empty");
  if (list.size() > limits.max_batch)
    refuse("batch_too_large", "batch has " + std::to_string(list.size()) + " " +
                                  std::string(entries) + ", more than the limit of " +
                                  std::to_string(limits.max_batch));
}

/// "batch": a non-empty list of token lists and texts, at most limits.max_batch.
std::vector<sequence_input> read_batch(const json& list, const request_limits& limits) {
  check_batch_list(list, limits, "sequences");
  std::vector<sequence_input> sequences;
  sequences.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i)
    sequences.push_back(read_sequence(list[i], "batch[" + std::to_string(i) + "]"));
  return sequences;
}

/// Exactly one of "tokens", "text", "batch"; `batch` tells whether it was "batch".
std::vector<sequence_input> read_sequences(const json& body, const request_limits& limits,
                                           bool& batch) {
  const std::string_view name = exactly_one(body, {"tokens", "text", "batch"});
  batch = name == "batch";
  if (batch)
    return read_batch(body.at("batch"), limits);
  std::vector<sequence_input> one;
  one.push_back(read_single(body, name));
  return one;
}

wire_dtype read_dtype(const json& value) {
  const std::string name = read_string(value, "dtype");
  if (name == "float32")
    return wire_dtype::float32;
  if (name == "float16")
    return wire_dtype::float16;
  refuse(invalid_request, "dtype must be \"float32\" or \"float16\"");
}

/// "priority" and "deadline_ms", shared by the requests that run queries.
void read_scheduling(const json& object, std::int32_t& priority, double& deadline_ms) {
  if (const json* v = member(object, "priority"))
    priority = read_int32(*v, "priority", invalid_request);
  if (const json* v = member(object, "deadline_ms")) {
    deadline_ms = read_number(*v, "deadline_ms");
    if (!(deadline_ms > 0))
      refuse(invalid_request, "deadline_ms must be greater than 0");
  }
}

/// A prefix in hex (`field`); absent: "".
std::string read_prefix(const json& object, const std::string& field) {
  const json* v = member(object, "prefix");
  if (v == nullptr)
    return {};
  auto bytes = backends::parse_hex_bytes(read_string(*v, field));
  if (!bytes)
    refuse(invalid_request, field + " is not hex (two digits per byte)");
  return std::move(*bytes);
}

backends::byte_reduce read_reduce(const json& value) {
  const std::string name = read_string(value, "reduce");
  if (name == "sum")
    return backends::byte_reduce::sum;
  if (name == "max")
    return backends::byte_reduce::max;
  refuse(invalid_request, "reduce must be \"sum\" or \"max\"");
}

/// "batch" of a next-byte request: a non-empty list of {"tokens", "prefix"} objects.
std::vector<next_byte_item> read_next_byte_batch(const json& list,
                                                 const request_limits& limits) {
  check_batch_list(list, limits, "entries");
  std::vector<next_byte_item> items;
  items.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string field = "batch[" + std::to_string(i) + "]";
    if (!list[i].is_object())
      refuse(invalid_request, field + " is not an object with tokens and prefix");
    for (const auto& [name, value] : list[i].items())
      if (name != "tokens" && name != "prefix")
        refuse(invalid_request, field + " has an unknown field: " + name);
    const json* tokens = member(list[i], "tokens");
    if (tokens == nullptr)
      refuse(invalid_request, field + ".tokens is required");
    items.push_back({read_tokens(*tokens, field + ".tokens", false),
                     read_prefix(list[i], field + ".prefix")});
  }
  return items;
}

} // namespace

parsed<logprobs_request> parse_logprobs_request(std::string_view body,
                                                const request_limits& limits) {
  return catching<logprobs_request>([&] {
    const json object = parse_object(body, false);
    allow_only(object, {"tokens", "text", "batch", "all_positions", "top_k", "priority",
                        "deadline_ms", "dtype", "cache_salt", "adapter"});
    logprobs_request request;
    request.sequences = read_sequences(object, limits, request.batch);
    if (const json* v = member(object, "all_positions"))
      request.all_positions = read_bool(*v, "all_positions");
    if (const json* v = member(object, "top_k"))
      request.top_k = read_count(*v, "top_k", 1, std::numeric_limits<std::size_t>::max());
    read_scheduling(object, request.priority, request.deadline_ms);
    if (const json* v = member(object, "dtype"))
      request.dtype = read_dtype(*v);
    request.cache_salt = read_cache_salt(object);
    request.adapter = read_adapter(object);
    return request;
  });
}

parsed<sample_request> parse_sample_request(std::string_view body,
                                            const request_limits& limits) {
  return catching<sample_request>([&] {
    const json object = parse_object(body, false);
    allow_only(object, {"tokens", "text", "batch", "max_tokens", "temperature", "seed",
                        "eos_token_ids", "cache_salt", "adapter"});
    sample_request request;
    request.prompts = read_sequences(object, limits, request.batch);
    request.max_tokens = read_count(required(object, "max_tokens"), "max_tokens", 0,
                                    limits.max_sample_tokens);
    if (const json* v = member(object, "temperature")) {
      request.temperature = read_number(*v, "temperature");
      if (!(request.temperature >= 0))
        refuse(invalid_request, "temperature must be at least 0");
    }
    if (const json* v = member(object, "seed"))
      request.seed = read_uint64(*v, "seed");
    if (const json* v = member(object, "eos_token_ids"))
      request.eos_token_ids = read_tokens(*v, "eos_token_ids", true);
    request.cache_salt = read_cache_salt(object);
    request.adapter = read_adapter(object);
    return request;
  });
}

parsed<next_byte_request> parse_next_byte_request(std::string_view body,
                                                  const request_limits& limits) {
  return catching<next_byte_request>([&] {
    const json object = parse_object(body, false);
    allow_only(object, {"tokens", "prefix", "batch", "reduce", "priority", "deadline_ms",
                        "cache_salt", "adapter"});
    next_byte_request request;
    const std::string_view name = exactly_one(object, {"tokens", "batch"});
    request.batch = name == "batch";
    if (request.batch) {
      if (member(object, "prefix") != nullptr)
        refuse(invalid_request, "prefix goes inside each batch entry");
      request.items = read_next_byte_batch(object.at("batch"), limits);
    } else {
      request.items.push_back({read_tokens(object.at("tokens"), "tokens", false),
                               read_prefix(object, "prefix")});
    }
    if (const json* v = member(object, "reduce"))
      request.reduce = read_reduce(*v);
    read_scheduling(object, request.priority, request.deadline_ms);
    request.cache_salt = read_cache_salt(object);
    request.adapter = read_adapter(object);
    return request;
  });
}

parsed<tokenize_request> parse_tokenize_request(std::string_view body) {
  return catching<tokenize_request>([&] {
    const json object = parse_object(body, false);
    allow_only(object, {"text", "add_special_tokens"});
    tokenize_request request{read_string(required(object, "text"), "text")};
    if (const json* v = member(object, "add_special_tokens"))
      request.add_special_tokens = read_bool(*v, "add_special_tokens");
    return request;
  });
}

parsed<detokenize_request> parse_detokenize_request(std::string_view body) {
  return catching<detokenize_request>([&] {
    const json object = parse_object(body, false);
    allow_only(object, {"tokens"});
    // No query runs, so an empty list is fine: it detokenizes to "".
    return detokenize_request{read_tokens(required(object, "tokens"), "tokens", true)};
  });
}

parsed<cache_kv_request> parse_cache_kv_request(std::string_view body) {
  return catching<cache_kv_request>([&] {
    const json object = parse_object(body, false);
    allow_only(object, {"tokens", "text", "cache_salt", "adapter"});
    return cache_kv_request{read_single(object, exactly_one(object, {"tokens", "text"})),
                            read_cache_salt(object), read_adapter(object)};
  });
}

parsed<cache_tree_request> parse_cache_tree_request(std::string_view body) {
  return catching<cache_tree_request>([&] {
    const json object = parse_object(body, true);
    allow_only(object,
               {"tokens", "text", "depth", "max_children", "cache_salt", "adapter"});
    cache_tree_request request;
    if (object.contains("tokens") && object.contains("text"))
      refuse(invalid_request, "give \"tokens\" or \"text\", not both");
    // The root is the prefix of no token, so an empty list is fine here.
    request.prefix.tokens = cache::token_seq{};
    if (object.contains("tokens"))
      request.prefix.tokens = read_tokens(object.at("tokens"), "tokens", true);
    if (object.contains("text"))
      request.prefix = {std::nullopt, read_string(object.at("text"), "text")};
    if (object.contains("depth"))
      request.depth = static_cast<std::uint32_t>(
          read_count(object.at("depth"), "depth", 1, max_tree_depth));
    if (object.contains("max_children"))
      request.max_children = static_cast<std::uint32_t>(
          read_count(object.at("max_children"), "max_children", 1, max_tree_children));
    request.cache_salt = read_cache_salt(object);
    request.adapter = read_adapter(object);
    return request;
  });
}

parsed<adapter_request> parse_adapter_request(std::string_view body, bool remove) {
  return catching<adapter_request>([&] {
    const json object = parse_object(body, false);
    if (remove)
      allow_only(object, {"name"});
    else
      allow_only(object, {"name", "path"});
    adapter_request request;
    request.name = read_string(required(object, "name"), "name");
    if (!remove)
      request.path = read_string(required(object, "path"), "path");
    return request;
  });
}

parsed<cache_clear_request> parse_cache_clear_request(std::string_view body) {
  return catching<cache_clear_request>([&] {
    const json object = parse_object(body, true);
    allow_only(object, {"kv_only"});
    cache_clear_request request;
    if (const json* v = member(object, "kv_only"))
      request.kv_only = read_bool(*v, "kv_only");
    return request;
  });
}

} // namespace canopy::server
