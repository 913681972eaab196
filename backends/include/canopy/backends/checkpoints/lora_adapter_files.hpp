#pragma once
// A PEFT LoRA adapter as it travels: its directory's two files, read whole. An engine
// reads the directory once (read_lora_adapter_files in lora_adapter.hpp), and every
// worker, in-process or on another machine, parses the same bytes.
// Thread contract: plain value.

#include <cstdint>
#include <string>

namespace canopy::backends {

struct lora_adapter_files {
  std::string source;      // the directory it was read from (for messages)
  std::string config_json; // adapter_config.json
  std::string weights;     // adapter_model.safetensors

  std::uint64_t bytes() const { return config_json.size() + weights.size(); }
};

} // namespace canopy::backends
