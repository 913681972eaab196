// The model commands of `canopy` (logprobs, sample, make-model, make-adapter) run as a
// script runs them: their outputs checked against ../shared/oracle (an independent
// float64 reference), and a written synthetic checkpoint or adapter served back.

#include "cli_runner.hpp"
#include "oracle.hpp"
#include "scratch_files.hpp"
#include "shared_fixtures.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

using canopy::testing::describe;
using canopy::testing::run_canopy;

/// `canopy make-model --arch llama` with `shape`'s flags, into `dir`/model: its path, or
/// "" (with the failure added) when the command fails.
std::string made_llama(const canopy::testing::scratch_dir& dir,
                       std::vector<std::string> shape) {
  const auto model = (dir.path() / "model").string();
  shape.insert(shape.begin(), {"make-model", "--arch", "llama"});
  shape.insert(shape.end(), {"--out", model});
  const auto r = run_canopy(shape);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  return r.exit_code == 0 ? model : "";
}

const canopy::testing::oracle_case& once_upon_a_time() {
  static const auto cases = [] {
    return canopy::testing::load_oracle_cases(canopy::testing::shared_dir() /
                                              "oracle/stories260K");
  }();
  for (const auto& c : cases)
    if (c.name == "once_upon_a_time")
      return c;
  throw std::runtime_error("oracle case once_upon_a_time missing");
}

/// Little-endian float32 values, as logprobs --format f32 writes them.
std::vector<float> floats_of(const std::string& bytes) {
  std::vector<float> out(bytes.size() / 4);
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint32_t bits = 0;
    for (int b = 0; b < 4; ++b)
      bits |= std::uint32_t{static_cast<unsigned char>(bytes[4 * i + b])} << (8 * b);
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

TEST(cli_logprobs, text_all_positions_matches_oracle) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/stories260K/cases.json");
  const auto& want = once_upon_a_time();
  const auto r = run_canopy(
      {"logprobs", "--model", model, "--text", "Once upon a time", "--all-positions"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc.at("tokens").get<std::vector<int>>(),
            (std::vector<int>{1, 403, 407, 261, 378}));
  const auto& rows = doc.at("logprobs");
  ASSERT_EQ(rows.size(), 5u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto row = rows[i].get<std::vector<float>>();
    ASSERT_EQ(static_cast<std::int64_t>(row.size()), want.vocab);
    EXPECT_LE(canopy::testing::max_abs_diff(
                  row.data(), want.row(static_cast<std::int64_t>(i)), row.size()),
              want.tolerance)
        << "row " << i;
  }
}

TEST(cli_logprobs, f32_is_rows_times_vocab_floats) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/stories260K/cases.json");
  const auto& want = once_upon_a_time();
  canopy::testing::scratch_dir dir;
  const auto file = dir.path() / "rows.f32";
  auto r = run_canopy({"logprobs", "--model", model, "--tokens", "1,403,407,261,378",
                       "--all-positions", "--format", "f32", "--out", file.string()});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(r.out.empty());
  const auto all = canopy::testing::read_file_bytes(file);
  ASSERT_EQ(all.size(), 5u * 512 * 4);
  EXPECT_LE(canopy::testing::max_abs_diff(floats_of(all).data(), want.logprobs.data(),
                                          want.logprobs.size()),
            want.tolerance);

  // Without --all-positions, to stdout: the last row only, and nothing else.
  r = run_canopy(
      {"logprobs", "--model", model, "--tokens", "1,403,407,261,378", "--format", "f32"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  ASSERT_EQ(r.out.size(), 512u * 4);
  EXPECT_LE(canopy::testing::max_abs_diff(floats_of(r.out).data(), want.row(4), 512),
            want.tolerance);
}

TEST(cli_sample, greedy_json_matches_oracle) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  CANOPY_SHARED_PATH_OR_SKIP(greedy_file, "oracle/stories260K/greedy.json");
  const auto greedy = canopy::testing::read_json(greedy_file);
  ASSERT_EQ(greedy.at("start_tokens"), nlohmann::json::array({1}));
  const auto all_ids = greedy.at("ids").get<std::vector<int>>();
  const std::vector<int> ids(all_ids.begin(), all_ids.begin() + 20);

  const auto r = run_canopy({"sample", "--model", model, "--tokens", "1", "--max-tokens",
                             "20", "--temperature", "0", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  // One JSON document on one line, nothing else.
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc.at("ids").get<std::vector<int>>(), ids);

  // The text is what those ids add after BOS: run.c's output, a prefix of the oracle's
  // 200-token text, and detokenize's bytes for the same ids.
  const auto text = doc.at("text").get<std::string>();
  EXPECT_EQ(greedy.at("text").get<std::string>().rfind(text, 0), 0u) << text;
  std::string ids_arg = "1";
  for (const int id : ids)
    ids_arg += "," + std::to_string(id);
  const auto decoded = run_canopy({"detokenize", "--model", model, "--tokens", ids_arg});
  ASSERT_EQ(decoded.exit_code, 0) << describe(decoded);
  EXPECT_EQ(text, decoded.out);
}

TEST(cli_sample, text_format_prints_ids_then_text) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  const auto r = run_canopy({"sample", "--model", model, "--text", "Once upon a time",
                             "--max-tokens", "3", "--temperature", "0"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  // greedy.json ids 4..6 follow "Once upon a time": ',' ' there' ' was'.
  EXPECT_EQ(r.out, "432,383,286\n, there was\n");
}

// A synthetic adapter for a made model, the same bytes for the same flags, which the
// bench's adapters variant serves: SMC populations under two adapters, whose checked
// answers (one under each) agree with a backend of the bench's own holding the same
// adapters. A GPT-2 model takes none, and says so.
TEST(cli_make_adapter, writes_an_adapter_that_the_bench_serves_under_its_name) {
  canopy::testing::scratch_dir dir;
  const auto model = made_llama(dir, {"--hidden", "32", "--layers", "2", "--heads", "4",
                                      "--vocab", "64", "--context", "32"});
  ASSERT_FALSE(model.empty());
  canopy::testing::cli_result r;
  std::vector<std::string> adapters;
  for (const char* seed : {"3", "4"}) {
    const auto out = (dir.path() / (std::string("adapter") + seed)).string();
    r = run_canopy(
        {"make-adapter", "--model", model, "--rank", "2", "--seed", seed, "--out", out});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.out, "wrote " + out + ": rank=2 alpha=4 layers=2 modules=7 seed=" + seed +
                         " parameters=" +
                         std::to_string(2 * 2 * (32 + 32) * 4 + 2 * 2 * (32 + 96) * 3) +
                         "\n");
    adapters.push_back(std::string("s") + seed + "=" + out);
  }
  r = run_canopy({"make-adapter", "--model", model, "--rank", "2", "--seed", "3", "--out",
                  (dir.path() / "again").string()});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  for (const char* file : {"adapter_config.json", "adapter_model.safetensors"})
    EXPECT_EQ(canopy::testing::read_bytes(dir.path() / "again" / file),
              canopy::testing::read_bytes(dir.path() / "adapter3" / file))
        << file;

  // 2 populations of 10 particles: answers 0, 97 and 194 are checked, in population 0
  // (s3), 1 (s4) and 1.
  r = run_canopy({"bench", "--model", model, "--adapters",
                  adapters[0] + "," + adapters[1], "--workload", "smc", "--particles",
                  "10", "--populations", "2", "--steps", "10", "--prompt-length", "4",
                  "--variants", "full,adapters", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc.at("results").size(), 2u);
  const auto& adapted = doc.at("results").at(1);
  EXPECT_EQ(adapted.at("variant"), "adapters");
  EXPECT_EQ(adapted.at("queries"), 200);
  EXPECT_EQ(adapted.at("rows_checked"), 3);
  EXPECT_EQ(adapted.at("mismatches"), 0);

  const auto gpt2 = (dir.path() / "gpt2").string();
  r = run_canopy({"make-model", "--arch", "gpt2", "--hidden", "32", "--layers", "1",
                  "--heads", "4", "--vocab", "64", "--context", "32", "--out", gpt2});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  r = run_canopy(
      {"make-adapter", "--model", gpt2, "--out", (dir.path() / "no").string()});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_NE(r.err.find("Llama-family models, not gpt2"), std::string::npos) << r.err;
}

TEST(cli_make_model, writes_a_directory_that_logprobs_serves) {
  for (const char* arch : {"llama", "gpt2"}) {
    canopy::testing::scratch_dir dir;
    const auto out = (dir.path() / "model").string();
    auto r = run_canopy({"make-model", "--arch", arch, "--hidden", "32", "--layers", "2",
                         "--heads", "4", "--vocab", "64", "--context", "32", "--seed",
                         "7", "--out", out});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.out.rfind(
                  "wrote " + out + ": arch=" + arch + " hidden=32 layers=2 heads=4 ", 0),
              0u)
        << r.out;
    EXPECT_NE(r.out.find(" vocab=64 context=32 seed=7 parameters="), std::string::npos)
        << r.out;
    EXPECT_TRUE(std::filesystem::exists(dir.path() / "model" / "config.json"));
    EXPECT_TRUE(std::filesystem::exists(dir.path() / "model" / "model.safetensors"));

    r = run_canopy({"logprobs", "--model", out, "--tokens", "1,2,3"});
    ASSERT_EQ(r.exit_code, 0) << arch << ": " << describe(r);
    const auto doc = nlohmann::json::parse(r.out);
    const auto& rows = doc.at("logprobs");
    ASSERT_EQ(rows.size(), 1u);
    const auto row = rows[0].get<std::vector<double>>();
    ASSERT_EQ(row.size(), 64u);
    double total = 0;
    for (const double lp : row)
      total += std::exp(lp);
    EXPECT_NEAR(total, 1.0, 1e-4) << arch;
  }
}

TEST(cli_tokenizer_json,
     a_model_directory_with_tokenizer_json_tokenizes_as_the_hf_library) {
  CANOPY_SHARED_PATH_OR_SKIP(oracle_file, "oracle/tokenizer_json.json");
  CANOPY_SHARED_PATH_OR_SKIP(tokenizer, "models/tokenizers/llama2/tokenizer.json");
  // A synthetic Llama with Llama 2's 32,000 ids and its tokenizer.json beside it, as a
  // downloaded HF directory has them.
  canopy::testing::scratch_dir dir;
  const auto model = made_llama(dir, {"--hidden", "16", "--layers", "1", "--heads", "2",
                                      "--vocab", "32000", "--context", "64"});
  ASSERT_FALSE(model.empty());
  canopy::testing::cli_result r;
  std::filesystem::copy_file(tokenizer, dir.path() / "model" / "tokenizer.json");
  const auto cases =
      canopy::testing::read_json(oracle_file).at("models").at("llama2").at("cases");
  for (std::size_t i = 0; i < cases.size();
       i += 6) { // each run loads the model: a sample
    const auto& c = cases[i];
    const auto text = c.at("text").get<std::string>();
    if (text.empty())
      continue; // --text needs a value
    r = run_canopy({"tokenize", "--model", model, "--text", text, "--format", "json"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(nlohmann::json::parse(r.out).at("ids"), c.at("ids_with_special")) << text;
  }
  // The same tokenizer's speed, as `canopy bench --encode` reports it.
  const auto text_file = (dir.path() / "text.txt").string();
  canopy::testing::write_bytes(text_file, "Once upon a time, there was a tokenizer.\n");
  r = run_canopy(
      {"bench", "--encode", text_file, "--model", model, "--repeat", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const auto report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report.at("kind"), "tokenizer.json");
  EXPECT_EQ(report.at("bytes"), 41);
  EXPECT_GT(report.at("ids").get<int>(), 5);
  EXPECT_GT(report.at("mb_per_s_median").get<double>(), 0.0);
}

} // namespace
