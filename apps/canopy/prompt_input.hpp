#pragma once
// The prompt of the commands that run the model (logprobs, sample): --tokens IDS or
// --text TEXT, exactly one. Read in two steps so that a bad command line is refused
// before the (slower) engine is built, and text is tokenized by the engine's own
// tokenizer, the one its model was trained with.
// Thread contract: plain values and functions, used from main's thread.

#include "cli_args.hpp"

#include <canopy/engine.hpp>

#include <optional>
#include <string>
#include <vector>

namespace canopy::app {

struct prompt_input {
  std::optional<token_seq> ids; // --tokens, as given
  std::string text;             // --text, when ids is empty
};

/// The --tokens and --text flag specs; `role` says what the sequence is for.
std::vector<flag_spec> prompt_flags(const std::string& role);

/// Throws usage_error unless exactly one of --tokens and --text was given.
prompt_input read_prompt(const parsed_args& args);

/// The prompt as ids: --tokens as given, or --text through lm.tokenize
/// (errc::no_tokenizer when the model has none). Throws usage_error when the text gives
/// no ids at all.
token_seq prompt_tokens(const prompt_input& prompt, const engine& lm);

} // namespace canopy::app
