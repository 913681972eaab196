#pragma once
// The mock backend: deterministic log-probs derived from a strong hash of the FULL
// token sequence, simulated KV entries that carry the hash of their prefix (so a
// wrong or stale KV handle gives a wrong answer or an error, exactly as in a real
// model), and a simulated cost per pass and per new token (sleeping, as a device
// would keep the host free), so batching and caching effects show in time. With a
// kv_window W it reads KV as a sliding-window model does: a pass checks the KV of the
// prefix's last W-1 tokens (so KV released under a pass fails it) and no further.
// Its rows still hash the whole sequence.
// Thread contract: see backend_i (one thread at a time).

#include <canopy/backends/backend.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace canopy::backends {

struct mock_options {
  std::int64_t vocab_size = 512;
  std::int64_t context_length = 4096;
  std::int64_t kv_window = 0; // 0: every token's KV is read (full attention)
  std::uint64_t kv_bytes_per_token = 4096;
  std::uint64_t seed = 0x243F6A8885A308D3ULL;
  std::chrono::nanoseconds cost_per_pass{0};
  std::chrono::nanoseconds cost_per_token{0};
};

/// The distribution the mock gives after `tokens` (what every path must return):
/// [vocab] natural-log probabilities summing to 1 in probability space.
std::vector<float> mock_logprobs(const mock_options& options,
                                 const cache::token_id* tokens, std::size_t n);

/// The options whose rows the mock gives under the adapter of `files`: a seed derived
/// from the options' and the files' bytes, so every adapter has rows of its own.
/// KV made under one adapter is refused to a pass item under another.
mock_options mock_adapted(const mock_options& options, const lora_adapter_files& files);

std::unique_ptr<backend_i> make_mock_backend(const mock_options& options);

} // namespace canopy::backends
