#pragma once
// `canopy bench --target URL`: the command line of the HTTP load generator, parsed and
// checked before any connection opens.
// Thread contract: plain values and functions, used from main's thread.

#include "cli_args.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::app {

/// hits: a fixed set of sequences, warmed once, then asked for at random (cache hits);
/// misses: every request a fresh random sequence (cache misses).
enum class http_workload { hits, misses };
/// What a request asks for: POST /v1/logprobs with Accept JSON or the binary row
/// format; POST /v1/completions scoring every prompt token (echo, logprobs 0,
/// max_tokens 0), as OpenAI clients score a text; or (prefill) POST /v1/completions
/// reading the prompt and generating one token, no scores: what any OpenAI server
/// answers, for a peer that cannot echo; or (next_byte) POST /v1/next_byte, the
/// distribution over the first byte of the next token (256 values instead of a row).
enum class http_payload { json, binary, completions, prefill, next_byte };

inline constexpr std::array<enum_name<http_workload>, 2> http_workload_names{{
    {http_workload::hits, "hits"},
    {http_workload::misses, "misses"},
}};
inline constexpr std::array<enum_name<http_payload>, 5> http_payload_names{{
    {http_payload::json, "json"},
    {http_payload::binary, "binary"},
    {http_payload::completions, "completions"},
    {http_payload::prefill, "prefill"},
    {http_payload::next_byte, "next_byte"},
}};

std::string_view to_string(http_workload w);
std::string_view to_string(http_payload p);

/// Where the server listens.
struct http_target {
  std::string url;  // as given, without a trailing slash: "http://127.0.0.1:8080"
  std::string host; // "127.0.0.1", "localhost", "::1" (brackets removed)
  std::string port; // "8080"
};

struct http_load_options {
  http_target target;
  std::vector<http_workload> workloads = {http_workload::hits, http_workload::misses};
  std::vector<http_payload> payloads = {http_payload::json, http_payload::binary};
  std::vector<std::size_t> connections = {1, 64, 512}; // one run per count, in order
  double duration_s = 3;                               // of each run
  std::size_t sequence_length = 16;                    // tokens per request
  std::size_t hit_sequences = 256; // hits: the set asked for again and again
  std::uint64_t seed = 1;          // of the hits set and of the choices among it
  std::string auth_token;          // empty: no Authorization header
  std::size_t vocab_size = 0;      // 0: from GET /v1/model; else a server without
                                   // it (another OpenAI server), tokens below it
  bool json = false;               // one JSON document instead of the table
};

/// The load generator's own flags (engine settings do not apply to a remote server).
std::vector<flag_spec> http_load_flags();

/// Throws usage_error naming the flag at fault. The sequence length is checked against
/// the served model later, once it is known.
http_load_options http_load_options_of(const parsed_args& args);

} // namespace canopy::app
