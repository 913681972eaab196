#pragma once
// The engine driven as a host holding futures drives it: ask() keeps the future that
// engine::next_token_logprobs returns, and the asking thread itself, when it must wait
// (the window of queries in flight is full, or the workload needs every answer), gets
// the oldest futures in the order asked (future::get) and hands each outcome on. The
// bench's futures variant, against the callbacks of the full one.
// Thread contract: one thread (asks and waits); `done` runs on it, in the waits.

#include "bench/bench_workloads.hpp"

#include <canopy/engine.hpp>

#include <deque>
#include <future>
#include <utility>

namespace canopy::app {

class future_client final : public query_client {
public:
  explicit future_client(engine& lm) : lm_(lm) {}

  void ask(token_seq tokens, const std::string& adapter, logprobs_callback done) override;
  void wait_until_at_most(in_flight& flight, std::size_t count) override;
  void wait_all(in_flight& flight) override;

private:
  /// Gets the oldest futures until at most `count` are left.
  void collect_until(std::size_t count);

  engine& lm_;
  std::deque<std::pair<std::future<at::Tensor>, logprobs_callback>>
      asked_; // oldest first
};

} // namespace canopy::app
