// canopy tokenize: text to ids with the model's tokenizer, exactly as logprobs --text
// and sample --text tokenize it.

#include "cli_args.hpp"
#include "commands.hpp"
#include "text_output.hpp"

#include <canopy/engine.hpp>

#include <iostream>

namespace canopy::app {

namespace {

const char* const usage =
    "Usage: canopy tokenize [--model PATH | --tokenizer FILE] --text TEXT\n"
    "                       [--format text|json] [engine settings]\n\n"
    "Prints the ids of TEXT under the model's tokenizer, in its own convention\n"
    "(llama2.c: BOS and the dummy-prefix space; GPT-2: nothing added). A .bin model\n"
    "finds tokenizer.bin or tok512.bin beside it unless --tokenizer FILE names one;\n"
    "--tokenizer without --model needs no model (the mock backend carries it).\n"
    "text: the ids comma-separated on one line (as --tokens takes them; an empty line\n"
    "when there are none); json: {\"ids\": [...]}.\n";

std::vector<flag_spec> tokenize_flags() {
  return {
      {"text", "TEXT", "the text to tokenize (required)"},
      {"format", "FORMAT", "text or json (default text)"},
  };
}

} // namespace

int tokenize_command(const std::vector<std::string>& argv) {
  const auto args = parse_command_line(argv, usage, tokenize_flags());
  if (args.help)
    return 0;
  if (!args.has("text"))
    throw usage_error("--text is required");
  const auto format = args.text("format", "text");
  if (format != "text" && format != "json")
    throw usage_error("--format: unknown '" + format + "' (known: text, json)");

  // The engine, not a tokenizer loaded here, so that the tokenizer is found exactly as
  // for logprobs and sample; on the small models this is built for, that is fast. A
  // tokenizer alone needs no model: the mock backend serves it.
  auto config = args.config;
  if (config.model.empty() && !config.tokenizer.empty())
    config.backend = "mock";
  const engine lm{config};
  const auto ids = lm.tokenize(args.text("text", ""));
  if (format == "json")
    std::cout << json_line({{"ids", ids}});
  else
    std::cout << comma_ids(ids) << '\n';
  std::cout.flush();
  return std::cout ? 0 : 1;
}

} // namespace canopy::app
