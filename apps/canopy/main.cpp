// canopy: the command-line program. Dispatches to a subcommand and turns its errors into
// messages and exit codes: 0 success, 1 failure, 2 bad usage or input.

#include "cli_args.hpp"
#include "commands.hpp"

#include <canopy/error.hpp>

#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace {

using namespace canopy::app;

struct subcommand {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>&);
};

const subcommand subcommands[] = {
    {"bench",
     "measure the engine on SMC, scoring, cache-hit and cache-miss workloads (mock "
     "backend)",
     bench_command},
    {"logprobs", "print the next-token log-probs after a token sequence or a text",
     logprobs_command},
    {"sample", "extend a token sequence or a text by sampling", sample_command},
    {"tokenize", "print the ids of a text under the model's tokenizer", tokenize_command},
    {"detokenize", "write the exact bytes of token ids", detokenize_command},
    {"vocab", "list the bytes of every token id, in hex", vocab_command},
    {"serve", "serve the engine over HTTP (JSON and binary log-probs, metrics)",
     serve_command},
    {"worker", "lend this machine's devices to fronts on other machines", worker_command},
    {"make-model", "write a seeded synthetic llama or gpt2 checkpoint (HF directory)",
     make_model_command},
    {"make-adapter", "write a seeded synthetic LoRA adapter for a model (PEFT directory)",
     make_adapter_command},
};

void print_help(std::ostream& out) {
  out << "Usage: canopy <command> [options] [engine settings]\n\n"
         "Next-token log-probs for many concurrent callers, with a token-trie cache,\n"
         "duplicate merging and batching.\n\nCommands:\n";
  for (const auto& c : subcommands)
    out << "  " << c.name << std::string(14 - std::string(c.name).size(), ' ')
        << c.summary << '\n';
  out << "\nRun 'canopy <command> --help' for a command's options.\n\n";
  print_engine_keys(out);
}

/// Input the caller can fix is a usage problem (2); anything else is a failure (1).
int exit_code_of(const canopy::error& e) {
  switch (e.code()) {
  case canopy::errc::empty_sequence:
  case canopy::errc::token_out_of_range:
  case canopy::errc::sequence_too_long:
  case canopy::errc::invalid_config:
  case canopy::errc::invalid_request:
  case canopy::errc::no_tokenizer: // text given to a model without one: use --tokens
  case canopy::errc::unknown_adapter:
    return 2;
  default:
    return 1;
  }
}

} // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_help(args.empty() ? std::cerr : std::cout);
    return args.empty() ? 2 : 0;
  }
  for (const auto& c : subcommands) {
    if (args[0] != c.name)
      continue;
    const std::string prefix = std::string("canopy ") + c.name + ": ";
    try {
      return c.run({args.begin() + 1, args.end()});
    } catch (const usage_error& e) {
      std::cerr << prefix << e.what() << "\nRun 'canopy " << c.name
                << " --help' for usage.\n";
      return 2;
    } catch (const canopy::error& e) {
      std::cerr << prefix << e.what() << '\n';
      return exit_code_of(e);
    } catch (const std::exception& e) {
      std::cerr << prefix << e.what() << '\n';
      return 1;
    }
  }
  std::cerr << "canopy: unknown command '" << args[0]
            << "'\nRun 'canopy --help' for usage.\n";
  return 2;
}
