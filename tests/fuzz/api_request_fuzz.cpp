// Fuzz target for the API's request-body parsers (apps/server/src/api/api_requests.cpp
// and completion_request.cpp), the code that reads every byte a client sends. Built two
// ways:
//  * with libFuzzer + ASan/UBSan when CANOPY_BUILD_FUZZERS=ON
//  (tests/fuzz/CMakeLists.txt):
//      build-fuzz/tests/fuzz/api_request_fuzz -max_total_time=60 corpus/
//  * into server_api_tests, whose api_request_fuzz_corpus_test feeds this same entry a
//    deterministic set of mutated valid bodies.
// Contract checked here: every parse_* function returns (never throws, never crashes)
// either a request that keeps the promises of api_requests.hpp and
// completion_request.hpp, or a 400 with one of
// the documented codes and a short, non-empty message. Anything else is a finding.
// Thread contract: pure function of its input.

#include <canopy/server/api/api_requests.hpp>
#include <canopy/server/openai/completion_request.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

namespace {

using namespace canopy::server;

constexpr request_limits limits{4, 64};

void expect(bool condition) {
  if (!condition)
    __builtin_trap();
}

void check_error(const api_error& error) {
  expect(error.status == 400);
  expect(error.code == "malformed_json" || error.code == "invalid_request" ||
         error.code == "empty_sequence" || error.code == "token_out_of_range" ||
         error.code == "batch_too_large");
  // Messages quote client bytes only cut short.
  expect(!error.message.empty() && error.message.size() <= 512);
}

void check_sequence(const sequence_input& s) {
  expect(s.tokens.has_value() != s.text.has_value());
  expect(!s.tokens || !s.tokens->empty());
}

void check_sequences(const std::vector<sequence_input>& sequences, bool batch) {
  expect(!sequences.empty() && sequences.size() <= limits.max_batch);
  expect(batch || sequences.size() == 1);
  for (const sequence_input& s : sequences)
    check_sequence(s);
}

void check(const logprobs_request& r) {
  check_sequences(r.sequences, r.batch);
  expect(!r.top_k || *r.top_k >= 1);
  expect(std::isfinite(r.deadline_ms) && r.deadline_ms >= 0);
}

void check(const sample_request& r) {
  check_sequences(r.prompts, r.batch);
  expect(r.max_tokens <= limits.max_sample_tokens);
  expect(std::isfinite(r.temperature) && r.temperature >= 0);
}

void check(const next_byte_request& r) {
  expect(!r.items.empty() && r.items.size() <= limits.max_batch);
  expect(r.batch || r.items.size() == 1);
  for (const next_byte_item& item : r.items)
    expect(!item.tokens.empty());
  expect(std::isfinite(r.deadline_ms) && r.deadline_ms >= 0);
}

void check(const completion_request& r) {
  expect(!r.prompts.empty() && r.n >= 1 && r.prompts.size() * r.n <= limits.max_batch);
  for (const sequence_input& s : r.prompts)
    check_sequence(s);
  expect(r.max_tokens <= limits.max_sample_tokens);
  expect(!r.logprobs || *r.logprobs <= max_completion_logprobs);
  expect(r.temperature >= 0 && r.temperature <= 2);
  expect(r.top_p > 0 && r.top_p <= 1);
  expect(r.stop.size() <= max_stop_strings);
  for (const auto& stop : r.stop)
    expect(!stop.empty());
  expect(r.stream || !r.stream_usage);
}

void check(const cache_kv_request& r) {
  check_sequence(r.prompt);
}
void check(const tokenize_request&) {}
void check(const detokenize_request&) {}
void check(const cache_clear_request&) {}

template <class T> void check_result(const parsed<T>& result) {
  if (const auto* error = std::get_if<api_error>(&result))
    check_error(*error);
  else
    check(std::get<T>(result));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  check_result(parse_logprobs_request(body, limits));
  check_result(parse_sample_request(body, limits));
  check_result(parse_next_byte_request(body, limits));
  check_result(parse_completion_request(body, limits));
  check_result(parse_tokenize_request(body));
  check_result(parse_detokenize_request(body));
  check_result(parse_cache_kv_request(body));
  check_result(parse_cache_clear_request(body));
  return 0;
}
