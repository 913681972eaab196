#pragma once
// Every oracle case along the three ways a pass meets stored KV, into one agreement:
// the whole case in one pass (its own new KV read back as stored), extension token by
// token from a cached 3-token prefix (KV reuse), and a storage too small to lend rows,
// where passes pack their keys and run llama_model's ATen forward (as after eviction).
// The storage-format and weight-format fidelity tests measure with it.
// Thread contract: one thread.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/models/torch_backend.hpp>

#include "oracle.hpp"
#include "pass_items.hpp"
#include "test_device.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <vector>

namespace canopy::testing {

/// `options` with a 64 MiB storage, and again with room for two tokens plus
/// `cramped_extra_bytes` (what residual copies take beside them).
inline oracle_agreement agreement_on_every_path(const std::filesystem::path& model_path,
                                                backends::torch_options options,
                                                const std::vector<oracle_case>& cases,
                                                std::uint64_t cramped_extra_bytes = 0) {
  using namespace backends;
  oracle_agreement seen;
  const auto ckpt = load_checkpoint(model_path);
  options.kv_budget_bytes = 64u << 20;
  auto backend = make_torch_backend(ckpt, test_device(), options);
  options.kv_budget_bytes = 2 * backend->info().kv_bytes_per_token + cramped_extra_bytes;
  auto cramped = make_torch_backend(ckpt, test_device(), options);
  for (const auto& c : cases) {
    pass_request whole;
    whole.items.push_back(item(c.tokens));
    seen.add(backend->run(whole).items[0].logprobs, c, 0);
    seen.add(cramped->run(whole).items[0].logprobs, c, 0);
    pass_request prefix;
    prefix.items.push_back(
        item(cache::token_seq(c.tokens.begin(), c.tokens.begin() + 3)));
    auto last = backend->run(prefix).items[0].kv.back();
    for (std::size_t i = 3; i < c.tokens.size(); ++i) {
      pass_request next;
      next.items.push_back(item({c.tokens[i]}, last, static_cast<std::uint32_t>(i)));
      const auto out = backend->run(next).items[0];
      seen.add(out.logprobs, c, static_cast<std::int64_t>(i));
      last = out.kv[0];
    }
  }
  return seen;
}

} // namespace canopy::testing
