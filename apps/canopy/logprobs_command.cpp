// canopy logprobs: the next-token log-probs after a token sequence or a text (or after
// each of its prefixes), from an engine built from the command line.

#include "cli_args.hpp"
#include "commands.hpp"
#include "prompt_input.hpp"

#include <canopy/engine.hpp>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <iostream>

namespace canopy::app {

namespace {

// Keys in the order written, and float elements, so that each value prints as the
// shortest text reading back as the same float32 rather than as a long double expansion.
using json_f32 = nlohmann::basic_json<nlohmann::ordered_map, std::vector, std::string,
                                      bool, std::int64_t, std::uint64_t, float>;

const char* const usage =
    "Usage: canopy logprobs [--model PATH] (--tokens IDS | --text TEXT) [options]\n"
    "                       [engine settings]\n\n"
    "Prints the next-token log-probs (natural log) after the token sequence: IDS, or\n"
    "TEXT tokenized by the model's tokenizer in its own convention (llama2.c adds BOS;\n"
    "GPT-2 adds nothing; a .bin model uses --tokenizer FILE, else tokenizer.bin or\n"
    "tok512.bin beside it). Exactly one of --tokens and --text.\n"
    "json: {\"tokens\": [...], \"logprobs\": [[...], ...]} on one line (tokens: the ids\n"
    "used); f32: rows x vocab little-endian float32, row-major, nothing else.\n"
    "Without --all-positions there is one row, after the whole sequence; with it,\n"
    "row i is the distribution after tokens[0..i].\n";

std::vector<flag_spec> logprobs_flags() {
  auto flags = prompt_flags("the sequence");
  flags.push_back(
      {"all-positions", "", "one row after every prefix instead of one after the whole"});
  flags.push_back({"format", "FORMAT", "json or f32 (default json)"});
  flags.push_back({"out", "FILE", "write there instead of to standard output"});
  return flags;
}

void write_json(std::ostream& out, const token_seq& tokens, const at::Tensor& rows) {
  json_f32 doc = {{"tokens", tokens}, {"logprobs", json_f32::array()}};
  const auto vocab = rows.size(1);
  for (std::int64_t r = 0; r < rows.size(0); ++r) {
    const float* row = rows[r].data_ptr<float>();
    doc["logprobs"].push_back(std::vector<float>(row, row + vocab));
  }
  out << doc.dump() << '\n';
}

void write_f32(std::ostream& out, const at::Tensor& rows) {
  const float* values = rows.data_ptr<float>();
  std::vector<unsigned char> bytes(static_cast<std::size_t>(rows.numel()) * 4);
  for (std::size_t i = 0; i < bytes.size() / 4; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    for (int b = 0; b < 4; ++b) // little-endian whatever the host's order
      bytes[4 * i + b] = static_cast<unsigned char>(bits >> (8 * b));
  }
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

} // namespace

int logprobs_command(const std::vector<std::string>& argv) {
  const auto args = parse_command_line(argv, usage, logprobs_flags());
  if (args.help)
    return 0;
  const auto prompt = read_prompt(args);
  const auto format = args.text("format", "json");
  if (format != "json" && format != "f32")
    throw usage_error("--format: unknown '" + format + "' (known: json, f32)");
  engine lm{args.config};
  const auto tokens = prompt_tokens(prompt, lm);
  std::vector<token_seq> queries;
  for (std::size_t length = args.has("all-positions") ? 1 : tokens.size();
       length <= tokens.size(); ++length)
    queries.emplace_back(tokens.begin(), tokens.begin() + length);
  const auto rows = lm.batch_next_token_logprobs(queries).contiguous();

  // Opened only once the rows exist, so that a refused sequence (no tokenizer, an id
  // out of range) leaves an existing FILE as it was rather than truncated.
  std::ofstream file;
  if (args.has("out")) {
    file.open(args.text("out", ""), std::ios::binary);
    if (!file)
      throw usage_error("--out: cannot write '" + args.text("out", "") + "'");
  }
  std::ostream& out = args.has("out") ? file : std::cout;
  if (format == "json")
    write_json(out, tokens, rows);
  else
    write_f32(out, rows);
  out.flush();
  if (!out)
    throw std::runtime_error("writing the log-probs failed");
  return 0;
}

} // namespace canopy::app
