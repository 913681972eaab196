// canopy make-adapter: writes a seeded synthetic LoRA adapter for a model as PEFT writes
// one, so that adapters can be served, tested and benchmarked without training one.

#include "cli_args.hpp"
#include "commands.hpp"

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/synthetic_lora_adapter.hpp>

#include <iostream>
#include <stdexcept>

namespace canopy::app {

namespace {

const char* const usage =
    "Usage: canopy make-adapter --model PATH [--rank R] [--alpha A] [--seed S]\n"
    "                           --out DIR\n\n"
    "Writes DIR/adapter_config.json and DIR/adapter_model.safetensors: a PEFT LoRA\n"
    "adapter of every projection (q, k, v, o, gate, up and down) in every layer of the\n"
    "Llama-family model at PATH, rank R, scale A / R, float32 factors drawn from a\n"
    "portable stream seeded by S, so the same flags give the same bytes on every\n"
    "machine. Only the model's config is read. Serve it with --adapters NAME=DIR.\n"
    "Prints one line:\n"
    "  wrote DIR: rank=R alpha=A layers=L modules=7 seed=S parameters=P\n";

std::vector<flag_spec> make_adapter_flags() {
  return {
      {"model", "PATH",
       "the model adapted: an HF directory or any model file (required)"},
      {"rank", "R", "rank of the factors (default 4)"},
      {"alpha", "A", "lora_alpha (default 2R)"},
      {"seed", "S", "seed of the factors (default 1)"},
      {"out", "DIR", "directory to write (required)"},
  };
}

} // namespace

int make_adapter_command(const std::vector<std::string>& argv) {
  const auto args =
      parse_command_line(argv, usage, make_adapter_flags(), engine_settings::refused);
  if (args.help)
    return 0;
  for (const char* flag : {"model", "out"})
    if (args.text(flag, "").empty())
      throw usage_error(std::string("--") + flag + " is required");
  const std::string dir = args.text("out", "");

  backends::synthetic_lora_spec spec;
  spec.rank = static_cast<std::int64_t>(args.count("rank", 4, 1));
  spec.alpha = args.number("alpha", 2.0 * static_cast<double>(spec.rank));
  spec.seed = args.count("seed", spec.seed);
  const auto base = backends::load_model_config(args.text("model", ""));
  backends::synthetic_lora adapter;
  try {
    adapter = backends::make_synthetic_lora(base, spec);
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what()); // names the flag's field, or the model's architecture
  }
  backends::write_lora_adapter(adapter, dir);

  std::uint64_t parameters = 0;
  for (const auto& [weight, f] : adapter.factors)
    parameters += f.a.size() + f.b.size();
  std::cout << "wrote " << dir << ": rank=" << spec.rank << " alpha=" << spec.alpha
            << " layers=" << base.num_layers << " modules=7 seed=" << spec.seed
            << " parameters=" << parameters << '\n';
  return 0;
}

} // namespace canopy::app
