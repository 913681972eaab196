// GPT-2's pre-tokenizer regex (see gpt2_pretokenizer.hpp).
#include "tokenizers/gpt2_pretokenizer.hpp"

namespace canopy::backends {

const std::string_view gpt2_pretokenizer::pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

gpt2_pretokenizer::gpt2_pretokenizer() : pattern_(pattern) {}

std::vector<std::string_view> gpt2_pretokenizer::split(std::string_view text) const {
  return isolate(text, pattern_.find_all(text));
}

} // namespace canopy::backends
