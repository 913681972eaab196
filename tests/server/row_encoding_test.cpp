// Log-prob answers on the wire: the JSON shapes, floats that read back as the same
// float32, and the binary format byte for byte against docs/http-api.md's layout table
// (the expected bytes are written here field by field, independently of the encoder).

#include <canopy/server/api/row_encoding.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace canopy::server {
namespace {

using cache::row_dtype;

constexpr float inf = std::numeric_limits<float>::infinity();
const float not_a_number = std::nanf("");

cache::row_ptr row_of(const std::vector<float>& values,
                      row_dtype dtype = row_dtype::float32) {
  return cache::logprob_row::encode(values.data(), values.size(), dtype);
}

std::uint32_t bits_of(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

/// docs/http-api.md's fields, little-endian, appended one by one.
struct le_bytes {
  std::string out;
  le_bytes& raw(const char* text) {
    out += text;
    return *this;
  }
  le_bytes& u8(unsigned v) {
    out += static_cast<char>(v);
    return *this;
  }
  le_bytes& u16(unsigned v) { return u8(v & 0xff).u8((v >> 8) & 0xff); }
  le_bytes& u32(std::uint32_t v) { return u16(v & 0xffff).u16(v >> 16); }
  le_bytes& i32(std::int32_t v) { return u32(static_cast<std::uint32_t>(v)); }
  le_bytes& f32(float v) { return u32(bits_of(v)); }
  le_bytes& f16(float v) { return u16(cache::float_to_half(v)); }
};

std::uint32_t u32_at(const std::string& bytes, std::size_t offset) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) |
        static_cast<unsigned char>(bytes.at(offset + static_cast<std::size_t>(i)));
  return v;
}

// ---- JSON ----

TEST(row_encoding, json_one_sequence_dense) {
  const std::vector<scored_sequence> answers{
      {{1, 2}, {row_of({-0.5f, -1.25f, -inf, not_a_number, inf, 0.1f, -3e-7f})}}};
  EXPECT_EQ(encode_json(answers, {}),
            R"({"tokens":[1,2],"logprobs":[-0.5,-1.25,null,null,null,0.1,-3e-07]})");
}

TEST(row_encoding, json_all_positions_top_k_and_batch) {
  const std::vector<scored_sequence> answers{
      {{4, 5}, {row_of({-1, -2, -0.5f}), row_of({-3, -0.25f, -0.75f})}},
      {{6}, {row_of({-2, -1, -4})}}};
  row_format format;
  format.batch = true;
  format.all_positions = true;
  format.top_k = 2;
  EXPECT_EQ(
      encode_json(answers, format),
      R"({"results":[)"
      R"({"tokens":[4,5],"logprobs":[[-0.5,-1],[-0.25,-0.75]],"ids":[[2,0],[1,2]]},)"
      R"({"tokens":[6],"logprobs":[[-1,-2]],"ids":[[1,0]]}]})");
  format.all_positions = false;
  format.batch = false;
  EXPECT_EQ(encode_json({{{6}, {row_of({-2, -1, -4})}}}, format),
            R"({"tokens":[6],"logprobs":[-1,-2],"ids":[1,0]})");
  format.top_k.reset();
  format.batch = true;
  EXPECT_EQ(encode_json({{{6}, {row_of({-2, -1})}}}, format),
            R"({"results":[{"tokens":[6],"logprobs":[-2,-1]}]})");
}

TEST(row_encoding, json_floats_read_back_as_the_same_float32) {
  std::vector<float> values{0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            0.1f,
                            -0.1f,
                            1.0f / 3,
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(),
                            std::nextafter(-1.0f, 0.0f),
                            16777217.0f,
                            -35.123456789f};
  std::mt19937 rng(7);
  while (values.size() < 50000) { // random bit patterns: every exponent, every mantissa
    const std::uint32_t bits = rng();
    float v;
    std::memcpy(&v, &bits, sizeof v);
    if (std::isfinite(v))
      values.push_back(v);
  }
  std::uniform_real_distribution<float> logprob(-40.0f, 0.0f);
  for (int i = 0; i < 50000; ++i)
    values.push_back(logprob(rng));

  const std::string text = encode_json({{{1}, {row_of(values)}}}, {});
  // As a client reading JSON numbers as doubles, then as float32, sees them.
  const nlohmann::json parsed = nlohmann::json::parse(text);
  const auto& list = parsed.at("logprobs");
  ASSERT_EQ(list.size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(static_cast<float>(list[i].get<double>()), values[i]) << i;
  // As strtof reads the exact text: the very same bits (-0 included).
  const char* at = text.c_str() + text.find("\"logprobs\":[") + 12;
  for (std::size_t i = 0; i < values.size(); ++i) {
    char* end = nullptr;
    const float back = std::strtof(at, &end);
    ASSERT_EQ(bits_of(back), bits_of(values[i]))
        << i << ": " << std::string(at, static_cast<const char*>(end));
    ASSERT_TRUE(*end == ',' || *end == ']');
    at = end + 1;
  }
}

TEST(row_encoding, top_k_is_largest_first_ties_lower_id_first) {
  const auto row = row_of({0.5f, 1, 1, -1, 1, not_a_number, -inf});
  row_format format;
  format.top_k = 4;
  EXPECT_EQ(encode_json({{{0}, {row}}}, format),
            R"({"tokens":[0],"logprobs":[1,1,1,0.5],"ids":[1,2,4,0]})");
  // k past the vocabulary is the vocabulary; NaN ranks with -inf, ties by id.
  format.top_k = 100;
  EXPECT_EQ(
      encode_json({{{0}, {row}}}, format),
      R"({"tokens":[0],"logprobs":[1,1,1,0.5,-1,null,null],"ids":[1,2,4,0,3,5,6]})");
  format.top_k = 1;
  EXPECT_EQ(encode_json({{{0}, {row_of({not_a_number, -inf, -inf})}}}, format),
            R"({"tokens":[0],"logprobs":[null],"ids":[0]})");
}

TEST(row_encoding, rows_stored_as_halves_are_decoded) {
  const std::vector<float> values{-0.1f, -2.7f, -30.3f};
  for (row_dtype dtype : {row_dtype::float16, row_dtype::bfloat16}) {
    const auto row = row_of(values, dtype);
    const nlohmann::json j = nlohmann::json::parse(encode_json({{{1}, {row}}}, {}));
    for (std::size_t i = 0; i < values.size(); ++i)
      EXPECT_EQ(static_cast<float>(j["logprobs"][i].get<double>()), row->at(i));
  }
}

TEST(row_encoding, gpt_sized_row_is_complete) {
  std::vector<float> values(50257);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = -static_cast<float>(i) / 997.0f;
  const nlohmann::json j =
      nlohmann::json::parse(encode_json({{{1}, {row_of(values)}}}, {}));
  EXPECT_EQ(j["logprobs"].size(), values.size());
  EXPECT_EQ(static_cast<float>(j["logprobs"][50256].get<double>()), values[50256]);
}

TEST(row_encoding, broken_preconditions_throw) {
  const auto row = row_of({-1, -2});
  EXPECT_THROW(encode_json({{{1}, {row}}, {{2}, {row}}}, {}), std::invalid_argument);
  EXPECT_THROW(encode_json({{{1, 2}, {row, row}}}, {}), std::invalid_argument);
  row_format batch;
  batch.batch = true;
  EXPECT_THROW(encode_binary({{{1}, {row}}, {{2}, {row_of({-1})}}}, batch),
               std::invalid_argument);
}

// ---- binary ----

TEST(row_encoding, binary_dense_float32) {
  const std::vector<float> values{-0.5f, -inf, not_a_number, 0.1f, -17.25f};
  const std::string bytes = encode_binary({{{7, 300000}, {row_of(values)}}}, {});

  le_bytes expected;
  expected.raw("CNPY").u16(1).u8(1).u8(0); // version, float32, dense
  expected.u32(1).u32(1).u32(5).u32(5);    // sequences, rows, cols, vocab
  expected.u32(2).u32(0);                  // total_tokens, reserved
  expected.u32(2).i32(7).i32(300000);      // lengths, token ids
  for (float v : values)
    expected.f32(v);
  EXPECT_EQ(bytes, expected.out);

  // The header fields at their offsets, read directly.
  ASSERT_EQ(bytes.size(), 32u + 4 + 8 + 20);
  EXPECT_EQ(bytes.substr(0, 4), "CNPY");
  EXPECT_EQ(bytes[4], 1);
  EXPECT_EQ(bytes[5], 0);
  EXPECT_EQ(bytes[6], 1);
  EXPECT_EQ(bytes[7], 0);
  EXPECT_EQ(u32_at(bytes, 8), 1u);
  EXPECT_EQ(u32_at(bytes, 12), 1u);
  EXPECT_EQ(u32_at(bytes, 16), 5u);
  EXPECT_EQ(u32_at(bytes, 20), 5u);
  EXPECT_EQ(u32_at(bytes, 24), 2u);
  EXPECT_EQ(u32_at(bytes, 28), 0u);
  EXPECT_EQ(u32_at(bytes, 32), 2u);
  EXPECT_EQ(u32_at(bytes, 36), 7u);
  EXPECT_EQ(u32_at(bytes, 40), 300000u);
  EXPECT_EQ(u32_at(bytes, 44), bits_of(-0.5f));
}

TEST(row_encoding, binary_top_k_float16_all_positions_batch) {
  const std::vector<scored_sequence> answers{
      {{1, 2}, {row_of({-1, -3, -0.5f, -1}), row_of({-2, -2, -9, -0.125f})}},
      {{-3}, {row_of({not_a_number, -inf, -4, -65504})}}};
  row_format format;
  format.batch = true;
  format.all_positions = true;
  format.top_k = 3;
  format.dtype = wire_dtype::float16;

  le_bytes expected;
  expected.raw("CNPY").u16(1).u8(2).u8(1);            // version, float16, top-k
  expected.u32(2).u32(3).u32(3).u32(4);               // sequences, rows, cols = k, vocab
  expected.u32(3).u32(0);                             // total_tokens, reserved
  expected.u32(2).u32(1);                             // lengths
  expected.i32(1).i32(2).i32(-3);                     // token ids
  for (std::int32_t id : {2, 0, 3, 3, 0, 1, 2, 3, 0}) // top-k ids, row by row
    expected.i32(id);
  for (float v :
       {-0.5f, -1.0f, -1.0f, -0.125f, -2.0f, -2.0f, -4.0f, -65504.0f, not_a_number})
    expected.f16(v);
  EXPECT_EQ(encode_binary(answers, format), expected.out);
}

TEST(row_encoding, binary_dense_batch_of_decoded_rows) {
  const auto half_row = row_of({-0.3f, -7.1f}, row_dtype::bfloat16);
  const std::vector<scored_sequence> answers{{{5}, {row_of({-1.5f, -2.5f})}},
                                             {{6, 7, 8}, {half_row}}};
  row_format format;
  format.batch = true;

  le_bytes expected;
  expected.raw("CNPY").u16(1).u8(1).u8(0);
  expected.u32(2).u32(2).u32(2).u32(2).u32(4).u32(0);
  expected.u32(1).u32(3).i32(5).i32(6).i32(7).i32(8);
  expected.f32(-1.5f).f32(-2.5f).f32(half_row->at(0)).f32(half_row->at(1));
  EXPECT_EQ(encode_binary(answers, format), expected.out);

  // The same rows as float16 on the wire, top-k wider than the vocabulary.
  format.dtype = wire_dtype::float16;
  format.top_k = 10;
  le_bytes topk;
  topk.raw("CNPY").u16(1).u8(2).u8(1);
  topk.u32(2).u32(2).u32(2).u32(2).u32(4).u32(0);
  topk.u32(1).u32(3).i32(5).i32(6).i32(7).i32(8);
  topk.i32(0).i32(1).i32(0).i32(1);
  topk.f16(-1.5f).f16(-2.5f).f16(half_row->at(0)).f16(half_row->at(1));
  EXPECT_EQ(encode_binary(answers, format), topk.out);
}

TEST(row_encoding, answers_never_exceed_the_size_bound_a_server_reserves_ahead) {
  // The longest texts there are: 9 significant digits and a two-digit negative
  // exponent, the most negative token id, and nulls; so the bound is tight enough to
  // matter and must still hold.
  std::vector<float> worst(50, -1.17549435e-38f);
  worst[3] = -inf;
  worst[4] = -3.40282347e+38f;
  const cache::token_seq tokens(7, std::numeric_limits<std::int32_t>::min());
  for (bool batch : {false, true})
    for (bool all_positions : {false, true})
      for (std::optional<std::size_t> top_k :
           {std::optional<std::size_t>{}, std::optional<std::size_t>{3}}) {
        std::vector<scored_sequence> answers(batch ? 3 : 1);
        for (auto& answer : answers) {
          answer.tokens = tokens;
          answer.rows.assign(all_positions ? tokens.size() : 1, row_of(worst));
        }
        for (auto dtype : {wire_dtype::float32, wire_dtype::float16}) {
          const row_format format{batch, all_positions, top_k, dtype};
          const answer_shape shape{answers.size(), answers.size() * tokens.size(),
                                   answers.size() * answers[0].rows.size(), worst.size()};
          EXPECT_EQ(encode_binary(answers, format).size(),
                    encoded_size_bound(shape, format, true));
          const auto json_size = encode_json(answers, format).size();
          const auto bound = encoded_size_bound(shape, format, false);
          EXPECT_LE(json_size, bound);
          EXPECT_GE(json_size * 2, bound)
              << "a bound far above the size refuses for nothing";
        }
      }
}

} // namespace
} // namespace canopy::server
