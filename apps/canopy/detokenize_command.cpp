// canopy detokenize: the exact bytes of token ids under the model's tokenizer.

#include "cli_args.hpp"
#include "commands.hpp"

#include <canopy/engine.hpp>

#include <iostream>

namespace canopy::app {

namespace {

const char* const usage =
    "Usage: canopy detokenize [--model PATH] --tokens IDS [engine settings]\n\n"
    "Writes the exact bytes of the ids IDS under the model's tokenizer to standard\n"
    "output and nothing else: no newline is added, and the bytes need not be valid\n"
    "UTF-8. llama2.c: run.c's decode rules (the space after BOS is dropped, <0xHH> is\n"
    "the byte HH); control tokens give no bytes. An id outside the tokenizer's\n"
    "vocabulary is refused.\n";

std::vector<flag_spec> detokenize_flags() {
  return {{"tokens", "IDS", "comma-separated token ids, e.g. 1,403,407 (required)"}};
}

} // namespace

int detokenize_command(const std::vector<std::string>& argv) {
  const auto args = parse_command_line(argv, usage, detokenize_flags());
  if (args.help)
    return 0;
  const auto ids = args.ids("tokens");
  const engine lm{args.config};
  const auto bytes = lm.detokenize(ids);
  std::cout.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::cout.flush();
  return std::cout ? 0 : 1;
}

} // namespace canopy::app
