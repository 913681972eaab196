#pragma once
// The expected log-probs of ../shared/oracle (an independent float64 reference), read
// as the oracle README describes: cases.json plus rows x vocab little-endian float32.
// Thread contract: pure functions.

#include "shared_fixtures.hpp"

#include <canopy/cache/types.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace canopy::testing {

struct oracle_case {
  std::string name;
  cache::token_seq tokens;
  std::int64_t rows = 0;
  std::int64_t vocab = 0;
  double tolerance = 0;
  std::vector<float> logprobs; // [rows * vocab]: row i = distribution after tokens[0..i]

  const float* row(std::int64_t i) const { return logprobs.data() + i * vocab; }
};

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("cannot read " + path.string());
  return nlohmann::json::parse(in);
}

/// Every case of an oracle directory (e.g. oracle/stories260K).
inline std::vector<oracle_case> load_oracle_cases(const std::filesystem::path& dir) {
  std::vector<oracle_case> out;
  for (const auto& c : read_json(dir / "cases.json")) {
    oracle_case oc;
    oc.name = c.at("name").get<std::string>();
    oc.tokens = c.at("tokens").get<cache::token_seq>();
    oc.rows = c.at("rows").get<std::int64_t>();
    oc.vocab = c.at("vocab").get<std::int64_t>();
    oc.tolerance = c.at("tolerance_abs").get<double>();
    oc.logprobs.resize(static_cast<std::size_t>(oc.rows * oc.vocab));
    const auto file = dir / c.at("file").get<std::string>();
    std::ifstream in(file, std::ios::binary);
    in.read(reinterpret_cast<char*>(oc.logprobs.data()),
            static_cast<std::streamsize>(oc.logprobs.size() * sizeof(float)));
    if (!in ||
        in.gcount() != static_cast<std::streamsize>(oc.logprobs.size() * sizeof(float)))
      throw std::runtime_error("short oracle file " + file.string());
    out.push_back(std::move(oc));
  }
  if (out.empty())
    throw std::runtime_error("no cases in " + dir.string());
  return out;
}

/// max |a - b| over n values; NaN anywhere gives infinity, so it never passes.
inline double max_abs_diff(const float* a, const float* b, std::size_t n) {
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (std::isnan(d))
      return INFINITY;
    worst = std::max(worst, d);
  }
  return worst;
}

/// What rows showed against the oracle: the largest |error|, the largest KL(oracle ||
/// got) of a row (nats), and how many rows kept the oracle's top token. A NaN stays in
/// the largest error or KL once met, so it fails any bound.
struct oracle_agreement {
  double largest_error = 0;
  double largest_kl = 0;
  std::size_t rows = 0, same_top = 0;

  /// Adds the rows of `got` that answer `c`'s rows from `first` on.
  void add(const std::vector<float>& got, const oracle_case& c, std::int64_t first) {
    const auto n = static_cast<std::int64_t>(got.size()) / c.vocab;
    for (std::int64_t r = 0; r < n; ++r) {
      const float* row = got.data() + r * c.vocab;
      const float* want = c.row(first + r);
      double kl = 0;
      for (std::int64_t v = 0; v < c.vocab; ++v) {
        keep_largest(largest_error, std::abs(static_cast<double>(row[v]) - want[v]));
        kl += std::exp(static_cast<double>(want[v])) *
              (static_cast<double>(want[v]) - row[v]);
      }
      keep_largest(largest_kl, kl);
      same_top += std::max_element(row, row + c.vocab) - row ==
                  std::max_element(want, want + c.vocab) - want;
      ++rows;
    }
  }

private:
  static void keep_largest(double& largest, double x) {
    if (!std::isnan(largest) && (std::isnan(x) || x > largest))
      largest = x;
  }
};

/// A checkpoint under ../shared and the oracle directory its numbers must match.
struct model_fixture {
  const char* model;  // under ../shared
  const char* oracle; // under ../shared
  const char* name;   // for test names
};

inline void PrintTo(const model_fixture& f, std::ostream* os) {
  *os << f.model;
}

/// Every checkpoint with oracle cases: stories260K in both forms, gpt2-synthetic, and
/// the synthetic checkpoints of today's HF architectures (llama3 rope scaling, Qwen2
/// biases, Qwen3 q/k norms and head_dim, Mistral's sliding window).
inline std::vector<model_fixture> oracle_model_list() {
  return {
      model_fixture{"models/stories260K/stories260K.bin", "oracle/stories260K",
                    "stories260K_bin"},
      model_fixture{"models/stories260K/hf", "oracle/stories260K", "stories260K_hf"},
      model_fixture{"models/gpt2-synthetic", "oracle/gpt2-synthetic", "gpt2_synthetic"},
      model_fixture{"models/llama3-synthetic", "oracle/llama3-synthetic",
                    "llama3_synthetic"},
      model_fixture{"models/qwen2-synthetic", "oracle/qwen2-synthetic",
                    "qwen2_synthetic"},
      model_fixture{"models/qwen3-synthetic", "oracle/qwen3-synthetic",
                    "qwen3_synthetic"},
      model_fixture{"models/mistral-swa-synthetic", "oracle/mistral-swa-synthetic",
                    "mistral_swa_synthetic"}};
}

inline auto oracle_models() {
  return ::testing::ValuesIn(oracle_model_list());
}

/// The Llama family's among them (every one but GPT-2).
inline auto llama_family_oracle_models() {
  auto models = oracle_model_list();
  models.erase(std::remove_if(models.begin(), models.end(),
                              [](const model_fixture& m) {
                                return std::string(m.name) == "gpt2_synthetic";
                              }),
               models.end());
  return ::testing::ValuesIn(models);
}

inline std::string
oracle_model_name(const ::testing::TestParamInfo<model_fixture>& info) {
  return info.param.name;
}

} // namespace canopy::testing

/// In a test of a fixture with members `model_path` and `cases`: sets them from the
/// model_fixture `fixture`, or ends the test as CANOPY_SHARED_PATH_OR_SKIP does.
#define CANOPY_LOAD_ORACLE_MODEL_OF(fixture)                                             \
  CANOPY_SHARED_PATH_OR_SKIP(model_dir, (fixture).model);                                \
  CANOPY_SHARED_PATH_OR_SKIP(oracle_dir, (fixture).oracle);                              \
  model_path = model_dir;                                                                \
  cases = ::canopy::testing::load_oracle_cases(oracle_dir)

/// The same, in a test of a fixture parameterized by model_fixture.
#define CANOPY_LOAD_ORACLE_MODEL() CANOPY_LOAD_ORACLE_MODEL_OF(GetParam())
