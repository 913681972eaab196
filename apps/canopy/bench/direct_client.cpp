#include "bench/direct_client.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace canopy::app {

direct_client::direct_client(std::unique_ptr<backends::backend_i> backend)
    : backend_(std::move(backend)) {}

std::int64_t direct_client::vocab_size() const {
  return backend_->info().vocab_size;
}

void direct_client::ask(token_seq tokens, const std::string& adapter,
                        logprobs_callback done) {
  const auto started = std::chrono::steady_clock::now();
  backends::pass_request request;
  auto& item = request.items.emplace_back();
  item.rows = {static_cast<std::uint32_t>(tokens.size() - 1)};
  item.tokens = std::move(tokens);
  item.keep_kv = false;
  item.adapter = adapter;
  at::Tensor row;
  try {
    auto result = backend_->run(request);
    tokens_computed_ += result.tokens_computed;
    matmul_flops_ += result.matmul_flops;
    compute_ns_ += result.compute_ns;
    // The row is handed over without a copy, as the engine shares its cached rows.
    auto values =
        std::make_unique<std::vector<float>>(std::move(result.items.front().logprobs));
    const auto size = static_cast<std::int64_t>(values->size());
    float* data = values->data();
    row = at::from_blob(
        data, {size}, [owner = values.release()](void*) { delete owner; },
        at::TensorOptions(at::kFloat));
  } catch (const std::exception& e) {
    done(canopy::error(errc::backend_failure, e.what()));
    return;
  }
  latencies_ns_.push_back((std::chrono::steady_clock::now() - started).count());
  done(std::move(row));
}

void direct_client::reset_measurements() {
  tokens_computed_ = 0;
  matmul_flops_ = 0;
  compute_ns_ = 0;
  latencies_ns_.clear();
}

double direct_client::latency_us(double p) const {
  if (latencies_ns_.empty())
    return 0;
  auto sorted = latencies_ns_;
  const auto rank = static_cast<std::size_t>(std::ceil(p * double(sorted.size())));
  const auto at =
      sorted.begin() + static_cast<std::ptrdiff_t>(std::max<std::size_t>(rank, 1) - 1);
  std::nth_element(sorted.begin(), at, sorted.end());
  return double(*at) / 1000.0;
}

} // namespace canopy::app
