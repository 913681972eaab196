#pragma once
// What every path of an engine on the mock backend must return: the mock's own row
// for the full sequence, computed without any engine.
// Thread contract: pure functions.

#include <canopy/actors/engine_actors.hpp>
#include <canopy/backends/mock_backend.hpp>
#include <canopy/engine.hpp>

#include <ATen/ATen.h>

#include <vector>

namespace canopy::testing {

inline std::vector<float> reference_row(const engine_config& config,
                                        const token_seq& tokens) {
  auto options = actors::backend_spec_for(config, "cpu").mock;
  return backends::mock_logprobs(options, tokens.data(), tokens.size());
}

/// True when the tensor is a float32 [vocab] row bit-identical to the reference.
inline bool equals_reference(const at::Tensor& row, const engine_config& config,
                             const token_seq& tokens) {
  auto expected = reference_row(config, tokens);
  if (row.scalar_type() != at::kFloat || row.dim() != 1 ||
      row.size(0) != static_cast<std::int64_t>(expected.size()))
    return false;
  auto contiguous = row.contiguous();
  return std::equal(expected.begin(), expected.end(), contiguous.data_ptr<float>());
}

} // namespace canopy::testing
