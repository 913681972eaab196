#include "bench/bench_workloads.hpp"

#include <canopy/sampling.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <thread>
#include <unordered_set>
#include <variant>
#include <vector>

namespace canopy::app {

namespace {

// SMC particles propose from the model itself and target the model sharpened to this
// temperature, so their weights drift apart and resampling happens every few steps.
constexpr double target_temperature = 0.8;

enum draw : std::uint64_t {
  prompt_draw,
  scoring_draw,
  hits_draw,
  picks_draw,
  resampling_draw,
  misses_draw,
  miss_picks_draw
};

/// The workload's own random draws, on streams apart from the particles' sampling
/// streams (sampling_stream(seed, particle)).
std::mt19937_64 workload_stream(std::uint64_t seed, draw what) {
  return sampling_stream(seed ^ 0x9E3779B97F4A7C15ULL, what);
}

token_seq random_tokens(std::size_t length, std::int64_t vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int32_t> token(0,
                                                    static_cast<std::int32_t>(vocab - 1));
  token_seq out(length);
  for (auto& t : out)
    t = token(rng);
  return out;
}

/// The callback of one query: its row into `slot` (if any), its outcome to `flight`.
logprobs_callback answer_into(in_flight& flight, at::Tensor* slot) {
  return [&flight, slot](logprobs_result result) {
    if (auto* row = std::get_if<at::Tensor>(&result)) {
      if (slot)
        *slot = std::move(*row);
      flight.succeeded();
    } else {
      flight.failed(std::get<canopy::error>(result));
    }
  };
}

/// Asks for `tokens` with at most `window` queries in flight: once the window is full,
/// waits until half of it is answered, so the issuing thread sleeps once per many
/// answers instead of once per answer.
void ask_within(query_client& client, in_flight& flight, token_seq tokens,
                const std::string& adapter, std::size_t window) {
  const auto now_in_flight = flight.started();
  client.ask(std::move(tokens), adapter, answer_into(flight, nullptr));
  if (now_in_flight >= window)
    client.wait_until_at_most(flight, window / 2);
}

/// log p_target(token) - log p(token), where p_target = softmax(logprobs / T).
double log_weight_increment(const float* logprobs, std::size_t vocab,
                            std::int32_t token) {
  const double scale = 1.0 / target_temperature;
  const double top = *std::max_element(logprobs, logprobs + vocab) * scale;
  // Each term in float (a third of double's exp time; the weight needs no more), summed
  // in double.
  const auto scale_f = static_cast<float>(scale), top_f = static_cast<float>(top);
  double sum = 0;
  for (std::size_t v = 0; v < vocab; ++v)
    sum += std::exp(logprobs[v] * scale_f - top_f);
  return logprobs[token] * (scale - 1.0) - (top + std::log(sum));
}

/// body(i) for every i < count, spread over the machine's cores (strided, so equal
/// bodies finish together). The calls must be independent of one another.
void for_each_on_cores(std::size_t count, const std::function<void(std::size_t)>& body) {
  const std::size_t threads =
      std::min<std::size_t>(count, std::max(1U, std::thread::hardware_concurrency()));
  auto stride = [&](std::size_t first) {
    for (auto i = first; i < count; i += threads)
      body(i);
  };
  std::vector<std::thread> helpers;
  for (std::size_t t = 1; t < threads; ++t)
    helpers.emplace_back(stride, t);
  stride(0);
  for (auto& h : helpers)
    h.join();
}

/// Unnormalized weights exp(log_w - max), safe from overflow.
std::vector<double> weights_of(const std::vector<double>& log_w) {
  const double top = *std::max_element(log_w.begin(), log_w.end());
  std::vector<double> w;
  for (double lw : log_w)
    w.push_back(std::exp(lw - top));
  return w;
}

/// 1 / sum of squared normalized weights.
double effective_sample_size(const std::vector<double>& log_w) {
  double sum = 0, squares = 0;
  for (double w : weights_of(log_w)) {
    sum += w;
    squares += w * w;
  }
  return sum * sum / squares;
}

/// One SMC population: particles proposing from the model (under one adapter) and
/// resampled among themselves.
struct population {
  std::vector<token_seq> particles;
  std::vector<double> log_w;
  std::vector<std::mt19937_64> streams; // each particle's sampling stream
  std::vector<at::Tensor> rows;         // each particle's last answer
  std::string adapter;

  /// Multinomial resampling when the effective sample size falls under half: each
  /// particle becomes a copy of one drawn in proportion to the weights, so contexts
  /// form a tree with exact duplicates.
  void resample_if_degenerate(std::mt19937_64& rng) {
    if (effective_sample_size(log_w) >= particles.size() / 2.0)
      return;
    const auto w = weights_of(log_w);
    std::discrete_distribution<std::size_t> pick(w.begin(), w.end());
    std::vector<token_seq> next;
    next.reserve(particles.size());
    for (std::size_t i = 0; i < particles.size(); ++i)
      next.push_back(particles[pick(rng)]);
    particles = std::move(next);
    std::fill(log_w.begin(), log_w.end(), 0.0);
  }
};

sequence_census run_smc(const workload_options& o, std::int64_t vocab,
                        query_client& client,
                        const std::function<void()>& measure_start) {
  auto prompt_rng = workload_stream(o.seed, prompt_draw);
  auto resampling_rng = workload_stream(o.seed, resampling_draw);
  std::vector<population> populations(o.populations);
  for (std::size_t p = 0; p < populations.size(); ++p) {
    auto& pop = populations[p];
    pop.particles.assign(o.particles, random_tokens(o.prompt_length, vocab, prompt_rng));
    pop.log_w.assign(o.particles, 0.0);
    for (std::size_t i = 0; i < o.particles; ++i)
      pop.streams.push_back(sampling_stream(o.seed, p * o.particles + i));
    pop.rows.resize(o.particles);
    pop.adapter = adapter_for(o, p);
  }
  const auto particle_count = o.populations * o.particles;
  sequence_census census;
  measure_start();
  for (std::size_t step = 0; step < o.steps; ++step) {
    in_flight flight;
    for (auto& pop : populations)
      for (std::size_t i = 0; i < o.particles; ++i) {
        // The queries depend on the answers, so they are counted as they go, inside
        // the timed phase: a hash step per token, cheap beside the sampling below.
        census.add(pop.particles[i]);
        flight.started();
        client.ask(pop.particles[i], pop.adapter, answer_into(flight, &pop.rows[i]));
      }
    client.wait_all(flight);
    // Each particle draws from its own row with its own stream, so the draws are the
    // same whichever core makes them. On the cores, as a genlm client's batched tensor
    // ops are: one core's two passes of exp over a 50k vocabulary per particle took
    // longer than a GPU's pass for all of them (issue 32's profile).
    for_each_on_cores(particle_count, [&](std::size_t k) {
      auto& pop = populations[k / o.particles];
      const auto i = k % o.particles;
      const float* row = pop.rows[i].data_ptr<float>();
      const auto n = static_cast<std::size_t>(vocab);
      const auto token = sample_token(row, n, 1.0, pop.streams[i]);
      pop.log_w[i] += log_weight_increment(row, n, token);
      pop.particles[i].push_back(token);
    });
    for (auto& pop : populations)
      pop.resample_if_degenerate(resampling_rng);
  }
  return census;
}

/// One sequence extended by its most likely token, one query at a time: every query
/// after the first is uncached and computes one token, so its latency is the engine's
/// fixed cost per pass plus one token's arithmetic.
sequence_census run_decode(const workload_options& o, std::int64_t vocab,
                           query_client& client,
                           const std::function<void()>& measure_start) {
  auto prompt_rng = workload_stream(o.seed, prompt_draw);
  auto sequence = random_tokens(o.prompt_length, vocab, prompt_rng);
  sequence_census census;
  measure_start();
  for (std::size_t step = 0; step < o.steps; ++step) {
    census.add(sequence);
    in_flight flight;
    at::Tensor row;
    flight.started();
    client.ask(sequence, adapter_for(o, 0), answer_into(flight, &row));
    client.wait_all(flight);
    const float* p = row.data_ptr<float>();
    sequence.push_back(
        static_cast<token_seq::value_type>(std::max_element(p, p + vocab) - p));
  }
  return census;
}

sequence_census run_scoring(const workload_options& o, std::int64_t vocab,
                            query_client& client,
                            const std::function<void()>& measure_start) {
  auto rng = workload_stream(o.seed, scoring_draw);
  std::vector<std::pair<token_seq, std::size_t>> queries; // (prefix, its sequence)
  queries.reserve(o.sequences * o.sequence_length);
  for (std::size_t s = 0; s < o.sequences; ++s) {
    const auto sequence = random_tokens(o.sequence_length, vocab, rng);
    for (std::size_t length = 1; length <= sequence.size(); ++length)
      queries.emplace_back(token_seq(sequence.begin(), sequence.begin() + length), s);
  }
  // The queries are known up front, so counting them stays out of the timed phase.
  sequence_census census;
  for (const auto& q : queries)
    census.add(q.first);
  measure_start();
  in_flight flight;
  for (auto& [prefix, s] : queries) {
    flight.started();
    client.ask(std::move(prefix), adapter_for(o, s), answer_into(flight, nullptr));
  }
  client.wait_all(flight);
  return census;
}

sequence_census run_hits(const workload_options& o, std::int64_t vocab,
                         query_client& client,
                         const std::function<void()>& measure_start) {
  auto rng = workload_stream(o.seed, hits_draw);
  std::vector<token_seq> warm;
  for (std::size_t s = 0; s < o.sequences; ++s)
    warm.push_back(random_tokens(o.sequence_length, vocab, rng));
  {
    in_flight flight;
    for (std::size_t s = 0; s < warm.size(); ++s) {
      flight.started();
      client.ask(warm[s], adapter_for(o, s), answer_into(flight, nullptr));
    }
    client.wait_all(flight);
  }
  auto pick_rng = workload_stream(o.seed, picks_draw);
  std::uniform_int_distribution<std::size_t> pick(0, warm.size() - 1);
  std::vector<std::size_t> picks(o.queries);
  for (auto& p : picks)
    p = pick(pick_rng);
  sequence_census census;
  for (auto p : picks)
    census.add(warm[p]);
  measure_start();
  in_flight flight;
  for (auto p : picks)
    ask_within(client, flight, warm[p], adapter_for(o, p), o.in_flight);
  client.wait_all(flight);
  return census;
}

/// `count` distinct values of [0, total) in random order (count <= total).
std::vector<std::uint64_t> distinct_draws(std::uint64_t total, std::size_t count,
                                          std::mt19937_64& rng) {
  std::vector<std::uint64_t> out;
  out.reserve(count);
  if (total <= 4 * std::uint64_t{count}) {
    // Dense: a partial Fisher-Yates shuffle of every value.
    std::vector<std::uint64_t> all(total);
    for (std::uint64_t v = 0; v < total; ++v)
      all[v] = v;
    for (std::size_t i = 0; i < count; ++i) {
      std::uniform_int_distribution<std::uint64_t> pick(i, total - 1);
      std::swap(all[i], all[pick(rng)]);
      out.push_back(all[i]);
    }
    return out;
  }
  // Sparse: draw until unused (at most a quarter are used, so few draws repeat).
  std::uniform_int_distribution<std::uint64_t> pick(0, total - 1);
  std::unordered_set<std::uint64_t> used;
  while (out.size() < count) {
    const auto v = pick(rng);
    if (used.insert(v).second)
      out.push_back(v);
  }
  return out;
}

/// One misses query: a warmed prompt, then its own first new token and more.
struct miss_query {
  std::uint32_t prompt;
  token_seq new_tokens;
};

sequence_census run_misses(const workload_options& o, std::int64_t vocab,
                           query_client& client,
                           const std::function<void()>& measure_start) {
  auto rng = workload_stream(o.seed, misses_draw);
  std::vector<token_seq> prompts;
  for (std::size_t s = 0, n = miss_prompt_count(o, vocab); s < n; ++s)
    prompts.push_back(random_tokens(o.sequence_length, vocab, rng));
  // The warm-up: each prompt asked once, so its row and KV are cached.
  sequence_census census;
  {
    in_flight flight;
    for (std::size_t p = 0; p < prompts.size(); ++p) {
      census.add_computed(prompts[p]);
      ask_within(client, flight, prompts[p], adapter_for(o, p), o.in_flight);
    }
    client.wait_all(flight);
  }
  // Every query gets its own (prompt, first new token) pair, so no two queries share a
  // token the warm-up did not compute: each misses the row cache, reuses its prompt's
  // KV and computes exactly its miss_tokens new tokens.
  auto pick_rng = workload_stream(o.seed, miss_picks_draw);
  const auto pairs = distinct_draws(prompts.size() * static_cast<std::uint64_t>(vocab),
                                    o.miss_queries, pick_rng);
  std::vector<miss_query> queries;
  queries.reserve(pairs.size());
  for (const auto pair : pairs) {
    auto& q = queries.emplace_back();
    q.prompt = static_cast<std::uint32_t>(pair / static_cast<std::uint64_t>(vocab));
    q.new_tokens = random_tokens(o.miss_tokens, vocab, pick_rng);
    q.new_tokens.front() =
        static_cast<std::int32_t>(pair % static_cast<std::uint64_t>(vocab));
  }
  // Each query is put together as it is asked, as hits copies its sequence; counting
  // them does the same here, outside the timed phase.
  const auto assemble = [&](const miss_query& q) {
    const auto& prompt = prompts[q.prompt];
    token_seq tokens;
    tokens.reserve(prompt.size() + q.new_tokens.size());
    tokens.insert(tokens.end(), prompt.begin(), prompt.end());
    tokens.insert(tokens.end(), q.new_tokens.begin(), q.new_tokens.end());
    return tokens;
  };
  for (const auto& q : queries)
    census.add(assemble(q));
  measure_start();
  in_flight flight;
  for (const auto& q : queries)
    ask_within(client, flight, assemble(q), adapter_for(o, q.prompt), o.in_flight);
  client.wait_all(flight);
  return census;
}

} // namespace

std::size_t miss_prompt_count(const workload_options& options, std::int64_t vocab) {
  const auto per_prompt = static_cast<std::size_t>(std::max<std::int64_t>(vocab, 1));
  return std::max(options.sequences,
                  (options.miss_queries + per_prompt - 1) / per_prompt);
}

const std::string& adapter_for(const workload_options& options, std::size_t index) {
  static const std::string base;
  return options.adapters.empty() ? base
                                  : options.adapters[index % options.adapters.size()];
}

std::string_view to_string(workload_kind kind) {
  return name_of(workload_kind_names, kind);
}

sequence_census run_workload(workload_kind kind, const workload_options& options,
                             std::int64_t vocab, query_client& client,
                             const std::function<void()>& measure_start) {
  switch (kind) {
  case workload_kind::smc:
    return run_smc(options, vocab, client, measure_start);
  case workload_kind::decode:
    return run_decode(options, vocab, client, measure_start);
  case workload_kind::scoring:
    return run_scoring(options, vocab, client, measure_start);
  case workload_kind::hits:
    return run_hits(options, vocab, client, measure_start);
  case workload_kind::misses:
    return run_misses(options, vocab, client, measure_start);
  }
  return {};
}

} // namespace canopy::app
