// canopy logprobs: the next-token log-probs after a token sequence (or after each of
// its prefixes), from an engine built from the command line.

#include "cli_args.hpp"
#include "commands.hpp"

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
    "Usage: canopy logprobs --tokens IDS [options] [engine settings]\n\n"
    "Prints the next-token log-probs (natural log) after the token sequence IDS.\n"
    "json: {\"tokens\": [...], \"logprobs\": [[...]]}; f32: rows x vocab little-endian\n"
    "float32. With --all-positions, row i is the distribution after tokens[0..i].\n";

std::vector<flag_spec> logprobs_flags() {
  return {
      {"tokens", "IDS", "comma-separated token ids, e.g. 1,403,407 (required)"},
      {"all-positions", "", "one row after every prefix instead of one after the whole"},
      {"format", "FORMAT", "json or f32 (default json)"},
      {"out", "FILE", "write there instead of to standard output"},
  };
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
  const auto flags = logprobs_flags();
  const auto args = parse_args(argv, flags);
  if (args.help) {
    print_usage(std::cout, usage, flags);
    return 0;
  }
  const auto tokens = args.ids("tokens");
  const auto format = args.text("format", "json");
  if (format != "json" && format != "f32")
    throw usage_error("--format: unknown '" + format + "' (known: json, f32)");
  std::ofstream file;
  if (args.has("out")) {
    file.open(args.text("out", ""), std::ios::binary);
    if (!file)
      throw usage_error("--out: cannot write '" + args.text("out", "") + "'");
  }
  std::ostream& out = args.has("out") ? file : std::cout;

  std::vector<token_seq> queries;
  for (std::size_t length = args.has("all-positions") ? 1 : tokens.size();
       length <= tokens.size(); ++length)
    queries.emplace_back(tokens.begin(), tokens.begin() + length);
  engine lm{args.config};
  const auto rows = lm.batch_next_token_logprobs(queries).contiguous();
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
