#pragma once
// The bodies of the API's POST requests, parsed and checked. A parse never throws:
// it returns the request or an api_error (status 400 unless noted) whose message
// names the field at fault ("tokens[3] is not an integer", "batch has 2000 sequences,
// more than the limit of 1024"). Token ids are checked for type and int32 range here;
// the engine checks them against the vocabulary and context. An integer is a number
// written without fraction or exponent (7.0 and "7" are not); numbers past 64 bits are
// out of range. Bodies nesting deeper than 8 levels are refused (invalid_request), and
// any bytes are safe (not UTF-8 inside a string: malformed_json).
// Thread contract: pure functions.

#include <canopy/backends/tokenizers/next_byte.hpp>
#include <canopy/cache/types.hpp>
#include <canopy/server/api_error.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace canopy::server {

/// One sequence as the client gave it: token ids, or text for the model's tokenizer.
struct sequence_input {
  std::optional<cache::token_seq> tokens;
  std::optional<std::string> text;
};

/// Limits a request must respect (from server_options).
struct request_limits {
  std::size_t max_batch = 1024;         // sequences in one request
  std::size_t max_sample_tokens = 4096; // max_tokens of a sample request
};

enum class wire_dtype { float32, float16 };

/// Every request that runs queries may give "cache_salt" (a non-empty string): its
/// queries then share cached entries only with requests of the same tenant and salt
/// (cache_partition.hpp); and "adapter", the name of a loaded LoRA adapter to compute
/// them under (none: the base model).

/// POST /v1/logprobs: exactly one of "tokens", "text", "batch" (a list whose entries
/// are token lists or texts). Options: "all_positions" (bool), "top_k" (int >= 1),
/// "priority" (int32), "deadline_ms" (number > 0), "dtype" ("float32" | "float16",
/// binary responses only), "cache_salt".
struct logprobs_request {
  std::vector<sequence_input> sequences; // one unless `batch`
  bool batch = false;                    // the client sent "batch": answer "results"
  bool all_positions = false;            // a row after every prefix, not only the last
  std::optional<std::size_t> top_k;
  std::int32_t priority = 0;
  double deadline_ms = 0; // 0: none
  wire_dtype dtype = wire_dtype::float32;
  std::string cache_salt; // "": none
  std::string adapter;    // "": the base model
};

/// POST /v1/sample: "tokens" | "text" | "batch" as above, "max_tokens" (int >= 0,
/// required, at most the limit), "temperature" (number >= 0, default 1), "seed"
/// (uint64, default 0), "eos_token_ids" (list of ids, default none), "cache_salt".
struct sample_request {
  std::vector<sequence_input> prompts;
  bool batch = false;
  std::size_t max_tokens = 0;
  double temperature = 1.0;
  std::uint64_t seed = 0;
  std::vector<std::int32_t> eos_token_ids;
  std::string cache_salt;
  std::string adapter;
};

/// One next-byte question: a token sequence and the bytes of the token being spelled.
struct next_byte_item {
  cache::token_seq tokens;
  std::string prefix; // the bytes themselves (the request spells them in hex)
};

/// POST /v1/next_byte: "tokens" with "prefix" (hex, default ""), or "batch": a list of
/// {"tokens", "prefix"} objects; "reduce" ("sum" | "max", default "sum"), "priority",
/// "deadline_ms", "cache_salt" as for logprobs.
struct next_byte_request {
  std::vector<next_byte_item> items; // one unless `batch`
  bool batch = false;
  backends::byte_reduce reduce = backends::byte_reduce::sum;
  std::int32_t priority = 0;
  double deadline_ms = 0; // 0: none
  std::string cache_salt;
  std::string adapter;
};

/// POST /v1/tokenize: {"text": "...", "add_special_tokens": true}.
struct tokenize_request {
  std::string text;
  bool add_special_tokens =
      true; // false: without what the tokenizer adds around the text
};

/// POST /v1/detokenize: {"tokens": [...]}; an empty list is allowed (it reads as "").
struct detokenize_request {
  cache::token_seq tokens;
};

/// POST /v1/cache/kv: {"tokens": [...]} or {"text": "..."}, and "cache_salt".
struct cache_kv_request {
  sequence_input prompt;
  std::string cache_salt;
  std::string adapter;
};

/// POST /v1/adapters: {"name": "...", "path": "..."}, a PEFT adapter directory on the
/// server's machine, loaded under the name; POST /v1/adapters/remove: {"name": "..."}.
struct adapter_request {
  std::string name;
  std::string path; // "" for a removal
};

/// POST /v1/cache/tree: {"tokens": [...]} (may be empty: the root) or {"text": "..."},
/// or neither (the root); "depth" (1 to max_tree_depth, default 2), "max_children" (1
/// to max_tree_children, default 16), "cache_salt", "adapter".
struct cache_tree_request {
  sequence_input prefix;
  std::uint32_t depth = 2;
  std::uint32_t max_children = 16;
  std::string cache_salt;
  std::string adapter;
};

inline constexpr std::uint32_t max_tree_depth = 8;
inline constexpr std::uint32_t max_tree_children = 64;
/// Nodes in one answer at most, the prefix's included.
inline constexpr std::uint32_t max_tree_nodes = 2048;

/// POST /v1/cache/clear: {} or {"kv_only": true}; an empty body counts as {}.
struct cache_clear_request {
  bool kv_only = false;
};

template <class T> using parsed = std::variant<T, api_error>;

parsed<logprobs_request> parse_logprobs_request(std::string_view body,
                                                const request_limits& limits);
parsed<sample_request> parse_sample_request(std::string_view body,
                                            const request_limits& limits);
parsed<next_byte_request> parse_next_byte_request(std::string_view body,
                                                  const request_limits& limits);
parsed<tokenize_request> parse_tokenize_request(std::string_view body);
parsed<detokenize_request> parse_detokenize_request(std::string_view body);
parsed<cache_kv_request> parse_cache_kv_request(std::string_view body);
parsed<adapter_request> parse_adapter_request(std::string_view body, bool remove);
parsed<cache_clear_request> parse_cache_clear_request(std::string_view body);
parsed<cache_tree_request> parse_cache_tree_request(std::string_view body);

} // namespace canopy::server
