#include "bench/future_client.hpp"

namespace canopy::app {

void future_client::ask(token_seq tokens, const std::string& adapter,
                        logprobs_callback done) {
  query_options options;
  options.adapter = adapter;
  asked_.emplace_back(lm_.next_token_logprobs(std::move(tokens), std::move(options)),
                      std::move(done));
}

void future_client::collect_until(std::size_t count) {
  while (asked_.size() > count) {
    auto [future, done] = std::move(asked_.front());
    asked_.pop_front();
    try {
      done(future.get());
    } catch (const canopy::error& e) {
      done(e);
    }
  }
}

void future_client::wait_until_at_most(in_flight& flight, std::size_t count) {
  collect_until(count);
  flight.wait_until_at_most(count);
}

void future_client::wait_all(in_flight& flight) {
  collect_until(0);
  flight.wait_all();
}

} // namespace canopy::app
