// canopy sample: extends a token sequence (ids or text) by sampling from an engine
// built from the command line, and prints the generated ids and, when the model has a
// tokenizer, their text.

#include "cli_args.hpp"
#include "commands.hpp"
#include "prompt_input.hpp"
#include "text_output.hpp"

#include <canopy/engine.hpp>

#include <iostream>
#include <optional>

namespace canopy::app {

namespace {

const char* const usage =
    "Usage: canopy sample [--model PATH] (--tokens IDS | --text TEXT) --max-tokens N\n"
    "                     [options] [engine settings]\n\n"
    "Extends the prompt (IDS, or TEXT tokenized by the model's tokenizer) by up to N\n"
    "sampled tokens, stopping after an EOS id (the EOS id is then the last one).\n"
    "The text of the generated ids is the bytes they add after the prompt, i.e.\n"
    "detokenize(prompt + ids) without detokenize(prompt), so llama2.c's rule of\n"
    "dropping the space after BOS applies as in run.c.\n\n"
    "text format: line 1 is the generated ids, comma-separated (as --tokens takes\n"
    "them); when the model has a tokenizer, the text follows as its exact bytes, then\n"
    "a newline.\n"
    "json format: one line {\"ids\": [...], \"text\": \"...\"} and nothing else; "
    "\"text\" is\n"
    "null when the model has no tokenizer. Bytes that are not valid UTF-8 (a character\n"
    "cut between tokens) become U+FFFD in the JSON string only; the ids are exact.\n";

std::vector<flag_spec> sample_flags() {
  auto flags = prompt_flags("the prompt");
  flags.push_back(
      {"max-tokens", "N", "tokens to generate at most, at least 1 (required)"});
  flags.push_back({"temperature", "T",
                   "0: argmax (greedy); else sample softmax(logprobs / T) (default 1)"});
  flags.push_back({"seed", "S", "seed of the sampling stream (default 0)"});
  flags.push_back({"eos", "IDS", "comma-separated ids that end generation once sampled"});
  flags.push_back({"format", "FORMAT", "text or json (default text)"});
  return flags;
}

/// The bytes `ids` add after `prompt`; std::nullopt without a tokenizer, or (with a
/// warning) when an id has no bytes in the tokenizer (a padded head row).
std::optional<std::string> continuation_text(const engine& lm, const token_seq& prompt,
                                             const token_seq& ids) {
  if (!lm.has_tokenizer())
    return std::nullopt;
  try {
    token_seq whole = prompt;
    whole.insert(whole.end(), ids.begin(), ids.end());
    const auto before = lm.detokenize(prompt);
    auto after = lm.detokenize(whole);
    // Decoding is per token given its predecessor, so the prompt's bytes are a prefix;
    // fall back to the ids alone should a tokenizer ever break that.
    if (after.compare(0, before.size(), before) == 0)
      return after.substr(before.size());
    return lm.detokenize(ids);
  } catch (const canopy::error& e) {
    std::cerr << "canopy sample: no text: " << e.what() << '\n';
    return std::nullopt;
  }
}

} // namespace

int sample_command(const std::vector<std::string>& argv) {
  const auto args = parse_command_line(argv, usage, sample_flags());
  if (args.help)
    return 0;
  const auto prompt_arg = read_prompt(args);
  if (!args.has("max-tokens"))
    throw usage_error("--max-tokens is required");
  // At least one token, so that every prompt reaches the engine and is validated there.
  const auto max_tokens = args.count("max-tokens", 0, 1);
  const double temperature = args.number("temperature", 1.0);
  if (temperature < 0)
    throw usage_error("--temperature: must be non-negative");
  const auto seed = args.count("seed", 0);
  const auto eos = args.has("eos") ? args.ids("eos") : std::vector<std::int32_t>{};
  const auto format = args.text("format", "text");
  if (format != "text" && format != "json")
    throw usage_error("--format: unknown '" + format + "' (known: text, json)");

  engine lm{args.config};
  const auto prompt = prompt_tokens(prompt_arg, lm);
  const auto ids = lm.sample(prompt, max_tokens, eos, temperature, seed);
  const auto text = continuation_text(lm, prompt, ids);
  if (format == "json") {
    std::cout << json_line(
        {{"ids", ids}, {"text", text ? nlohmann::json(*text) : nlohmann::json()}});
  } else {
    std::cout << comma_ids(ids) << '\n';
    if (text)
      std::cout << *text << '\n';
  }
  std::cout.flush();
  return std::cout ? 0 : 1;
}

} // namespace canopy::app
