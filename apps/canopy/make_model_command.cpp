// canopy make-model: writes a seeded synthetic checkpoint as an HF directory, so that
// any shape can be served, tested or benchmarked without a download.

#include "cli_args.hpp"
#include "commands.hpp"

#include <canopy/backends/checkpoints/checkpoint_writer.hpp>
#include <canopy/backends/checkpoints/synthetic_checkpoint.hpp>

#include <iostream>
#include <limits>
#include <stdexcept>

namespace canopy::app {

namespace {

const char* const usage =
    "Usage: canopy make-model --arch llama|gpt2 --hidden H --layers L --heads N\n"
    "                         [--kv-heads K] [--intermediate I] [--vocab V]\n"
    "                         [--context C] [--seed S] --out DIR\n\n"
    "Writes DIR/config.json and DIR/model.safetensors (float32, tied embeddings): a\n"
    "model with random weights drawn from a portable stream seeded by S, so the same\n"
    "flags give the same bytes on every machine. It has no tokenizer: serve it with\n"
    "--tokens. DIR is created if needed; existing files of those names are replaced.\n"
    "Prints one line (wrapped here):\n"
    "  wrote DIR: arch=A hidden=H layers=L heads=N kv_heads=K intermediate=I vocab=V\n"
    "  context=C seed=S parameters=P\n";

std::vector<flag_spec> make_model_flags() {
  return {
      {"arch", "ARCH", "llama or gpt2 (required)"},
      {"hidden", "H", "hidden size, a multiple of --heads (required)"},
      {"layers", "L", "transformer blocks (required)"},
      {"heads", "N", "query heads (required)"},
      {"kv-heads", "K", "llama: KV heads, dividing N (default N; gpt2: N only)"},
      {"intermediate", "I", "MLP width (default llama: 8H/3 rounded up to 32; gpt2: 4H)"},
      {"vocab", "V", "vocabulary size (default 512)"},
      {"context", "C", "longest sequence (default 128)"},
      {"seed", "S", "seed of the weights (default 1)"},
      {"out", "DIR", "directory to write (required)"},
  };
}

/// A positive size, or `fallback` when the flag is absent (0 lets the spec choose).
std::int64_t size_flag(const parsed_args& args, const char* flag, std::int64_t fallback) {
  constexpr auto most =
      static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  const auto n = args.count(flag, static_cast<std::uint64_t>(fallback), 1);
  if (n > most)
    throw usage_error(std::string("--") + flag + ": too large");
  return static_cast<std::int64_t>(n);
}

std::int64_t required_size(const parsed_args& args, const char* flag) {
  if (!args.has(flag))
    throw usage_error(std::string("--") + flag + " is required");
  return size_flag(args, flag, 0);
}

backends::synthetic_spec read_spec(const parsed_args& args) {
  backends::synthetic_spec spec;
  if (!args.has("arch"))
    throw usage_error("--arch is required (llama or gpt2)");
  const auto arch = args.text("arch", "");
  if (arch == "llama")
    spec.arch = backends::architecture::llama;
  else if (arch == "gpt2")
    spec.arch = backends::architecture::gpt2;
  else
    throw usage_error("--arch: unknown '" + arch + "' (known: llama, gpt2)");
  spec.hidden = required_size(args, "hidden");
  spec.layers = required_size(args, "layers");
  spec.heads = required_size(args, "heads");
  spec.kv_heads = size_flag(args, "kv-heads", 0);
  spec.intermediate = size_flag(args, "intermediate", 0);
  spec.vocab = size_flag(args, "vocab", spec.vocab);
  spec.context = size_flag(args, "context", spec.context);
  spec.seed = args.count("seed", spec.seed);
  return spec;
}

} // namespace

int make_model_command(const std::vector<std::string>& argv) {
  const auto args =
      parse_command_line(argv, usage, make_model_flags(), engine_settings::refused);
  if (args.help)
    return 0;
  const auto spec = read_spec(args);
  if (!args.has("out") || args.text("out", "").empty())
    throw usage_error("--out DIR is required");
  const std::string dir = args.text("out", "");

  backends::checkpoint ckpt;
  try {
    ckpt = backends::make_synthetic_checkpoint(spec);
  } catch (const std::invalid_argument& e) {
    // The spec names the field at fault: a flag the user can fix.
    throw usage_error(e.what());
  }
  backends::write_hf_checkpoint(ckpt, dir);

  std::int64_t parameters = 0;
  for (const auto& [name, view] : ckpt.tensors)
    parameters += backends::numel(view);
  const auto& c = ckpt.config;
  std::cout << "wrote " << dir << ": arch=" << backends::to_string(c.arch)
            << " hidden=" << c.hidden_size << " layers=" << c.num_layers
            << " heads=" << c.num_heads << " kv_heads=" << c.num_kv_heads
            << " intermediate=" << c.intermediate_size << " vocab=" << c.vocab_size
            << " context=" << c.context_length << " seed=" << spec.seed
            << " parameters=" << parameters << '\n';
  return 0;
}

} // namespace canopy::app
