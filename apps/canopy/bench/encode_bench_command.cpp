// canopy bench --encode: tokenizer encoding speed (see encode_bench_command.hpp).

#include "bench/encode_bench_command.hpp"

#include "cli_args.hpp"
#include "text_output.hpp"

#include <canopy/backends/tokenizers/tokenizer.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>

namespace canopy::app {

namespace {

const char* const usage =
    "Usage: canopy bench --encode FILE [--model PATH | --tokenizer PATH] [--repeat N]\n"
    "                    [--json]\n\n"
    "Encodes the whole of FILE with the model's tokenizer (found as the engine finds "
    "it,\n"
    "or named by --tokenizer: a tokenizer.json, vocab.json + merges.txt, a .model or a\n"
    "llama2.c .bin), N times on this thread, and prints MB/s (best and median), the ids\n"
    "and a checksum of them (sum of (i + 1) * id mod 2^32, as "
    "scripts/bench-tokenizers.sh\n"
    "computes for the HF library's ids, so both can be seen to agree).\n";

std::vector<flag_spec> encode_flags() {
  return {{"encode", "FILE", "the text to encode (required)"},
          {"repeat", "N", "encodings timed (default 5)"},
          {"json", "", "one JSON object instead of text"}};
}

std::uint32_t checksum(const std::vector<cache::token_id>& ids) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < ids.size(); ++i)
    sum += static_cast<std::uint32_t>(i + 1) * static_cast<std::uint32_t>(ids[i]);
  return sum;
}

} // namespace

bool names_encode_bench(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "--encode" || a.rfind("--encode=", 0) == 0;
  });
}

int encode_bench_command(const std::vector<std::string>& argv) {
  const auto args = parse_command_line(argv, usage, encode_flags());
  if (args.help)
    return 0;
  const auto file = args.text("encode", "");
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw usage_error("--encode: cannot read '" + file + "'");
  const std::string text((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  const auto repeat = args.count("repeat", 5, 1);
  const auto path = !args.config.tokenizer.empty()
                        ? std::filesystem::path(args.config.tokenizer)
                        : backends::find_tokenizer(args.config.model);
  if (path.empty())
    throw usage_error(
        "no tokenizer: give --tokenizer PATH, or a --model with one beside it");
  const auto tokenizer = backends::load_tokenizer(path);

  std::vector<double> mb_per_s;
  std::vector<cache::token_id> ids;
  for (std::uint64_t r = 0; r < repeat; ++r) {
    const auto started = std::chrono::steady_clock::now();
    ids = tokenizer->encode(text);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
    mb_per_s.push_back(static_cast<double>(text.size()) / 1e6 / took.count());
  }
  std::sort(mb_per_s.begin(), mb_per_s.end());
  const double best = mb_per_s.back(), median = mb_per_s[mb_per_s.size() / 2];
  if (args.has("json")) {
    std::cout << json_line({{"tokenizer", path.string()},
                            {"kind", std::string(tokenizer->kind())},
                            {"bytes", text.size()},
                            {"ids", ids.size()},
                            {"checksum", checksum(ids)},
                            {"mb_per_s_best", best},
                            {"mb_per_s_median", median}});
  } else {
    std::cout << "canopy bench --encode: " << path.string() << " (" << tokenizer->kind()
              << "), " << text.size() << " bytes -> " << ids.size() << " ids (checksum "
              << checksum(ids) << "), one thread, " << repeat << " runs\n"
              << "MB/s: best " << best << ", median " << median << '\n';
  }
  return 0;
}

} // namespace canopy::app
