// canopy sample: extends a token sequence by sampling from an engine built from the
// command line, and prints the generated ids.

#include "cli_args.hpp"
#include "commands.hpp"

#include <canopy/engine.hpp>

#include <nlohmann/json.hpp>

#include <iostream>

namespace canopy::app {

namespace {

const char* const usage =
    "Usage: canopy sample --tokens IDS --max-tokens N [options] [engine settings]\n\n"
    "Extends the token sequence IDS by up to N sampled tokens, stopping after an EOS "
    "id,\n"
    "and prints the generated ids (text: comma-separated, as --tokens takes them;\n"
    "json: {\"ids\": [...]}).\n";

std::vector<flag_spec> sample_flags() {
  return {
      {"tokens", "IDS",
       "the prompt: comma-separated token ids, e.g. 1,403,407 (required)"},
      {"max-tokens", "N", "tokens to generate at most, at least 1 (required)"},
      {"temperature", "T", "0: argmax; else sample softmax(logprobs / T) (default 1)"},
      {"seed", "S", "seed of the sampling stream (default 0)"},
      {"eos", "IDS", "comma-separated ids that end generation once sampled"},
      {"format", "FORMAT", "text or json (default text)"},
  };
}

} // namespace

int sample_command(const std::vector<std::string>& argv) {
  const auto flags = sample_flags();
  const auto args = parse_args(argv, flags);
  if (args.help) {
    print_usage(std::cout, usage, flags);
    return 0;
  }
  const auto prompt = args.ids("tokens");
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
  const auto ids = lm.sample(prompt, max_tokens, eos, temperature, seed);
  if (format == "json") {
    std::cout << nlohmann::json{{"ids", ids}}.dump() << '\n';
    return 0;
  }
  for (std::size_t i = 0; i < ids.size(); ++i)
    std::cout << (i ? "," : "") << ids[i];
  std::cout << '\n';
  return 0;
}

} // namespace canopy::app
