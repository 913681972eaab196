#include "models/started_torch_pass.hpp"

namespace canopy::backends {

namespace {

std::uint64_t ns_since(std::chrono::steady_clock::time_point then) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now() - then)
                                        .count());
}

} // namespace

started_torch_pass::started_torch_pass(pass_result answer,
                                       std::vector<std::size_t> rows_per_item,
                                       std::size_t vocab, rows_to_host rows,
                                       std::unique_ptr<slot_reservation> kept,
                                       pass_profile* profile,
                                       std::chrono::steady_clock::time_point started)
    : answer_(std::move(answer)), rows_per_item_(std::move(rows_per_item)), vocab_(vocab),
      rows_(std::move(rows)), kept_(std::move(kept)), profile_(profile) {
  answer_.compute_ns = ns_since(started);
}

pass_result started_torch_pass::finish() {
  const auto started = std::chrono::steady_clock::now();
  profile_clock clock(profile_);
  const float* next_row = rows_.wait();
  clock.lap("rows to host");
  for (std::size_t i = 0; i < rows_per_item_.size(); ++i) {
    const auto values = rows_per_item_[i] * vocab_;
    answer_.items[i].logprobs.assign(next_row, next_row + values);
    next_row += values;
  }
  kept_->commit();
  answer_.compute_ns += ns_since(started);
  clock.lap("row copy");
  if (profile_)
    ++profile_->passes;
  return std::move(answer_);
}

} // namespace canopy::backends
