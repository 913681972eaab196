#include "prompt_input.hpp"

namespace canopy::app {

std::vector<flag_spec> prompt_flags(const std::string& role) {
  return {
      {"tokens", "IDS", role + ": comma-separated token ids, e.g. 1,403,407"},
      {"text", "TEXT", role + " as text, tokenized by the model's tokenizer"},
  };
}

prompt_input read_prompt(const parsed_args& args) {
  const bool tokens = args.has("tokens");
  const bool text = args.has("text");
  if (tokens == text)
    throw usage_error(tokens ? "give --tokens or --text, not both"
                             : "give the sequence: --tokens IDS or --text TEXT");
  prompt_input out;
  if (tokens)
    out.ids = args.ids("tokens");
  else
    out.text = args.text("text", "");
  return out;
}

token_seq prompt_tokens(const prompt_input& prompt, const engine& lm) {
  if (prompt.ids)
    return *prompt.ids;
  auto ids = lm.tokenize(prompt.text);
  // GPT-2 adds nothing to text, so "" has no ids; say so rather than let the engine
  // report an empty sequence the user never typed.
  if (ids.empty())
    throw usage_error("--text: '" + prompt.text + "' gives no token ids");
  return ids;
}

} // namespace canopy::app
