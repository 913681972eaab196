#pragma once
// LoRA adapters on the mock backend, for tests of the paths adapters travel: the mock
// takes any directory with PEFT's two files as an adapter, and its rows under it are
// those of mock_adapted over the files' bytes.
// Thread contract: plain functions.

#include "scratch_files.hpp"

#include <canopy/actors/engine_actors.hpp>
#include <canopy/backends/checkpoints/lora_adapter.hpp>
#include <canopy/backends/mock_backend.hpp>
#include <canopy/engine_config.hpp>

#include <string>
#include <vector>

namespace canopy::testing {

/// Writes a directory the mock takes as an adapter: two files, `weights` in the second.
inline void write_mock_adapter(const scratch_dir& dir, const std::string& weights) {
  dir.write("adapter_config.json", "{\"r\": 4}");
  dir.write("adapter_model.safetensors", weights);
}

/// The row an engine of `config` (backend mock) answers after `tokens` under the
/// adapter in `dir`.
inline std::vector<float> mock_adapted_row(const engine_config& config,
                                           const scratch_dir& dir,
                                           const std::vector<std::int32_t>& tokens) {
  const auto options =
      backends::mock_adapted(actors::backend_spec_for(config, "cpu").mock,
                             backends::read_lora_adapter_files(dir.path()));
  return backends::mock_logprobs(options, tokens.data(), tokens.size());
}

} // namespace canopy::testing
