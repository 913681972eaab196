#include "bench/next_byte_probe.hpp"

#include <canopy/cache/logprob_row.hpp>
#include <canopy/engine.hpp>
#include <canopy/server/api/next_byte_encoding.hpp>
#include <canopy/server/api/row_encoding.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <random>
#include <stdexcept>

namespace canopy::app {

namespace {

using backends::byte_reduce;
using backends::next_byte_distribution;

double seconds_since(std::chrono::steady_clock::time_point started) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
      .count();
}

/// A question of the cached phase: a sequence and a prefix of 0 to 3 bytes of one of
/// the vocabulary's tokens, as a byte-level client walks them.
struct question {
  std::size_t sequence = 0;
  std::string prefix;
};

/// Runs `ask(i)` for i < n, at most `in_flight` futures outstanding; returns calls/s.
template <class Ask>
double calls_per_second(std::size_t n, std::size_t in_flight, Ask ask) {
  const auto started = std::chrono::steady_clock::now();
  for (std::size_t first = 0; first < n; first += in_flight) {
    std::vector<decltype(ask(first))> waiting;
    for (std::size_t i = first; i < std::min(n, first + in_flight); ++i)
      waiting.push_back(ask(i));
    for (auto& f : waiting)
      f.get();
  }
  return double(n) / seconds_since(started);
}

} // namespace

void run_next_byte_probe(const engine_config& config, const workload_options& options,
                         std::ostream& out) {
  engine lm{config};
  if (!lm.has_tokenizer())
    throw std::invalid_argument("--next-byte needs a model with a tokenizer (or the mock "
                                "with --tokenizer)");
  const auto& vocab = lm.byte_vocab();
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<std::int32_t> pick(
      0, static_cast<std::int32_t>(lm.vocab_size() - 1));
  std::vector<token_seq> sequences(options.sequences);
  for (auto& s : sequences)
    for (std::size_t i = 0; i < options.sequence_length; ++i)
      s.push_back(pick(rng));
  std::vector<question> questions(options.queries);
  for (auto& q : questions) {
    q.sequence = rng() % sequences.size();
    std::optional<std::string> bytes;
    while (!bytes || bytes->empty())
      bytes = vocab[static_cast<std::size_t>(pick(rng))];
    q.prefix = bytes->substr(0, std::min<std::size_t>(rng() % 4, bytes->size()));
  }
  const auto in_flight = options.in_flight;

  const double cold = calls_per_second(sequences.size(), in_flight, [&](std::size_t i) {
    return lm.next_byte_logprobs(sequences[i], "", byte_reduce::sum);
  });
  const double cached = calls_per_second(questions.size(), in_flight, [&](std::size_t i) {
    return lm.next_byte_logprobs(sequences[questions[i].sequence], questions[i].prefix,
                                 byte_reduce::sum);
  });
  // Without the server path: the cached row, then the masses over the whole vocabulary
  // on the caller's side, per call (the row arrives fresh each time).
  const auto order =
      std::make_shared<const backends::byte_order>(vocab, lm.eos_token_ids());
  const double client_side =
      calls_per_second(questions.size(), in_flight, [&](std::size_t i) {
        const auto& q = questions[i];
        auto row = lm.next_token_logprobs(sequences[q.sequence]);
        return std::async(
            std::launch::deferred, [&order, &q, row = std::move(row)]() mutable {
              const auto values = row.get().contiguous();
              const auto stored = cache::logprob_row::encode(
                  values.data_ptr<float>(), static_cast<std::size_t>(values.numel()),
                  cache::row_dtype::float32);
              return backends::byte_masses(order, stored)
                  .next_byte(q.prefix, byte_reduce::sum);
            });
      });

  // One answer on the wire against one row.
  const auto answer = lm.next_byte_logprobs(sequences[0], "", byte_reduce::sum).get();
  const auto json_bytes =
      server::encode_next_byte_json({{sequences[0], ""}}, {answer}, false).size();
  server::answer_shape shape{1, sequences[0].size(), 1,
                             static_cast<std::size_t>(lm.vocab_size()), 0};
  const auto row_bytes = server::encoded_size_bound(shape, {}, true);

  const auto stats = lm.stats();
  char line[256];
  out << "canopy bench --next-byte: vocabulary " << lm.vocab_size() << ", "
      << sequences.size() << " sequences of " << options.sequence_length << " tokens, "
      << questions.size() << " cached calls, " << in_flight << " in flight\n";
  std::snprintf(line, sizeof line,
                "  cold (a pass, masses made)          %12.0f calls/s\n"
                "  cached (hit, masses beside the row) %12.0f calls/s\n"
                "  row + masses on the caller          %12.0f calls/s   (cached %.1fx)\n",
                cold, cached, client_side, cached / client_side);
  out << line;
  std::snprintf(line, sizeof line,
                "  wire per call: next-byte JSON %zu bytes, binary float32 row %zu bytes "
                "(the row is %.1fx the answer)\n",
                json_bytes, row_bytes, double(row_bytes) / double(json_bytes));
  out << line;
  std::snprintf(line, sizeof line,
                "  masses made %llu for %zu sequences; %llu kept, %llu log-prob bytes\n",
                static_cast<unsigned long long>(stats.next_byte_masses_made),
                sequences.size(),
                static_cast<unsigned long long>(stats.next_byte_masses_kept),
                static_cast<unsigned long long>(stats.logprob_bytes));
  out << line;
}

} // namespace canopy::app
