// GGUF models answer as the checkpoints they were converted from. Each oracle model
// GGUF can describe (stories260K from llama2.c and from HF, Qwen2, Qwen3, and Llama 3
// with its rope scaling as rope_freqs; Mistral's window is no GGUF "llama" key) is
// written as llama.cpp's converter writes it (gguf_writer.hpp: "llama" q/k rows
// interleaved), then:
//  - in F32 it gives the source's log-probs on every oracle case, to the bit (the same
//    weights and the same arithmetic; the file's float32 epsilon is the float32 value
//    the source's double rounds to in the norms);
//  - in F16 and BF16 it gives the log-probs of the F32 file of its rounded values;
//  - with projections in Q8_0 or Q4_0 records it is served in those blocks unasked
//    (weight_dtype unset), exactly as they are: random records, each block reaching
//    its format's extreme, so that requantizing their values reproduces them, give the
//    same bits as the F32 file of those values quantized by weight_dtype int8 or int4.
#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/models/torch_backend.hpp>

#include "gguf_writer.hpp"
#include "oracle.hpp"
#include "pass_items.hpp"
#include "scratch_files.hpp"
#include "shared_fixtures.hpp"
#include "test_device.hpp"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <random>

namespace {

using namespace canopy::backends;
using canopy::testing::ggml_type;
using canopy::testing::model_fixture;
using canopy::testing::oracle_case;
using canopy::testing::scratch_dir;

class gguf_model : public ::testing::TestWithParam<model_fixture> {
protected:
  std::filesystem::path model_path;
  std::vector<oracle_case> cases;

  /// The log-probs of every case, each in one pass, by the model at `path`.
  std::vector<std::vector<float>> answers(const std::filesystem::path& path,
                                          torch_options options = {},
                                          model_info* info = nullptr) const {
    options.kv_budget_bytes = 16u << 20;
    auto backend = make_torch_backend(load_checkpoint(path), "cpu", options);
    if (info)
      *info = backend->info();
    std::vector<std::vector<float>> out;
    for (const auto& c : cases) {
      pass_request request;
      request.items.push_back(canopy::testing::item(c.tokens));
      out.push_back(backend->run(request).items[0].logprobs);
    }
    return out;
  }
};

std::string bytes_of(const void* data, std::size_t n) {
  return {static_cast<const char*>(data), n};
}

/// Values rounded through `T` (c10::Half or c10::BFloat16), and their bits.
template <class T>
std::pair<std::vector<float>, std::string> rounded(const std::vector<float>& values) {
  std::vector<float> back;
  std::vector<std::uint16_t> bits;
  for (const float v : values) {
    const T t(v);
    back.push_back(static_cast<float>(t));
    bits.push_back(t.x);
  }
  return {back, bytes_of(bits.data(), bits.size() * 2)};
}

std::pair<ggml_type, std::string> f32_bytes(const std::vector<float>& values) {
  return {ggml_type::f32, bytes_of(values.data(), values.size() * sizeof(float))};
}

TEST_P(gguf_model, f32_file_answers_as_its_source_to_the_bit) {
  if (canopy::testing::test_device() != "cpu")
    GTEST_SKIP() << "one device is enough for a file format";
  CANOPY_LOAD_ORACLE_MODEL();
  scratch_dir dir;
  canopy::testing::write_bytes(
      dir / "m.gguf",
      canopy::testing::gguf_of(load_checkpoint(model_path), canopy::testing::as_f32));
  EXPECT_EQ(answers(dir / "m.gguf"), answers(model_path));
}

TEST_P(gguf_model, f16_and_bf16_files_answer_as_their_values) {
  if (canopy::testing::test_device() != "cpu")
    GTEST_SKIP() << "one device is enough for a file format";
  CANOPY_LOAD_ORACLE_MODEL();
  const auto source = load_checkpoint(model_path);
  scratch_dir dir;
  for (const bool bf16 : {false, true}) {
    auto values_of = [&](const std::vector<float>& v) {
      return bf16 ? rounded<c10::BFloat16>(v) : rounded<c10::Half>(v);
    };
    canopy::testing::write_bytes(
        dir / "half.gguf",
        canopy::testing::gguf_of(source, [&](const std::string&, const auto& v,
                                             const auto&) {
          return std::pair{bf16 ? ggml_type::bf16 : ggml_type::f16, values_of(v).second};
        }));
    canopy::testing::write_bytes(
        dir / "values.gguf",
        canopy::testing::gguf_of(source,
                                 [&](const std::string&, const auto& v, const auto&) {
                                   return f32_bytes(values_of(v).first);
                                 }));
    EXPECT_EQ(answers(dir / "half.gguf"), answers(dir / "values.gguf"))
        << (bf16 ? "BF16" : "F16");
  }
}

/// Random records of `type` for a [rows, inputs] matrix, each block holding its
/// format's extreme (|q| = 127, or the nibble 0: -8 d), and their values.
std::pair<std::string, std::vector<float>> random_records(ggml_type type,
                                                          std::int64_t rows,
                                                          std::int64_t inputs,
                                                          std::mt19937& rng) {
  const bool q8 = type == ggml_type::q8_0;
  std::uniform_int_distribution<int> quant(q8 ? -127 : 0, q8 ? 127 : 15);
  std::uniform_int_distribution<int> place(0, 31);
  std::normal_distribution<float> scale(0.0f, q8 ? 6e-4f : 1e-2f);
  std::string records;
  std::vector<float> values;
  for (std::int64_t b = 0; b < rows * inputs / 32; ++b) {
    const c10::Half d(q8 ? std::fabs(scale(rng)) : scale(rng));
    int q[32];
    for (int& x : q)
      x = quant(rng);
    q[place(rng)] = q8 ? 127 * (place(rng) % 2 ? 1 : -1) : 0;
    records += bytes_of(&d.x, 2);
    for (int j = 0; j < (q8 ? 32 : 16); ++j)
      records += static_cast<char>(q8 ? q[j] : q[j] | q[j + 16] << 4);
    for (int j = 0; j < 32; ++j)
      values.push_back(static_cast<float>(d) * static_cast<float>(q8 ? q[j] : q[j] - 8));
  }
  return {records, values};
}

TEST_P(gguf_model, records_are_served_as_they_are) {
  if (canopy::testing::test_device() != "cpu")
    GTEST_SKIP() << "weights in blocks run on the CPU";
  CANOPY_LOAD_ORACLE_MODEL();
  const auto source = load_checkpoint(model_path);
  scratch_dir dir;
  for (const auto& [type, format] :
       {std::pair{ggml_type::q8_0, "int8"}, std::pair{ggml_type::q4_0, "int4"}}) {
    std::mt19937 rng(31);
    std::map<std::string, std::vector<float>> values; // of the tensors in records
    canopy::testing::write_bytes(
        dir / "records.gguf",
        canopy::testing::gguf_of(
            source, [&](const std::string& name, const auto& v, const auto& shape) {
              if (name.find("proj.weight") == std::string::npos || shape[1] % 32 != 0)
                return f32_bytes(v);
              auto [records, dequantized] = random_records(type, shape[0], shape[1], rng);
              values[name] = std::move(dequantized);
              return std::pair{type, records};
            }));
    ASSERT_FALSE(values.empty());
    canopy::testing::write_bytes(
        dir / "values.gguf",
        canopy::testing::gguf_of(
            source, [&](const std::string& name, const auto& v, const auto&) {
              const auto found = values.find(name);
              return f32_bytes(found == values.end() ? v : found->second);
            }));
    model_info served, requantized;
    const auto from_records = answers(dir / "records.gguf", {}, &served);
    torch_options options;
    options.weight_dtype = format;
    EXPECT_EQ(from_records, answers(dir / "values.gguf", options, &requantized))
        << format;
    EXPECT_EQ(served.weight_dtype, format);
    EXPECT_EQ(served.weight_bytes, requantized.weight_bytes) << format;
    // Asked for dense weights, the records are dequantized.
    options.weight_dtype = "float32";
    model_info dense;
    answers(dir / "records.gguf", options, &dense);
    EXPECT_EQ(dense.weight_dtype, "float32");
    EXPECT_GT(dense.weight_bytes, served.weight_bytes);
  }
}

// Llama 3's rope scaling reaches a GGUF file as rope_freqs: one factor per rotated
// pair, computed and stored in float32, where the HF checkpoint computes its
// frequencies in float64. The file answers every oracle case within the oracle's
// tolerance, as the checkpoint does; without the factors it would not (the oracle
// cases reach past original_max_position_embeddings, 64).
class gguf_rope_freqs : public gguf_model {};

TEST_P(gguf_rope_freqs, llama3_scaling_answers_within_the_oracle_tolerance) {
  if (canopy::testing::test_device() != "cpu")
    GTEST_SKIP() << "one device is enough for a file format";
  CANOPY_LOAD_ORACLE_MODEL();
  const checkpoint source = load_checkpoint(model_path);
  ASSERT_EQ(source.config.scaling.type, rope_scaling::kind::llama3);
  scratch_dir dir;
  canopy::testing::write_bytes(dir / "m.gguf",
                               canopy::testing::gguf_of(source, canopy::testing::as_f32));
  const auto config = load_model_config(dir / "m.gguf");
  ASSERT_EQ(config.scaling.type, rope_scaling::kind::per_frequency);
  const auto written = canopy::testing::llama3_rope_freqs(source.config);
  EXPECT_EQ(config.scaling.frequency_factors,
            std::vector<double>(written.begin(), written.end()));
  const auto got = answers(dir / "m.gguf");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    ASSERT_EQ(got[i].size(), c.logprobs.size());
    EXPECT_LE(canopy::testing::max_abs_diff(got[i].data(), c.logprobs.data(),
                                            c.logprobs.size()),
              c.tolerance)
        << c.name;
  }
}

/// The oracle models of these names.
std::vector<model_fixture> models_named(std::initializer_list<const char*> names) {
  std::vector<model_fixture> out;
  for (const auto& m : canopy::testing::oracle_model_list())
    for (const char* name : names)
      if (std::string(m.name) == name)
        out.push_back(m);
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    shared_models, gguf_model,
    ::testing::ValuesIn(models_named({"stories260K_bin", "stories260K_hf",
                                      "qwen2_synthetic", "qwen3_synthetic"})),
    canopy::testing::oracle_model_name);

INSTANTIATE_TEST_SUITE_P(shared_models, gguf_rope_freqs,
                         ::testing::ValuesIn(models_named({"llama3_synthetic"})),
                         canopy::testing::oracle_model_name);

} // namespace
