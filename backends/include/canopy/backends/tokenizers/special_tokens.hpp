#pragma once
// The ids that begin and end a model's text (BOS, EOS), from what its files say, as HF's
// transformers reads them:
//   - config.json bos_token_id / eos_token_id: an id or a list of ids (Llama 3.1 lists
//     <|end_of_text|>, <|eom_id|>, <|eot_id|>);
//   - generation_config.json, the same keys (what generate() stops on: its EOS ids come
//     first);
//   - tokenizer_config.json bos_token / eos_token: a token's text (or {"content": ...}),
//     resolved through the model's tokenizer;
//   - a llama2.c .bin: its format's BOS 1 and EOS 2.
// EOS ids are listed once each, in that order; BOS is the first one found.
// Thread contract: pure functions of the file system.

#include <canopy/backends/tokenizers/tokenizer.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace canopy::backends {

struct special_tokens {
  std::optional<cache::token_id> bos;
  std::vector<cache::token_id> eos;
};

/// Nothing for an empty path (the mock, the built-in synthetic model). Throws
/// checkpoint_error naming the file and key for malformed JSON or an id outside
/// [0, vocab_size); a tokenizer_config.json token the tokenizer does not know is left
/// out (a file from another tokenizer).
special_tokens read_special_tokens(const std::filesystem::path& model,
                                   std::int64_t vocab_size, const tokenizer_i* tokenizer);

} // namespace canopy::backends
