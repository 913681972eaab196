// canopy vocab: the bytes of every token id (the engine's byte vocabulary), one line
// per id, in a form that survives any byte (hex).

#include "cli_args.hpp"
#include "commands.hpp"

#include <canopy/backends/tokenizers/hex_bytes.hpp>
#include <canopy/engine.hpp>

#include <iostream>

namespace canopy::app {

namespace {

const char* const usage =
    "Usage: canopy vocab [--model PATH] [engine settings]\n\n"
    "Prints one line per id of the model's output head, 0 to vocab-1:\n"
    "  ID<TAB>HEX\n"
    "HEX is the token's exact bytes in lower-case hex (\"Hi\" -> 4869). It is \"-\" for\n"
    "a token without bytes: control tokens (BOS, EOS, <|endoftext|>...) and head rows\n"
    "past the tokenizer's vocabulary. Needs a tokenizer.\n";

} // namespace

int vocab_command(const std::vector<std::string>& argv) {
  const auto args = parse_command_line(argv, usage, {});
  if (args.help)
    return 0;
  const engine lm{args.config};
  const auto& vocab = lm.byte_vocab();
  std::string out; // one write: 50k lines through operator<< each would be slow
  for (std::size_t id = 0; id < vocab.size(); ++id) {
    out += std::to_string(id);
    out += '\t';
    out += vocab[id] ? backends::hex_bytes(*vocab[id]) : "-";
    out += '\n';
  }
  std::cout.write(out.data(), static_cast<std::streamsize>(out.size()));
  std::cout.flush();
  return std::cout ? 0 : 1;
}

} // namespace canopy::app
