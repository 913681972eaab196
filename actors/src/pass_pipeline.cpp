#include <canopy/actors/pass_pipeline.hpp>

#include "exception_text.hpp"

#include <canopy/messages/errors.hpp>

#include <exception>
#include <thread>

namespace canopy::actors {

using namespace messages;

namespace {

computed_pass computed(backends::pass_result&& result, std::int64_t vocab,
                       cache::row_dtype dtype) {
  computed_pass out;
  out.dtype = dtype;
  out.vocab = static_cast<std::uint64_t>(vocab);
  out.tokens_computed = result.tokens_computed;
  out.matmul_flops = result.matmul_flops;
  out.compute_ns = result.compute_ns;
  out.items.resize(result.items.size());
  for (std::size_t i = 0; i < result.items.size(); ++i) {
    out.items[i].kv = std::move(result.items[i].kv);
    out.items[i].values = std::move(result.items[i].logprobs);
  }
  return out;
}

caf::error backend_failure(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    return make_error(errc::backend_failure, exception_text(e));
  } catch (...) {
    return make_error(errc::backend_failure, "unknown exception in the backend");
  }
}

} // namespace

bool pass_pipeline::start(backends::backend_i& backend,
                          const backends::pass_request& request, cache::row_dtype rows,
                          promise answer, on_computed computed) {
  std::unique_ptr<backends::started_pass> pass;
  try {
    pass = backend.start(request);
  } catch (...) {
    answer.deliver(backend_failure(std::current_exception()));
    return false;
  }
  started_.push_back({std::move(pass), std::move(answer), rows, backend.info().vocab_size,
                      std::move(computed)});
  if (started_.size() == 1)
    answer_arrived();
  return poll_needed();
}

bool pass_pipeline::answer_ready() {
  polling_ = false;
  answer_arrived();
  if (!poll_needed())
    return false;
  std::this_thread::yield();
  return true;
}

void pass_pipeline::answer_all() {
  for (auto& s : started_)
    deliver(s);
  started_.clear();
}

void pass_pipeline::answer_arrived() {
  while (!started_.empty() && started_.front().pass->ready()) {
    deliver(started_.front());
    started_.pop_front();
  }
}

bool pass_pipeline::poll_needed() {
  if (started_.empty() || polling_)
    return false;
  polling_ = true;
  return true;
}

void pass_pipeline::deliver(started& s) {
  try {
    auto pass = computed(s.pass->finish(), s.vocab, s.rows);
    if (auto refused = s.computed ? s.computed(pass) : caf::error{})
      s.answer.deliver(std::move(refused));
    else
      s.answer.deliver(std::move(pass));
  } catch (...) {
    s.answer.deliver(backend_failure(std::current_exception()));
  }
}

} // namespace canopy::actors
